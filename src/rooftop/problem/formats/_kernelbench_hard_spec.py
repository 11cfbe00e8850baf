"""A KernelBench-Hard problem folder converted to a rooftop spec and a reference with an adapter:
their dtype, formulas, peak, tolerance and forbidden ops as rooftop's fields, and what does not
carry over as notes."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any

from rooftop.problem import dtypes, expr
from rooftop.problem.formats._kernelbench_hard_read import (
    ADAPTER_MARK,
    DECK,
    Unfit,
    global_for,
    module_globals,
    read_meta,
    read_reference,
    read_shapes,
)
from rooftop.problem.formats.kernelbench import safe_name, third_party_imports
from rooftop.problem.imports import Note
from rooftop.problem.spec import GPU_ONLY


# -- converting ---------------------------------------------------------------------------------
def convert(folder: Path) -> tuple[dict[str, Any], str, list[Note]]:
    """(the rooftop spec's fields, reference.py's new text, notes) for one problem folder."""
    meta = read_meta(folder)
    shapes = read_shapes(folder / "shapes.py")
    source, tree = read_reference(folder / "reference.py")
    notes: list[Note] = []
    dtype = _dtype(meta, notes)
    regime = meta.get("regime")
    if regime not in ("compute", "memory"):
        raise Unfit(f"problem.yaml: regime is {regime!r} (expected compute or memory)")
    names = module_globals(tree)
    params = list(dict.fromkeys(k for p, _ in shapes for k in p))
    mapping = {p: g for p in params if (g := global_for(p, names)) is not None}
    for p in params:
        if p not in mapping:
            notes.append(Note(field=f"shapes.{p}", note="sets no global of reference.py: its inputs ignore it "
                                                        "(their check.py may read it to make other inputs)"))
    if _seeds_itself(tree):
        notes.append(Note(field="reference.get_inputs", note="seeds torch's generator itself: every seed rooftop "
                                                             "draws gives the same inputs"))
    spec: dict[str, Any] = {
        "name": safe_name(folder.name),
        "title": str(meta.get("display_name") or meta.get("name") or folder.name),
        "description": _description(meta, tree, folder),
        "version": 1, "dtype": dtype, "regime": regime,
        **_formulas(meta, [p for p, _ in shapes], notes),
        **_peak(meta, dtype, notes),
        **_tolerance(meta.get("tolerance"), dtype, notes),
        "shapes": [{"name": f"shape{i}", "params": p, "note": _note(p, comment)}
                   for i, (p, comment) in enumerate(shapes)],
        "policy": _policy(meta.get("forbidden"), third_party_imports(tree), notes),
        "tags": [DECK, GPU_ONLY],
    }
    if (folder / "sota.py").is_file():
        notes.append(Note(field="sota", note="sota.py is not converted: its call is wired per problem in their "
                                             "benchmark.py, so no SOTA line is timed"))
    return spec, source + adapter(mapping), notes


def _dtype(meta: dict[str, Any], notes: list[Note]) -> str:
    precision = meta.get("precision")
    try:
        return dtypes.canonical(precision)
    except ValueError:
        pass
    try:
        dtype = dtypes.canonical(meta.get("peak_tflops_key"))
    except ValueError:
        raise Unfit(f"problem.yaml: precision {precision!r} is not a dtype rooftop knows "
                    f"({', '.join(dtypes.DTYPES)}), nor is peak_tflops_key") from None
    notes.append(Note(field="dtype", note=f"precision {precision} is not one dtype; {dtype} taken from "
                                          "peak_tflops_key (it chooses the tolerance and the compute roof)"))
    return dtype


def _formulas(meta: dict[str, Any], shapes: list[dict[str, Any]], notes: list[Note]) -> dict[str, str]:
    kept = {}
    for field in ("flops", "bytes"):
        formula = meta.get(f"{field}_formula")
        if formula is None:
            continue
        why = _formula_problem(str(formula), shapes)
        if why:
            notes.append(Note(field=field, note=f"{field}_formula {str(formula)!r} dropped: {why}"))
        else:
            kept[field] = " ".join(str(formula).split())
    return kept


def _formula_problem(formula: str, shapes: list[dict[str, Any]]) -> str:
    try:
        used = expr.names(formula)
    except expr.ExprError as exc:
        return str(exc)
    for index, params in enumerate(shapes):
        missing = sorted(used - set(params))
        if missing:
            return f"it uses {', '.join(missing)}, which shape{index} does not define"
        try:
            value = expr.evaluate(formula, {k: float(v) for k, v in params.items()})
        except (ArithmeticError, ValueError) as exc:
            return f"it cannot be evaluated for shape{index} ({exc})"
        if not math.isfinite(value) or value < 0:
            return f"it gives {value} for shape{index}"
    return ""


def _peak(meta: dict[str, Any], dtype: str, notes: list[Note]) -> dict[str, str]:
    key = meta.get("peak_tflops_key")
    if key is None:
        return {}
    try:
        peak = dtypes.canonical(key)
    except ValueError:
        notes.append(Note(field="peak_dtype", note=f"peak_tflops_key {key!r} is not a dtype; the compute roof is "
                                                   f"{dtype}'s"))
        return {}
    return {} if peak == dtype else {"peak_dtype": peak}


def _tolerance(given: object, dtype: str, notes: list[Note]) -> dict[str, Any]:
    """Only the entry for the problem's dtype applies in rooftop (as in theirs: the output's dtype
    picks it there, the problem's here); any other is listed as never applied."""
    if given is None:
        return {}
    if not isinstance(given, dict):
        notes.append(Note(field="tolerance", note=f"dropped: expected a mapping of dtype -> tolerance (got {given!r})"))
        return {}
    kept: dict[str, Any] = {}
    for key, value in given.items():
        try:
            name = dtypes.canonical(key)
        except ValueError:
            notes.append(Note(field=f"tolerance.{key}", note="dropped: not a dtype rooftop knows"))
            continue
        if name != dtype:
            notes.append(Note(field=f"tolerance.{key}",
                              note=f"dropped: never applied (the problem's dtype is {dtype})"))
            continue
        if dtypes.is_integer(name):
            notes.append(Note(field=f"tolerance.{key}", note="dropped: integers are compared exactly"))
            continue
        bounds = _bounds(value)
        if bounds is None:
            notes.append(Note(field=f"tolerance.{key}", note=f"dropped: expected a number or {{atol, rtol}} (got "
                                                             f"{value!r})"))
            continue
        kept[dtype] = bounds
    return {"tolerance": kept} if kept else {}


def _bounds(value: object) -> dict[str, float] | None:
    def number(x: object) -> float | None:
        try:  # PyYAML reads 5e-2 (no dot) as a string
            n = float(x) if isinstance(x, (int, float, str)) and not isinstance(x, bool) else None
        except ValueError:
            return None
        return n if n is not None and math.isfinite(n) and n >= 0 else None

    if isinstance(value, dict):
        atol, rtol = number(value.get("atol")), number(value.get("rtol"))
        if atol is None or rtol is None or set(value) - {"atol", "rtol"}:
            return None
        return {"atol": atol, "rtol": rtol}
    scalar = number(value)
    return None if scalar is None else {"atol": scalar, "rtol": scalar}


_METHOD_PATTERN = re.compile(r"^\.([A-Za-z_]\w*)\($")  # their grep pattern for a method call: ".softmax("
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _policy(given: object, imports: list[str], notes: list[Note]) -> dict[str, Any]:
    """Their `forbidden` entries are grep patterns over the solution; rooftop's are names: `F.x`
    is torch.nn.functional.x, `.x(` is the method Tensor.x, and an import line is dropped (the
    import allow-list already refuses a module that is not on it). The third-party modules the
    reference imports are allowed to solutions too (their harness allows any import), so that a
    candidate made from the reference passes the static gate."""
    policy: dict[str, Any] = {"extra_imports": imports} if imports else {}
    for module in imports:
        notes.append(Note(field="policy.extra_imports", note=f"reference.py imports {module}: solutions may too"))
    if not given:
        return policy
    if not isinstance(given, list):
        notes.append(Note(field="forbidden", note=f"dropped: expected a list (got {given!r})"))
        return policy
    kept: list[str] = []
    for entry in map(str, given):
        name = "torch.nn.functional." + entry[2:] if entry.startswith("F.") else entry
        method = _METHOD_PATTERN.match(entry)
        if method:
            name = f"Tensor.{method.group(1)}"
        words = entry.split()
        if len(words) == 2 and words[0] in ("import", "from"):
            notes.append(Note(field="forbidden", note=f"'{entry}' dropped: rooftop's import allow-list refuses "
                                                      f"{words[1]} already"))
            continue
        if not _DOTTED.match(name):
            notes.append(Note(field="forbidden", note=f"'{entry}' dropped: not a name rooftop's policy can match"))
            continue
        if method:
            notes.append(Note(field="forbidden", note=f"'{entry}' read as {name}"))
        kept.append(name)
    return {**({"forbidden": list(dict.fromkeys(kept))} if kept else {}), **policy}


def _description(meta: dict[str, Any], tree: ast.Module, folder: Path) -> str:
    title = str(meta.get("display_name") or meta.get("name") or folder.name).strip()
    doc = ast.get_docstring(tree) or ""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    origin = f"(KernelBench-Hard problem {folder.name}, imported by `rooftop import kernelbench-hard`.)"
    return " ".join(part for part in (title.rstrip(".") + ".", first, origin) if part)


def _note(params: dict[str, Any], comment: str) -> str:
    text = ", ".join(f"{k}={v}" for k, v in params.items())
    return f"{text}: {comment}" if comment else text


def _seeds_itself(tree: ast.Module) -> bool:
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    return fn is not None and any(isinstance(n, ast.Attribute) and n.attr in ("manual_seed", "seed")
                                  for n in ast.walk(fn))


def adapter(mapping: dict[str, str]) -> str:
    """The code appended to their reference.py: rooftop's calling convention over theirs. Plain
    `global` assignments, no globals(): a candidate made from the reference (a self-check, an
    agent's first solution) must pass the static policy, which refuses code it cannot read."""
    sets = "".join(f'    if "{param}" in _kbh_params:\n        {name} = _kbh_params["{param}"]\n'
                   for param, name in mapping.items())
    body = f"    global {', '.join(dict.fromkeys(mapping.values()))}\n{sets}" if mapping else "    pass\n"
    return f'''

{ADAPTER_MARK} (appended by `rooftop import kernelbench-hard`; everything above is the original) ----
# rooftop calls get_init_inputs(**shape) and get_inputs(**shape) with one shape's params, where the
# KernelBench-Hard harness sets this module's shape globals and calls the zero-argument functions:
# these set the globals the same way, then call the originals (kept as _kbh_get_*).
_kbh_get_init_inputs = get_init_inputs
_kbh_get_inputs = get_inputs


def _kbh_set_shape(_kbh_params):
{body}

def get_init_inputs(**shape):
    _kbh_set_shape(shape)
    return _kbh_get_init_inputs()


def get_inputs(**shape):
    _kbh_set_shape(shape)
    return _kbh_get_inputs()
'''

