"""Starting an evaluation child: its scratch folder, its sandbox and its environment."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from rooftop.build.cache import source_dir
from rooftop.integrity.sandbox import plan
from rooftop.measure.contention import cpu_threads, thread_env
from rooftop.pipeline.context import Evaluation
from rooftop.pipeline.job import EvalJob
from rooftop.pipeline.session import ChildSession

PACKAGE = Path(__file__).resolve().parents[1]


def child_env(job: EvalJob) -> dict[str, str]:
    """What the child's environment adds to the scrubbed one: unbuffered output, our sources on
    the import path, and the interpreter switch for Triton on a CPU. Build locations are set by the
    child itself, which knows its platform."""
    src = str(PACKAGE.parent)
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": src + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
    if job.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
        # both sides time with the same fixed thread count (measure/contention.py says why)
        env.update(thread_env(cpu_threads()))
    return env


def start_child(ev: Evaluation) -> ChildSession:
    """A fresh child in a fresh scratch folder (removed when the evaluation closes), sandboxed as
    the settings say."""
    assert ev.job is not None
    ev.scratch = Path(tempfile.mkdtemp(prefix="rooftop-eval-"))
    sandbox = plan(ev.settings.sandbox, scratch=ev.scratch, device=ev.device, extra_env=child_env(ev.job),
                   writable=[source_dir(ev.job.solution.source_hash, ev.job.cache_root)],
                   readable=[ev.job.solution.path, ev.job.problem.reference, PACKAGE])
    ev.verdict.sandbox = sandbox.kind.value
    if sandbox.warning:
        ev.verdict.warnings.append(sandbox.warning)
    return ChildSession(sandbox, ev.scratch, ev.scratch / "child.log")
