"""Turn a path into a validated `Problem`: a problem folder or a KernelBench-style single file."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml
from pydantic import ValidationError

from rooftop.errors import SpecError
from rooftop.problem.spec import Problem, ProblemSpec

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")


def load_problem(path: str | Path, bundled_name: str | None = None) -> Problem:
    path = Path(path)
    if path.is_dir():
        return _load_folder(path, bundled_name)
    if path.is_file() and path.suffix == ".py":
        return _load_kernelbench_file(path)
    if path.is_file() and path.name == "problem.yaml":
        return _load_folder(path.parent, bundled_name)
    raise SpecError(path, "", "not a problem folder (with problem.yaml) or a KernelBench-style .py file")


def _load_folder(folder: Path, bundled_name: str | None) -> Problem:
    yaml_path = folder / "problem.yaml"
    reference = folder / "reference.py"
    if not yaml_path.is_file():
        raise SpecError(folder, "", "no problem.yaml in this folder")
    if not reference.is_file():
        raise SpecError(folder, "", "no reference.py in this folder")
    try:
        raw = yaml.safe_load(yaml_path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise SpecError(yaml_path, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(raw, dict):
        raise SpecError(yaml_path, "", "expected a mapping of fields at the top level")
    spec = validate_spec(raw, yaml_path)
    _check_reference(reference, kernelbench=False)
    optional = {name: folder / f for name, f in (("sota", "sota.py"), ("prompt", "PROMPT.md"))}
    return Problem(spec=spec, root=folder.resolve(), reference=reference.resolve(),
                   bundled_name=bundled_name,
                   **{k: p.resolve() for k, p in optional.items() if p.is_file()})


def validate_spec(raw: dict, source: Path) -> ProblemSpec:
    """Validate a spec mapping; the first error names the file, the field and what was expected."""
    try:
        return ProblemSpec.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = _field_path(error["loc"])
        if error["type"] == "extra_forbidden":
            raise SpecError(source, field, "unknown key (check its spelling; unknown keys are errors)") from None
        if error["type"] == "missing":
            raise SpecError(source, field, "required field is missing") from None
        message = error["msg"].removeprefix("Value error, ")
        got = error.get("input")
        suffix = f" (got {got!r})" if got is not None and not isinstance(got, (dict, list)) else ""
        raise SpecError(source, field, f"{message}{suffix}") from None


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in ("function-after", "function-before") and not str(part).startswith("function-"):
            out += ("." if out else "") + str(part)
    return out


def _check_reference(path: Path, kernelbench: bool) -> ast.Module:
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        raise SpecError(path, f"line {exc.lineno}", f"Python syntax error: {exc.msg}") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for name in ("Model", *REQUIRED_FUNCTIONS):
        if name not in defined:
            raise SpecError(path, name, "must be defined at module level "
                            "(class Model(nn.Module), get_init_inputs(), get_inputs())")
    return tree


def _load_kernelbench_file(path: Path) -> Problem:
    """A single file with Model, zero-argument get_inputs/get_init_inputs and shape constants."""
    tree = _check_reference(path, kernelbench=True)
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) \
                    and not isinstance(value.value, bool):
                constants[node.targets[0].id] = value.value
    name = path.stem.replace(" ", "_")
    doc = ast.get_docstring(tree) or f"KernelBench-style problem from {path.name}"
    spec = ProblemSpec(
        name="".join(c if c.isalnum() or c in "_.-" else "_" for c in name),
        title=name, description=doc, version=1, dtype="float32", regime="compute",
        shapes=[{"name": "default", "params": constants}], kernelbench=True,
    )
    return Problem(spec=spec, root=path.parent.resolve(), reference=path.resolve())
