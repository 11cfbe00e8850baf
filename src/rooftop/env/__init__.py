"""The environment API: a kernel-writing episode as gymnasium-style `reset` and `step`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rooftop.env.core import AsyncKernelEnv, Episode, KernelEnv, StepResult

__all__ = ["AsyncKernelEnv", "Episode", "KernelEnv", "StepResult"]


def __getattr__(name: str) -> Any:
    """The episode classes, imported on first use: `rooftop prompt` reads env.prompt alone, without
    the evaluator (and torch) that core brings in."""
    if name in __all__:
        from rooftop.env import core

        return getattr(core, name)
    raise AttributeError(f"module 'rooftop.env' has no attribute '{name}'")
