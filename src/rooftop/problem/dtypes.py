"""Canonical dtype names and the default tolerances for each.

Kept free of torch so that specs load and validate quickly.
"""

from __future__ import annotations

from typing import Any

# canonical name -> accepted spellings
_ALIASES: dict[str, tuple[str, ...]] = {
    "float64": ("fp64", "double", "f64"),
    "float32": ("fp32", "float", "f32"),
    "tfloat32": ("tf32",),
    "float16": ("fp16", "half", "f16"),
    "bfloat16": ("bf16",),
    "float8_e4m3fn": ("fp8", "fp8_e4m3", "fp8_e4m3fn", "e4m3", "float8_e4m3"),
    "float8_e5m2": ("fp8_e5m2", "e5m2"),
    "int64": ("long", "i64"),
    "int32": ("int", "i32"),
    "int16": ("short", "i16"),
    "int8": ("i8",),
    "uint8": ("u8",),
    "int4": ("i4",),
    "bool": ("boolean",),
}
_CANONICAL = {alias: name for name, aliases in _ALIASES.items() for alias in (name, *aliases)}
DTYPES: tuple[str, ...] = tuple(_ALIASES)

# (atol, rtol); the normwise bound defaults to rtol. Integers compare exactly.
DEFAULT_TOLERANCE: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "tfloat32": (1e-3, 1e-3),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
    "float8_e4m3fn": (1e-1, 1e-1),
    "float8_e5m2": (1e-1, 1e-1),
}


def canonical(name: Any) -> str:
    """Canonical dtype name for any accepted spelling, including 'torch.bfloat16'."""
    text = str(name).strip().lower().removeprefix("torch.")
    if text not in _CANONICAL:
        raise ValueError(f"unknown dtype '{name}' (expected one of {', '.join(DTYPES)})")
    return _CANONICAL[text]


def is_integer(name: str) -> bool:
    return canonical(name) not in DEFAULT_TOLERANCE


def from_torch(dtype: Any) -> str:
    return canonical(str(dtype))
