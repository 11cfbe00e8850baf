"""Plain PyTorch: nothing to build; the language of a solution in which no other is recognised."""

from __future__ import annotations

from rooftop.build.backends import BACKENDS, Backend


class PyTorch(Backend):
    name, rank, fallback = "pytorch", 0, True


BACKENDS.add(PyTorch.name, PyTorch())
