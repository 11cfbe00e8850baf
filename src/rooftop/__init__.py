"""rooftop: problems in, verdicts out.

    from rooftop import evaluate, load_problem, load_solution
    verdict = evaluate(load_problem("problems/examples/softmax"), load_solution("my_softmax.py"))

Names are imported lazily so that `import rooftop` (and the CLI's quick commands) stay fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "evaluate": "rooftop.pipeline.evaluate",
    "Settings": "rooftop.pipeline.job",
    "Verdict": "rooftop.pipeline.verdict",
    "Status": "rooftop.pipeline.verdict",
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
