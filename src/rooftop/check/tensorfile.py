"""Tensors across the process boundary: raw bytes in a file, described by a small header.

The child writes the outputs of a fully checked call here; the trusted side reads them back
without unpickling anything: it accepts only known dtypes and sizes that add up, so a hostile
file can at worst fail to load.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from pydantic import BaseModel

DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
        torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)
} | {name: getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)}


class TensorEntry(BaseModel):
    dtype: str
    shape: list[int]
    offset: int
    nbytes: int


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dump_tensors(path: Path, tensors: list[torch.Tensor]) -> list[TensorEntry]:
    """Write each tensor's bytes (contiguous, on the host) one after another."""
    entries, offset = [], 0
    with open(path, "wb") as out:
        for t in tensors:
            data = t.detach().contiguous().cpu()
            raw = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
            out.write(raw)
            entries.append(TensorEntry(dtype=dtype_name(data.dtype), shape=list(data.shape), offset=offset,
                                       nbytes=len(raw)))
            offset += len(raw)
    return entries


def load_tensors(path: Path, entries: list[TensorEntry], device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """Read tensors back; a ValueError says what about the file or header was wrong."""
    size = os.path.getsize(path)
    out = []
    with open(path, "rb") as f:
        for i, entry in enumerate(entries):
            dtype = DTYPES.get(entry.dtype)
            if dtype is None:
                raise ValueError(f"output {i}: unknown dtype {entry.dtype!r}")
            if any(d < 0 for d in entry.shape):
                raise ValueError(f"output {i}: negative size in shape {entry.shape}")
            numel = 1
            for d in entry.shape:
                numel *= d
            itemsize = torch.empty((), dtype=dtype).element_size()
            if entry.nbytes != numel * itemsize or entry.offset < 0 or entry.offset + entry.nbytes > size:
                raise ValueError(f"output {i}: {entry.nbytes} bytes at {entry.offset} do not hold a "
                                 f"{entry.dtype} tensor of shape {entry.shape} in a {size}-byte file")
            f.seek(entry.offset)
            raw = bytearray(f.read(entry.nbytes))
            flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
            out.append(flat.view(dtype).reshape(entry.shape).to(device))
    return out
