"""Safe arithmetic over shape parameters, for the `flops` and `bytes` formulas.

Parsed with `ast` and walked by hand: only numbers, parameter names, + - * / // % ** and a few
pure functions are allowed, so a problem file can never run code.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "ceil": math.ceil,
    "floor": math.floor,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "cdiv": lambda a, b: -(-a // b),
}


class ExprError(ValueError):
    """The formula is not plain arithmetic over known names."""


def parse(source: str) -> ast.Expression:
    """Parse and validate a formula; raise `ExprError` naming what is not allowed."""
    try:
        tree = ast.parse(str(source), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"not an arithmetic expression ({exc.msg})") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.Load, ast.Name, ast.Call, ast.BinOp, ast.UnaryOp)):
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            continue
        if type(node) in _BINARY or type(node) in _UNARY:
            continue
        raise ExprError(f"'{ast.unparse(node)}' is not allowed (numbers, names, + - * / // % ** and "
                        f"{', '.join(sorted(_FUNCTIONS))} only)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
                raise ExprError(f"call '{ast.unparse(node)}' is not allowed "
                                f"(functions: {', '.join(sorted(_FUNCTIONS))})")
    return tree


def names(source: str) -> set[str]:
    """Parameter names the formula refers to."""
    tree = parse(source)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def evaluate(source: str, params: Mapping[str, float]) -> float:
    """Value of the formula for one shape's parameters."""
    return float(_eval(parse(source).body, params))


def _eval(node: ast.AST, params: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):  # parse() admits no other
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in params:
            raise ExprError(f"unknown name '{node.id}' (shape parameters: {', '.join(sorted(params)) or 'none'})")
        return params[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_eval(node.left, params), _eval(node.right, params))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, params))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # parse() admits no other callee
        return _FUNCTIONS[node.func.id](*(_eval(a, params) for a in node.args))
    raise ExprError(f"'{ast.unparse(node)}' is not allowed")
