"""rooftop: problems in, verdicts out.

    from rooftop import run_evaluation
    verdict = run_evaluation("examples/softmax", "my_softmax.py", store="rooftop.db")

`run_evaluation` checks the problem, evaluates, applies stored baselines and records the verdict;
`evaluate` is the engine alone (no problem check, no store).

Names are imported lazily so that `import rooftop` (and the CLI's quick commands) stay fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "run_evaluation": "rooftop.api",
    "evaluate": "rooftop.pipeline.evaluate",
    "Cancelled": "rooftop.pipeline.trusted.context",
    "Event": "rooftop.vocabulary",
    "Settings": "rooftop.vocabulary",
    "DeviceChoice": "rooftop.vocabulary",
    "ShapeGroup": "rooftop.vocabulary",
    "SandboxKind": "rooftop.vocabulary",
    "Verdict": "rooftop.verdict",
    "Status": "rooftop.verdict",
    "load_problem": "rooftop.problem.loader",
    "resolve_problem": "rooftop.problem.registry",
    "load_solution": "rooftop.solution.loader",
    "Store": "rooftop.store.db",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name == "resolve_problem":
        return importlib.import_module(_PUBLIC[name]).resolve
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'rooftop' has no attribute '{name}'")
