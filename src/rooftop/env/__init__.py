"""The environment API: a kernel-writing episode as gymnasium-style `reset` and `step`."""

from rooftop.env.core import AsyncKernelEnv, Episode, KernelEnv, StepResult

__all__ = ["AsyncKernelEnv", "Episode", "KernelEnv", "StepResult"]
