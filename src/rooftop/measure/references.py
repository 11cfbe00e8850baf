"""The references a solution is compared with, by name: kept apart from baselines.py so that the
command line can offer them as choices without importing torch."""

from __future__ import annotations

from enum import StrEnum


class BaselineKind(StrEnum):
    eager = "eager"  # the problem's reference model, timed paired with every candidate
    compile = "compile"  # torch.compile of the reference
    sota = "sota"  # the problem's sota.py (the best library)
    starter = "starter"  # a kernel-to-kernel task's starter/solution.py: the kernel its speedup is measured against
    # the reference judged as its own candidate in fresh evaluations: how far a speedup moves between
    # processes, which every later verdict's interval is widened by (measure/spread.py)
    self_check = "self"


class CompileMode(StrEnum):
    default = "default"
    max_autotune = "max-autotune"


KINDS = tuple(k.value for k in BaselineKind)
COMPILE_MODES = tuple(m.value for m in CompileMode)
