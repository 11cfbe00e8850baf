"""rooftop's own problem folders: problem.yaml (validated, with errors that name the field and the
likely mistake), reference.py, and optionally sota.py, PROMPT.md and starter/solution.py."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from rooftop.errors import SpecError
from rooftop.problem.formats import FORMATS, DeckFormat, check_reference
from rooftop.problem.spec import Problem, ProblemSpec
from rooftop.yamlfile import read_yaml

MAX_REPORTED_ERRORS = 8  # one line on a terminal stays readable; the rest are counted
NO_HINT = "(check its spelling; unknown keys are errors)"


def _load_folder(folder: Path, bundled_name: str | None) -> Problem:
    yaml_path = folder / "problem.yaml"
    reference = folder / "reference.py"
    if not yaml_path.is_file():
        raise SpecError(folder, "", "no problem.yaml in this folder")
    if not reference.is_file():
        raise SpecError(folder, "", "no reference.py in this folder")
    try:
        raw = read_yaml(yaml_path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise SpecError(yaml_path, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(raw, dict):
        raise SpecError(yaml_path, "", "expected a mapping of fields at the top level")
    spec = validate_spec(raw, yaml_path)
    check_reference(reference)
    if spec.baseline == "starter" and not (folder / "starter" / "solution.py").is_file():
        raise SpecError(yaml_path, "baseline", "is 'starter', but there is no starter/solution.py beside it")
    optional = {name: folder / f for name, f in (("sota", "sota.py"), ("prompt", "PROMPT.md"),
                                                 ("starter", "starter/solution.py"))}
    return Problem(spec=spec, root=folder.resolve(), reference=reference.resolve(),
                   bundled_name=bundled_name,
                   **{k: p.resolve() for k, p in optional.items() if p.is_file()})


def validate_spec(raw: dict, source: Path) -> ProblemSpec:
    """Validate a spec mapping; every error is reported at once, in one line, so that a user
    fixes the whole file in one pass rather than one error per run."""
    try:
        return ProblemSpec.model_validate(raw)
    except ValidationError as exc:
        errors = _merge_union_branches(exc.errors())
        # an unknown key first: it is usually the cause of a "missing" error reported beside it
        errors.sort(key=lambda e: e["type"] != "extra_forbidden")
        described = [_describe(error, raw) for error in errors[:MAX_REPORTED_ERRORS]]
        if len(errors) > MAX_REPORTED_ERRORS:
            described.append(("", f"and {len(errors) - MAX_REPORTED_ERRORS} more"))
        described = _once(described, "unknown key " + NO_HINT)
        field, first = described[0]
        rest = [f"{f}: {m}" if f else m for f, m in described[1:]]
        raise SpecError(source, field, "; ".join([first, *rest])) from None


def _describe(error: dict, raw: dict) -> tuple[str, str]:
    """(field path, what is wrong there) for one pydantic error."""
    loc = error["loc"]
    field = _field_path(loc)
    if error["type"] == "extra_forbidden":
        return field, "unknown key " + _key_hint(loc[-1], _keys_at(loc[:-1]), _raw_keys(raw, loc[:-1]))
    if error["type"] == "missing":
        return field, "required field is missing"
    if loc and loc[-1] == "[key]":
        allowed = _literal_keys_at(loc[:-2])
        return field, "unknown key " + _key_hint(loc[-2], allowed, _raw_keys(raw, loc[:-2]))
    message = error["msg"].removeprefix("Value error, ")
    got = error.get("input")
    if got is None:
        return field, f"{message} (got an empty value)"
    suffix = f" (got {got!r})" if not isinstance(got, (dict, list)) else ""
    return field, f"{message}{suffix}"


def _key_hint(key: object, valid: list[str], present: set[str]) -> str:
    """'(did you mean ...)' from the names valid at this place, skipping those already given."""
    candidates = [name for name in valid if name not in present]
    close = difflib.get_close_matches(str(key), candidates, n=1)
    if close:
        return f"(did you mean '{close[0]}'?)"
    if candidates and len(valid) <= 8:
        return f"(expected one of: {', '.join(valid)})"
    return NO_HINT


def _once(described: list[tuple[str, str]], message: str) -> list[tuple[str, str]]:
    """Say a long generic message once; later errors with it say only what is wrong."""
    short = message.split(" (")[0]
    seen = False
    out = []
    for field, text in described:
        out.append((field, short if text == message and seen else text))
        seen = seen or text == message
    return out


def _merge_union_branches(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One error per value that fits no member of a union (`int | float | bool | str`), where
    pydantic reports one per member, each under the member's name."""
    merged: list[dict[str, Any]] = []
    by_loc: dict[tuple, dict[str, Any]] = {}
    for error in errors:
        loc = error["loc"]
        member = loc[-1] if loc and _is_union_at(loc[:-1]) else None
        if member is None:
            merged.append(dict(error))
            continue
        if loc[:-1] in by_loc:
            by_loc[loc[:-1]]["members"].append(str(member))
            continue
        by_loc[loc[:-1]] = {**error, "loc": loc[:-1], "members": [str(member)]}
        merged.append(by_loc[loc[:-1]])
    for error in by_loc.values():
        names = error["members"]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        error["msg"] = f"expected {listed}"
    return merged


# -- where an error's `loc` points in the spec's models -----------------------------------------
def _strip(annotation: Any) -> Any:
    """The type under `Annotated[...]` and `X | None`."""
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
        elif get_origin(annotation) in (Union, UnionType) and type(None) in get_args(annotation) \
                and len(get_args(annotation)) == 2:
            annotation = next(a for a in get_args(annotation) if a is not type(None))
        else:
            return annotation


def _type_at(loc: tuple) -> Any:
    """The annotation that the value at `loc` was validated against; None where unknown."""
    annotation: Any = ProblemSpec
    for part in loc:
        annotation = _strip(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if part not in annotation.model_fields:
                return None
            annotation = annotation.model_fields[part].annotation
        elif origin in (list, tuple, set):
            annotation = get_args(annotation)[0]
        elif origin is dict:
            annotation = get_args(annotation)[1]
        elif origin in (Union, UnionType):
            annotation = next((a for a in get_args(annotation) if getattr(a, "__name__", None) == part), None)
        else:
            return None
    return _strip(annotation)


def _keys_at(loc: tuple) -> list[str]:
    model = _type_at(loc)
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _literal_keys_at(loc: tuple) -> list[str]:
    mapping = _type_at(loc)
    if get_origin(mapping) is not dict:
        return []
    key = _strip(get_args(mapping)[0])
    return [str(k) for k in get_args(key)] if get_origin(key) is Literal else []


def _is_union_at(loc: tuple) -> bool:
    return get_origin(_type_at(loc)) in (Union, UnionType)


def _raw_keys(raw: object, loc: tuple) -> set[str]:
    """Keys the user wrote at `loc` (best effort: validators may have renamed them)."""
    for part in loc:
        try:
            raw = raw[part] if isinstance(raw, (dict, list)) else None  # nothing else holds keys
        except (KeyError, IndexError, TypeError):
            return set()
    return {str(k) for k in raw} if isinstance(raw, dict) else set()


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]" and not str(part).startswith("function-"):
            out += ("." if out else "") + str(part)
    return out


class RooftopFolders(DeckFormat):
    """A problem folder, its problem.yaml, or a deck: a folder of problem folders."""

    name, rank = "rooftop", 2

    def recognise(self, path: Path) -> bool:
        if path.name == "problem.yaml":
            return path.is_file()
        return path.is_dir() and ((path / "problem.yaml").is_file()
                                  or any(path.glob("*/problem.yaml")) or any(path.glob("*/*/problem.yaml")))

    def opens(self, path: Path) -> bool:
        """Any folder (one without problem.yaml is told so) and a problem.yaml."""
        return path.is_dir() or (path.is_file() and path.name == "problem.yaml")

    def load(self, path: Path, bundled_name: str | None = None) -> Problem:
        return _load_folder(path if path.is_dir() else path.parent, bundled_name)


FORMATS.add(RooftopFolders.name, RooftopFolders())
