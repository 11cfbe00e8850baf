"""KernelBench files as rooftop problems: read a checkout or its published parquet dataset, and
write each file as a problem folder of the deck `kernelbench/level{L}`.

A KernelBench file holds `class Model`, `get_inputs()` and `get_init_inputs()` (neither takes an
argument) and its sizes as module constants: one fixed shape. Its problem.yaml says
`kernelbench: true` (the functions are called without shape parameters), dtype float32, one shape
`default` whose params are those constants, and roofline figures counted at import
(`figures: estimated`, see problem/figures.py), since the file has no formulas.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from rooftop.errors import UserError
from rooftop.problem.formats import FORMATS, DeckFormat, Progress, check_reference
from rooftop.problem.imports import Imported, ImportReport, Note, Skipped
from rooftop.problem.spec import ParamValue, Policy, Problem, ProblemSpec, Shape
from rooftop.yamlfile import read_yaml

DECK = "kernelbench"
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
_LEVEL_FOLDER = re.compile(r"^level(\d+)$")
_PROBLEM_FILE = re.compile(r"^(\d+)_.*\.py$")
PARQUET_COLUMNS = ("code", "level", "name", "problem_id")


@dataclass(frozen=True)
class SourceFile:
    """One KernelBench problem's code, wherever it was read from."""

    level: int
    problem_id: int
    stem: str  # the file name without .py, e.g. 19_ReLU
    code: str
    origin: str  # the file, or the parquet row, for messages

    @property
    def deck(self) -> str:
        return f"{DECK}/level{self.level}"

    @property
    def name(self) -> str:
        """The problem's name in the decks: kernelbench/level1/19_ReLU."""
        return f"{self.deck}/{safe_name(self.stem)}"


def safe_name(stem: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in stem) or "_"


# -- reading ------------------------------------------------------------------------------------
def read_sources(path: Path) -> tuple[list[SourceFile], list[Skipped]]:
    """Every problem file of a checkout (its KernelBench/level*/ folders), of one level folder, or
    of a parquet file of the dataset; files that cannot be problems are skipped with a reason."""
    path = Path(path)
    if path.is_file() and path.suffix == ".parquet":
        return _read_parquet(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder (expected a KernelBench checkout, a level folder "
                        "or a .parquet file of its dataset)")
    folders = _level_folders(path) if path.is_dir() else []
    if not folders:
        raise UserError(f"{path}: no KernelBench level folders here (expected KernelBench/level1, ... in a "
                        "checkout, a level folder itself, or a .parquet file of its dataset)")
    sources: list[SourceFile] = []
    skipped: list[Skipped] = []
    for level, folder in folders:
        for file in sorted(folder.glob("*.py"), key=lambda p: natural_key(p.name)):
            match = _PROBLEM_FILE.match(file.name)
            if not match:
                skipped.append(Skipped(origin=str(file), reason="the file name does not start with a problem id "
                                                                "(<id>_<Name>.py)"))
                continue
            try:
                code = file.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                skipped.append(Skipped(origin=str(file), reason=f"unreadable: {exc}"))
                continue
            sources.append(SourceFile(level, int(match.group(1)), file.stem, code, str(file)))
    if not sources and not skipped:
        raise UserError(f"{path}: its level folders hold no problem files (<id>_<Name>.py)")
    return _unique(sources, skipped)


def _level_folders(path: Path) -> list[tuple[int, Path]]:
    match = _LEVEL_FOLDER.match(path.name)
    if match:
        return [(int(match.group(1)), path)]
    for base in (path / "KernelBench", path):
        found = sorted((int(m.group(1)), p) for p in base.glob("level*")
                       if p.is_dir() and (m := _LEVEL_FOLDER.match(p.name)))
        if found:
            return found
    return []


def _read_parquet(path: Path) -> tuple[list[SourceFile], list[Skipped]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(f"{path}: reading a parquet file needs pyarrow: pip install 'rooftop[parquet]'") from None
    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise UserError(f"{path}: not a readable parquet file ({' '.join(str(exc).split())[:200]})") from None
    missing = [c for c in PARQUET_COLUMNS if c not in table.column_names]
    if missing:
        raise UserError(f"{path}: the parquet file has no column(s) {', '.join(missing)} "
                        f"(expected {', '.join(PARQUET_COLUMNS)})")
    sources: list[SourceFile] = []
    skipped: list[Skipped] = []
    for index, row in enumerate(table.select(list(PARQUET_COLUMNS)).to_pylist()):
        origin = f"{path.name} row {index}"
        try:
            level, problem_id = int(row["level"]), int(row["problem_id"])
            stem = str(row["name"]).removesuffix(".py")
            code = str(row["code"])
        except (TypeError, ValueError):
            skipped.append(Skipped(origin=origin, reason="level or problem_id is not an integer"))
            continue
        if row["code"] is None or row["name"] is None:
            skipped.append(Skipped(origin=origin, reason="code or name is empty"))
            continue
        if not _PROBLEM_FILE.match(stem + ".py"):
            stem = f"{problem_id}_{stem}"
        sources.append(SourceFile(level, problem_id, stem, code, f"{origin} ({stem}.py)"))
    if not sources and not skipped:
        raise UserError(f"{path}: the parquet file has no rows")
    return _unique(sources, skipped)


def _unique(sources: list[SourceFile], skipped: list[Skipped]) -> tuple[list[SourceFile], list[Skipped]]:
    """One file per (level, problem id): a second one is skipped, naming the first."""
    kept: dict[tuple[int, int], SourceFile] = {}
    for source in sources:
        first = kept.setdefault((source.level, source.problem_id), source)
        if first is not source:
            skipped.append(Skipped(origin=source.origin, reason=f"level {source.level} problem {source.problem_id} "
                                                                f"is already {first.origin}"))
    ordered = sorted(kept.values(), key=lambda s: (s.level, s.problem_id))
    return ordered, skipped


def natural_key(text: str) -> list[Any]:
    """Sort '2_x' before '10_x'."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


# -- checking and describing --------------------------------------------------------------------
def check_source(code: str) -> ast.Module | str:
    """The parsed module, or why this code cannot be a KernelBench problem."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"Python syntax error at line {exc.lineno}: {exc.msg}"
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    missing = [name for name in REQUIRED if name not in defined]
    if missing:
        return f"defines no {', '.join(missing)} at module level"
    return tree


def constants(tree: ast.Module) -> dict[str, ParamValue]:
    """Module-level number constants: the file's sizes, shown as the shape's params."""
    found: dict[str, ParamValue] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) \
                    and not isinstance(value.value, bool):
                found[node.targets[0].id] = value.value
    return found


def describe(tree: ast.Module) -> str:
    """The module's docstring, else Model's, on as few lines as it takes."""
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    text = ast.get_docstring(tree) or (ast.get_docstring(model) if model else None) or ""
    return " ".join(text.split())


def third_party_imports(tree: ast.Module) -> list[str]:
    """Top-level modules a reference imports from outside the standard library, torch, Triton and
    numpy. KernelBench's harnesses allow any import; rooftop's allow-list would refuse the reference
    itself as a candidate (a self-check, an agent's first solution) unless the problem allows them."""
    found = [a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    found += [n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
              and n.level == 0]
    return sorted({m for m in found if m not in sys.stdlib_module_names and m not in ("torch", "triton", "numpy")})


def kernelbench_spec(tree: ast.Module, stem: str, title: str, description: str,
                     figures: Any | None = None) -> ProblemSpec:
    """The spec of a KernelBench-style file; `figures` (problem.figures.Figures) when they were counted.
    The modules its reference imports beyond the allow-list are allowed to solutions too."""
    from rooftop.problem.figures import regime

    counted: dict[str, Any] = {}
    if figures is not None:
        counted = {"figures": "estimated", "regime": regime(figures), "bytes": str(figures.bytes)}
        if figures.flops > 0:  # nothing counted is not "no work": leave the compute roof out
            counted["flops"] = str(figures.flops)
    imports = third_party_imports(tree)
    policy = {"policy": Policy(extra_imports=imports)} if imports else {}
    return ProblemSpec(name=safe_name(stem), title=title, description=description, version=1, dtype="float32",
                       **{"regime": "compute", **counted, **policy},
                       shapes=[Shape(name="default", params=constants(tree))], kernelbench=True)


# -- writing ------------------------------------------------------------------------------------
def import_kernelbench(path: Path, into: Path, progress: Progress | None = None) -> ImportReport:
    """Write every problem of `path` under `into` as kernelbench/level{L}/{stem}/. Importing the
    same files again changes nothing; a changed reference bumps its problem's version.
    `progress(name, index, total)` is told of each file before it is counted."""
    sources, skipped = read_sources(path)
    report = ImportReport(root=Path(into), skipped=skipped)
    for index, source in enumerate(sources):
        if progress:
            progress(source.name, index, len(sources))
        outcome = write_problem(source, Path(into) / source.name)
        if isinstance(outcome, Skipped):
            report.skipped.append(outcome)
        else:
            report.imported.append(outcome)
    return report


def write_problem(source: SourceFile, folder: Path) -> Imported | Skipped:
    """One problem folder (problem.yaml + reference.py) for one file, its figures counted."""
    from rooftop.problem.figures import CountFailed, estimate
    from rooftop.problem.smoke import derive_smoke

    tree = check_source(source.code)
    if isinstance(tree, str):
        return Skipped(origin=source.origin, reason=tree)
    reference, spec_file = folder / "reference.py", folder / "problem.yaml"
    before = (_read(reference), _read(spec_file))
    version = _version(spec_file) if before[0] is not None else 1
    if before[0] is not None and before[0] != source.code:
        version += 1  # the reference changed: verdicts of the old one stay apart
    folder.mkdir(parents=True, exist_ok=True)
    if before[0] != source.code:
        reference.write_text(source.code)
    not_counted = ""
    try:
        figures = estimate(reference)
    except CountFailed as exc:
        figures, not_counted = None, str(exc)
    title = f"KernelBench level {source.level} problem {source.problem_id}: " \
            + " ".join(source.stem.split("_", 1)[-1].replace("_", " ").split())
    description = describe(tree) or f"KernelBench level {source.level}, {source.stem}.py"
    if not_counted:
        description += f" (roofline figures not estimated: {not_counted})"
    spec = kernelbench_spec(tree, source.stem, title, description, figures)
    smoke, no_smoke = derive_smoke(reference, constants(tree)) if figures is not None else \
        (None, "its figures could not be counted")
    if smoke is None:
        description += f" (no CPU smoke shape: {no_smoke})"
    spec = spec.model_copy(update={"version": version, "tags": [DECK, f"level{source.level}"],
                                   "description": description, "smoke": [smoke] if smoke else []})
    text = _yaml(spec, source)
    if before[1] != text:
        spec_file.write_text(text)
    change: Literal["added", "updated", "unchanged"] = \
        "unchanged" if before == (source.code, text) else ("added" if before == (None, None) else "updated")
    notes = [Note(field="figures", note=not_counted)] if not_counted else []
    notes += [Note(field="smoke", note=no_smoke)] if smoke is None else []
    return Imported(name=source.name, folder=folder, change=change, version=version, regime=spec.regime,
                    shapes=len(spec.shapes), flops=str(figures.flops) if figures else None,
                    bytes=str(figures.bytes) if figures else None, notes=notes)


def _yaml(spec: ProblemSpec, source: SourceFile) -> str:
    data = spec.model_dump(mode="json", exclude_defaults=True)
    data = {"name": data.pop("name"), "title": data.pop("title"), **data}
    header = (f"# KernelBench level{source.level}/{source.stem}.py, imported by `rooftop import kernelbench`; "
              "importing it again rewrites this file.\n"
              "# get_inputs() and get_init_inputs() take no arguments (kernelbench: true); flops and bytes, when "
              "present,\n# were counted on the meta device (figures: estimated), not written by hand.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _read(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None


def _version(spec_file: Path) -> int:
    try:
        data = read_yaml(spec_file) if spec_file.is_file() else None
        return int(data.get("version", 1)) if isinstance(data, dict) else 1
    except (yaml.YAMLError, TypeError, ValueError):
        return 1


def load_file(path: Path) -> Problem:
    """A single file with Model, zero-argument get_inputs/get_init_inputs and shape constants; its
    roofline figures are estimated (problem/figures.py) when its reference runs on the meta device."""
    from rooftop.problem.figures import CountFailed, cached_estimate

    tree = check_reference(path)
    try:
        figures = cached_estimate(path)
    except CountFailed:
        figures = None  # no figures, no roofline; checking the problem says what is wrong with it
    name = path.stem.replace(" ", "_")
    spec = kernelbench_spec(tree, name, name, describe(tree) or f"KernelBench-style problem from {path.name}",
                            figures)
    return Problem(spec=spec, root=path.parent.resolve(), reference=path.resolve())


class KernelBench(DeckFormat):
    """A KernelBench file (opened as it stands), or a checkout, a level folder or a parquet file of
    its dataset (imported as the decks kernelbench/level{L})."""

    name, rank, deck = "kernelbench", 1, DECK

    def recognise(self, path: Path) -> bool:
        if path.is_file():
            return path.suffix in (".py", ".parquet")
        return path.is_dir() and bool(_level_folders(path))

    def opens(self, path: Path) -> bool:
        return path.is_file() and path.suffix == ".py"

    def load(self, path: Path, bundled_name: str | None = None) -> Problem:
        return load_file(path)

    def import_deck(self, path: Path, into: Path, progress: Progress | None = None) -> ImportReport:
        return import_kernelbench(path, into, progress)


FORMATS.add(KernelBench.name, KernelBench())
