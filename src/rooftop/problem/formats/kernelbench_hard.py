"""KernelBench-Hard problem folders as rooftop problems, in the deck `kernelbench-hard`.

A KernelBench-Hard problem is a folder with problem.yaml (precision, regime, flops/bytes formulas,
a tolerance per dtype, forbidden ops), shapes.py (`SHAPES`, a list of dicts of sizes) and
reference.py, whose `get_inputs()` and `get_init_inputs()` take no argument and read module
globals that their harness sets per shape (`reference.M = shape["M"]`). Each becomes a rooftop
problem folder: problem.yaml written from theirs, and their reference.py byte for byte with an
adapter appended that takes the shape as keyword arguments, sets those globals and calls the
originals. What does not carry over (a formula rooftop cannot read, a tolerance for a dtype the
problem does not have, sota.py) is listed in the import report, never silently dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from rooftop.errors import UserError
from rooftop.problem.formats import FORMATS, DeckFormat, Progress
from rooftop.problem.formats._kernelbench_hard_read import DECK, Unfit
from rooftop.problem.formats._kernelbench_hard_spec import convert
from rooftop.problem.formats.kernelbench import natural_key, safe_name
from rooftop.problem.imports import Imported, ImportReport, Note, Skipped
from rooftop.problem.spec import ProblemSpec

# true of every problem of the format: said once in the report, not once per problem
COMMON_NOTES = (
    "shapes: every SHAPES entry is a visible shape (KernelBench-Hard has no held-out shapes)",
    "smoke: none (KernelBench-Hard has no CPU-sized shapes), so they cannot be checked on a CPU: tagged gpu-only, "
    "`rooftop eval` and `rooftop selfcheck` on a CPU refuse them unless --shapes names what to run",
    "PROMPT.txt is not copied (it lists every shape; rooftop makes its own prompt from the spec)",
)


# -- finding the folders ------------------------------------------------------------------------
def problem_folders(path: Path) -> list[Path]:
    """The problem folders of a checkout (its problems/ folder), of a problems/ folder, or the one
    folder given; every subfolder holding one of their files counts, so a broken one is reported."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such folder (expected a KernelBench-Hard checkout, its problems/ folder "
                        "or one problem folder)")
    if not path.is_dir():
        raise UserError(f"{path}: not a folder (expected a KernelBench-Hard checkout, its problems/ folder or "
                        "one problem folder)")
    if (path / "problem.yaml").is_file():
        return [path]
    base = path / "problems" if (path / "problems").is_dir() else path
    found = [child for child in sorted(base.iterdir(), key=lambda p: natural_key(p.name))
             if child.is_dir() and not child.name.startswith((".", "_"))
             and any((child / f).is_file() for f in ("problem.yaml", "reference.py", "shapes.py"))]
    if not found:
        raise UserError(f"{path}: no KernelBench-Hard problem folders here (expected problems/NN_name/ folders "
                        "with problem.yaml, shapes.py and reference.py)")
    return found



# -- writing ------------------------------------------------------------------------------------
def import_kernelbench_hard(path: Path, into: Path) -> ImportReport:
    """Write every problem folder of `path` under `into` as kernelbench-hard/<name>/. Importing the
    same folders again changes nothing; a changed reference or spec bumps the problem's version."""
    report = ImportReport(root=Path(into), notes=list(COMMON_NOTES))
    seen: dict[str, Path] = {}
    for folder in problem_folders(path):
        name = f"{DECK}/{safe_name(folder.name)}"
        if name in seen:
            report.skipped.append(Skipped(origin=str(folder), reason=f"its name {name} is already {seen[name]}"))
            continue
        seen[name] = folder
        try:
            report.imported.append(write_problem(folder, Path(into) / name, name))
        except Unfit as exc:
            report.skipped.append(Skipped(origin=str(folder), reason=str(exc)))
    return report


def write_problem(source: Path, folder: Path, name: str) -> Imported:
    data, reference, notes = convert(source)
    try:
        spec = ProblemSpec.model_validate(data)
    except ValidationError as exc:
        raise Unfit(f"does not make a valid rooftop spec: {' '.join(str(exc).split())[:300]}") from None
    spec_file, reference_file = folder / "problem.yaml", folder / "reference.py"
    before = (_read(reference_file), _read(spec_file))
    if before[1] is not None:
        old = _old_fields(before[1])
        version = _int(old.get("version"))
        if before[0] != reference or {**old, "version": 0} != {**_fields(spec), "version": 0}:
            version += 1  # their problem changed: verdicts of the old one stay apart
        spec = spec.model_copy(update={"version": version})
    text = _yaml(spec, source, notes)
    folder.mkdir(parents=True, exist_ok=True)
    if before[0] != reference:
        reference_file.write_text(reference)
    if before[1] != text:
        spec_file.write_text(text)
    change: Literal["added", "updated", "unchanged"] = \
        "unchanged" if before == (reference, text) else ("added" if before == (None, None) else "updated")
    return Imported(name=name, folder=folder, change=change, version=spec.version, dtype=spec.dtype,
                    regime=spec.regime, shapes=len(spec.shapes), flops=spec.flops, bytes=spec.bytes, notes=notes)


def _fields(spec: ProblemSpec) -> dict[str, Any]:
    """The fields as problem.yaml holds them."""
    return spec.model_dump(mode="json", exclude_defaults=True)


def _old_fields(text: str) -> dict[str, Any]:
    try:
        old = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return old if isinstance(old, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def _yaml(spec: ProblemSpec, source: Path, notes: list[Note]) -> str:
    data = _fields(spec)
    lines = [f"# KernelBench-Hard problems/{source.name}, imported by `rooftop import kernelbench-hard`; importing "
             "it again rewrites this file.",
             "# reference.py is theirs with an adapter appended: get_inputs(**shape) sets the globals their harness "
             "sets per shape.",
             *(f"# {n.field}: {n.note}" for n in notes)]
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _read(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None


def _holds_problem(folder: Path) -> bool:
    return (folder / "shapes.py").is_file() and (folder / "reference.py").is_file()


class KernelBenchHard(DeckFormat):
    """A KernelBench-Hard checkout, its problems/ folder, or one problem folder (with shapes.py):
    imported as the deck kernelbench-hard, since its reference needs an adapter to take a shape."""

    name, rank, deck = "kernelbench_hard", 0, DECK

    def recognise(self, path: Path) -> bool:
        if not path.is_dir():
            return False
        base = path / "problems" if (path / "problems").is_dir() else path
        return _holds_problem(path) or any(_holds_problem(child) for child in base.iterdir() if child.is_dir())

    def import_deck(self, path: Path, into: Path, progress: Progress | None = None) -> ImportReport:
        return import_kernelbench_hard(path, into)


FORMATS.add(KernelBenchHard.name, KernelBenchHard())
