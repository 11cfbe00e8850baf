"""`evaluate(problem, solution, settings) -> Verdict`: the one entry point of the engine.

The trusted side: it runs the static gate itself, starts a fresh child for the rest, enforces a
wall-clock timeout per gate, and turns whatever happened (reports, a crash, silence) into a
verdict. The score gate runs here too, on the child's raw samples.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rooftop.build.cache import cache_root, source_dir
from rooftop.errors import UserError
from rooftop.integrity.policy import Violation, check_file_names, check_native, check_source
from rooftop.integrity.sandbox import plan
from rooftop.measure.stopping import TimingPolicy
from rooftop.pipeline.environment import fallback_environment
from rooftop.pipeline.gates import Driver, GateStop
from rooftop.pipeline.job import EvalJob, Settings
from rooftop.pipeline.protocol import Reply
from rooftop.pipeline.session import ChildGone, ChildSession
from rooftop.pipeline.scoring import score
from rooftop.pipeline.trusted import ReferenceFailed, TrustedReference
from rooftop.pipeline.verdict import Environment, Gate, GateRecord, ShapeResult, Status, Verdict
from rooftop.problem.spec import Problem, Shape, Split
from rooftop.solution.loader import Solution

Progress = Callable[[str], None]

_CRASH_STATUS = {Gate.build: Status.compile_error, Gate.load: Status.init_error}


def resolve_device(choice: str) -> str:
    if choice != "auto":
        return choice
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def select_shapes(problem: Problem, choice: str, device: str) -> tuple[str, list[Shape]]:
    spec = problem.spec
    if choice == "auto":
        choice = "smoke" if device == "cpu" and spec.smoke else "all"
    shapes = spec.select(choice)
    if not shapes:
        raise UserError(f"--shapes {choice}: problem '{problem.name}' has no {choice} shapes")
    return choice, shapes


def evaluate(problem: Problem, solution: Solution, settings: Settings | None = None,
             progress: Progress | None = None) -> Verdict:
    settings = settings or Settings()
    started = time.monotonic()
    device = resolve_device(settings.device)
    which, shapes = select_shapes(problem, settings.shapes, device)
    verdict = Verdict(status=Status.internal_error, reward=None, problem=problem.name,
                      problem_version=problem.spec.version, solution=str(solution.path),
                      source_hash=solution.source_hash, languages=[x.value for x in solution.languages],
                      shapes_selected=which, reward_fn=settings.reward_fn,
                      graphs=settings.graphs and device == "cuda")
    shape_results = {s.name: ShapeResult(shape=s.name, split=s.split.value, params=s.params) for s in shapes}
    verdict.shapes = list(shape_results.values())
    if not _static_gate(verdict, problem, solution):
        verdict.environment = fallback_environment(device, solution)
        return _finish(verdict, settings, started)
    job = _make_job(problem, solution, settings, device, shapes)
    _run_child(job, settings, verdict, shape_results, progress or (lambda _: None))
    if verdict.failed_gate is None:
        verdict.status = Status.correct
        impossible = score(verdict, problem, settings.timing)
        if impossible:
            verdict.status, verdict.failed_gate = Status.rejected, Gate.score
            verdict.messages.extend(impossible)
    return _finish(verdict, settings, started)


def _finish(verdict: Verdict, settings: Settings, started: float) -> Verdict:
    from rooftop.score.reward import compute_reward

    verdict.wall_seconds = time.monotonic() - started
    if verdict.summary.shapes == 0:
        verdict.summary.shapes = len(verdict.shapes)
        verdict.summary.correct_shapes = sum(1 for r in verdict.shapes if r.correct)
    verdict.reward = compute_reward(verdict, settings.reward_fn)
    return verdict


def _fail(verdict: Verdict, gate: Gate, status: Status, *messages: str) -> None:
    verdict.status, verdict.failed_gate = status, gate
    verdict.messages.extend(m for m in messages if m)
    if not any(r.gate == gate for r in verdict.gates):
        verdict.gates.append(GateRecord(gate=gate, ok=False, detail=messages[0][:200] if messages else ""))


# -- static gate ------------------------------------------------------------------------------
def _static_gate(verdict: Verdict, problem: Problem, solution: Solution) -> bool:
    started = time.monotonic()
    root = solution.path if solution.path.is_dir() else solution.path.parent
    violations = check_file_names(solution.files, root)
    for path in solution.files:
        if path.suffix != ".py":
            violations += [(path, Violation(rule, line, message))
                           for rule, line, message in check_native(path.read_text(errors="replace"))]
            continue
        try:
            violations += [(path, v) for v in check_source(path.read_text(), problem.spec.policy, str(path))]
        except SyntaxError as exc:
            _fail(verdict, Gate.static, Status.compile_error,
                  f"{path.name}:{exc.lineno}: syntax error: {exc.msg}")
            return False
    if violations:
        _fail(verdict, Gate.static, Status.rejected, *[f"{path.name} {v}" for path, v in violations[:10]])
        return False
    verdict.gates.append(GateRecord(gate=Gate.static, ok=True, seconds=time.monotonic() - started))
    return True


# -- the child --------------------------------------------------------------------------------
def _make_job(problem: Problem, solution: Solution, settings: Settings, device: str, shapes: list[Shape]) -> EvalJob:
    weights_seed = settings.seed if settings.seed is not None else secrets.randbits(31)
    # held-out shapes the child does not run are not in its copy of the spec: a visible-shapes
    # evaluation leaks none of them (a problem needs at least one shape, so one without visible
    # shapes keeps its list on smoke runs)
    names = {s.name for s in shapes}
    kept = [s for s in problem.spec.shapes if s.split is not Split.held_out or s.name in names]
    seen = problem.model_copy(update={"spec": problem.spec.model_copy(update={"shapes": kept or problem.spec.shapes})})
    return EvalJob(problem=seen, solution=solution, device=device, shapes=shapes, weights_seed=weights_seed,
                   cache_root=cache_root(), build_timeout=settings.build_timeout)


def child_env(job: EvalJob) -> dict[str, str]:
    """What the child's environment adds to the scrubbed one: unbuffered output, our sources on
    the import path, and the interpreter switch for Triton on a CPU. Build locations are set by the
    child itself, which knows its platform."""
    src = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": src + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
    if job.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
        # the two processes take turns on the same cores: idle OpenMP workers must sleep, not spin
        # through the other side's call (which made CPU times several times too slow)
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def _run_child(job: EvalJob, settings: Settings, verdict: Verdict, shapes: dict[str, ShapeResult],
               progress: Progress) -> None:
    with tempfile.TemporaryDirectory(prefix="rooftop-eval-") as tmp:
        scratch = Path(tmp)
        job_path = scratch / "job.json"
        job_path.write_text(job.model_dump_json())
        sandbox = plan(settings.sandbox, scratch=scratch, device=job.device, extra_env=child_env(job),
                       writable=[source_dir(job.solution.source_hash, job.cache_root)],
                       readable=[job.solution.path, job.problem.reference, Path(__file__).resolve().parents[1]])
        verdict.sandbox = sandbox.kind.value
        if sandbox.warning:
            verdict.warnings.append(sandbox.warning)
        session = ChildSession(sandbox, job_path, scratch, scratch / "child.log")
        gate, where = Gate.build, ""
        trusted = None
        try:
            hello = session.hello(time.monotonic() + settings.build_timeout)
            verdict.environment = Environment.model_validate(hello.environment)
            progress("build")
            reply, _ = session.request("build", time.monotonic() + settings.build_timeout)
            _gate_done(verdict, Gate.build, reply)
            gate = Gate.load
            progress("load")
            reply, _ = session.request("load", time.monotonic() + settings.timeout)
            _gate_done(verdict, Gate.load, reply)
            trusted = TrustedReference(job.problem, job.device, job.weights_seed)
            driver = Driver(session, job, settings, trusted)
            gate = Gate.correctness
            started = time.monotonic()
            for shape in job.shapes:
                where = f" (shape '{shape.name}')"
                progress(f"correctness {shape.name}")
                driver.deadline = time.monotonic() + settings.timeout
                driver.correctness(shape, shapes[shape.name])
            verdict.gates.append(GateRecord(gate=Gate.correctness, ok=True, seconds=time.monotonic() - started))
            if settings.timing:
                gate, driver.gate = Gate.timing, Gate.timing
                policy = settings.timing_policy or TimingPolicy.for_device(job.device)
                # the sampler's wall cap stays inside the per-shape deadline
                policy = policy.model_copy(update={"max_wall_seconds": min(policy.max_wall_seconds,
                                                                           0.75 * settings.timeout)})
                started = time.monotonic()
                for shape in job.shapes:
                    where = f" (shape '{shape.name}')"
                    progress(f"timing {shape.name}")
                    driver.deadline = time.monotonic() + settings.timeout
                    driver.timing(shape, shapes[shape.name], policy)
                verdict.warnings.extend(driver.warnings)
                verdict.gates.append(GateRecord(gate=Gate.timing, ok=True, seconds=time.monotonic() - started))
        except _Failed:
            pass
        except GateStop as stop:
            _fail(verdict, stop.gate, stop.status, *stop.messages)
        except ReferenceFailed as exc:
            _fail(verdict, gate, Status.internal_error, str(exc))
        except ChildGone as gone:
            _child_gone(verdict, session, gone, gate, where, settings)
        finally:
            session.close()
            if trusted is not None:
                trusted.release()
        if verdict.environment is None:
            verdict.environment = fallback_environment(job.device, job.solution)


class _Failed(Exception):
    """A gate's reply reported a failure; the verdict already says so."""


def _gate_done(verdict: Verdict, gate: Gate, reply: Reply) -> None:
    if reply.failure is not None:
        verdict.gates.append(GateRecord(gate=gate, ok=False, seconds=reply.seconds or 0.0,
                                        cached=reply.failure.cached,
                                        detail=(reply.failure.messages or [""])[0][:200]))
        _fail(verdict, gate, Status(reply.failure.status), *reply.failure.messages)
        raise _Failed()
    verdict.gates.append(GateRecord(gate=gate, ok=True, seconds=reply.seconds or 0.0, cached=reply.cached,
                                    detail=reply.detail))


def _child_gone(verdict: Verdict, session: ChildSession, gone: ChildGone, gate: Gate, where: str,
                settings: Settings) -> None:
    if gone.kind == "timeout":
        limit = settings.build_timeout if gate is Gate.build else settings.timeout
        _fail(verdict, gate, Status.timeout, f"the {gate.value} gate ran past its {limit:g} s limit{where}; "
              "the child was killed")
    elif gone.kind == "protocol":
        _fail(verdict, gate, Status.rejected, f"[protocol] {gone.message}{where}")
    else:
        how = session.exit_description()
        tail = session.log_tail()
        _fail(verdict, gate, _CRASH_STATUS.get(gate, Status.runtime_error),
              f"the solution's process {how} during the {gate.value} gate{where}"
              + (f"; its last output:\n{tail}" if tail else ""))
