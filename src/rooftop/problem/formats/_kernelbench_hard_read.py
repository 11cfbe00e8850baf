"""Reading one KernelBench-Hard problem folder without running it: its problem.yaml, its SHAPES
with the comments beside them, and its reference.py with the module globals a shape sets."""

from __future__ import annotations

import ast
import io
import math
import tokenize
from pathlib import Path
from typing import Any

import yaml

from rooftop.yamlfile import read_yaml

DECK = "kernelbench-hard"
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
ADAPTER_MARK = "# ---- rooftop adapter"


class Unfit(Exception):
    """This folder cannot be a problem: the reason is the message."""



# -- reading one folder -------------------------------------------------------------------------
def read_meta(folder: Path) -> dict[str, Any]:
    if not (folder / "problem.yaml").is_file():
        raise Unfit("no problem.yaml")
    try:
        meta = read_yaml(folder / "problem.yaml")
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise Unfit(f"problem.yaml is not valid YAML ({' '.join(str(exc).split())[:200]})") from None
    if not isinstance(meta, dict):
        raise Unfit("problem.yaml: expected a mapping of fields")
    status = f" (its problem.yaml says status: {meta['status']})" if meta.get("status") else ""
    for file in ("reference.py", "shapes.py"):
        if not (folder / file).is_file():
            raise Unfit(f"no {file}{status}")
    return meta


def read_shapes(path: Path) -> list[tuple[dict[str, int | float | bool], str]]:
    """SHAPES of shapes.py, read without running it: (params, the comment beside the entry)."""
    source = _text(path)
    tree = _parse(source, path.name)
    node = next((n.value for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                 and any(isinstance(t, ast.Name) and t.id == "SHAPES" for t in _targets(n))), None)
    if node is None:
        raise Unfit("shapes.py defines no SHAPES at module level")
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        raise Unfit("shapes.py: SHAPES is not a non-empty list")
    comments = _comments(source)
    shapes = []
    for index, entry in enumerate(node.elts):
        try:
            params = ast.literal_eval(entry)
        except ValueError:
            raise Unfit(f"shapes.py: SHAPES[{index}] is not a literal dict") from None
        if not isinstance(params, dict) or not params:
            raise Unfit(f"shapes.py: SHAPES[{index}] is not a dict of sizes")
        for key, value in params.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise Unfit(f"shapes.py: SHAPES[{index}] has the key {key!r}, not a name")
            if not isinstance(value, (int, float, bool)) or (isinstance(value, float) and not math.isfinite(value)):
                raise Unfit(f"shapes.py: SHAPES[{index}]['{key}'] is {value!r}, not a number")
        shapes.append((params, _comment_of(entry, comments)))
    return shapes


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """line -> (comment text, whether it is the line's only token)."""
    found: dict[int, tuple[str, bool]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                alone = not token.line[:token.start[1]].strip()
                found[token.start[0]] = (token.string.lstrip("#").strip(), alone)
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def _comment_of(entry: ast.expr, comments: dict[int, tuple[str, bool]]) -> str:
    """The comment after the entry on its last line, else the comment lines right above it."""
    end = entry.end_lineno or entry.lineno
    if end in comments and not comments[end][1]:
        return comments[end][0]
    above: list[str] = []
    line = entry.lineno - 1
    while line in comments and comments[line][1]:
        above.insert(0, comments[line][0])
        line -= 1
    return " ".join(above)


def read_reference(path: Path) -> tuple[str, ast.Module]:
    source = _text(path)
    tree = _parse(source, path.name)
    defined = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    missing = [name for name in REQUIRED if name not in defined]
    if missing:
        raise Unfit(f"reference.py defines no {', '.join(missing)} at module level")
    for name in ("get_inputs", "get_init_inputs"):
        fn = defined[name]
        if isinstance(fn, ast.FunctionDef) and len(fn.args.args) + len(fn.args.posonlyargs) \
                + len(fn.args.kwonlyargs) > len(fn.args.defaults) + sum(d is not None for d in fn.args.kw_defaults):
            raise Unfit(f"reference.py: {name} takes arguments (expected a zero-argument function)")
    if ADAPTER_MARK in source:
        raise Unfit("reference.py already holds a rooftop adapter (point the import at their checkout, "
                    "not at an imported deck)")
    return source, tree


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise Unfit(f"{path.name} is unreadable: {exc}") from None


def _parse(source: str, name: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise Unfit(f"{name}: Python syntax error at line {exc.lineno}: {exc.msg}") from None


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def module_globals(tree: ast.Module) -> list[str]:
    """Names assigned at reference.py's module level: the globals a shape can set."""
    names = [t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
             for t in _targets(n) if isinstance(t, ast.Name)]
    return list(dict.fromkeys(names))


def global_for(param: str, names: list[str]) -> str | None:
    """The global a shape parameter sets, as their harnesses do: the same name (`M`), else the
    same in capitals (`batch` -> `BATCH`), else the one name equal to it ignoring case."""
    if param in names:
        return param
    if param.upper() in names:
        return param.upper()
    folded = [n for n in names if n.lower() == param.lower()]
    return folded[0] if len(folded) == 1 else None

