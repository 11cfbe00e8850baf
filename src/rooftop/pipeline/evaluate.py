"""`evaluate(problem, solution, settings) -> Verdict`: the one entry point of the engine.

The trusted side: it runs the static gate itself, starts a fresh child for the rest, enforces a
wall-clock timeout per gate, and turns whatever happened (reports, a crash, silence) into a
verdict. The score gate runs here too, on the child's raw samples.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rooftop.build.cache import cache_root, source_dir
from rooftop.check.inputs import fresh_seeds
from rooftop.errors import UserError
from rooftop.integrity.policy import Violation, check_native, check_source
from rooftop.integrity.sandbox import plan
from rooftop.measure.measurement import TimingStats
from rooftop.measure.timer import TimingPolicy
from rooftop.pipeline.channel import ChannelReader
from rooftop.pipeline.environment import fallback_environment
from rooftop.pipeline.job import EvalJob, Settings
from rooftop.pipeline.scoring import score
from rooftop.pipeline.verdict import (Environment, Gate, GateRecord, SeedCheck, ShapeResult, Status,
                                      Verdict)
from rooftop.problem.spec import Problem, Shape
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
                      shapes_selected=which, reward_fn=settings.reward_fn)
    shape_results = {s.name: ShapeResult(shape=s.name, split=s.split.value, params=s.params) for s in shapes}
    verdict.shapes = list(shape_results.values())
    if not _static_gate(verdict, problem, solution):
        verdict.environment = fallback_environment(device, solution)
        return _finish(verdict, settings, started)
    job = _make_job(problem, solution, settings, device, shapes)
    _run_child(job, settings, verdict, shape_results, progress or (lambda _: None))
    if verdict.failed_gate is None:
        verdict.status = Status.correct
        score(verdict, problem, job.timing is not None)
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
    violations = []
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
    seeds = {}
    for i, shape in enumerate(shapes):
        base = None if settings.seed is None else settings.seed + 1000 * i
        seeds[shape.name] = fresh_seeds(settings.seeds_per_shape, base)
    weights_seed = settings.seed if settings.seed is not None else secrets.randbits(31)
    timing = None
    if settings.timing:
        timing = settings.timing_policy or TimingPolicy.for_device(device)
    return EvalJob(problem=problem, solution=solution, device=device, shapes=shapes, seeds=seeds,
                   weights_seed=weights_seed, timing=timing, cache_root=cache_root(),
                   build_timeout=settings.build_timeout)


def child_env(job: EvalJob) -> dict[str, str]:
    """What the child's environment adds to the scrubbed one: unbuffered output, our sources on
    the import path, and the interpreter switch for Triton on a CPU. Build locations are set by the
    child itself, which knows its device without the parent ever touching the GPU."""
    src = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": src + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
    if job.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _run_child(job: EvalJob, settings: Settings, verdict: Verdict, shapes: dict[str, ShapeResult],
               progress: Progress) -> None:
    with tempfile.TemporaryDirectory(prefix="rooftop-eval-") as tmp:
        scratch = Path(tmp)
        job_path = scratch / "job.json"
        job_path.write_text(job.model_dump_json())
        log_path = scratch / "child.log"
        sandbox = plan(settings.sandbox, scratch=scratch, device=job.device, extra_env=child_env(job),
                       writable=[source_dir(job.solution.source_hash, job.cache_root)],
                       readable=[job.solution.path, job.problem.reference, Path(__file__).resolve().parents[1]])
        if verdict.environment is None:
            verdict.environment = fallback_environment(job.device, job.solution)
        verdict.sandbox = sandbox.kind.value
        if sandbox.warning:
            verdict.warnings.append(sandbox.warning)
        read_fd, write_fd = os.pipe()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [*sandbox.prefix, sys.executable, "-m", "rooftop.pipeline.child", str(job_path), str(write_fd)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
                env=sandbox.env, cwd=scratch, start_new_session=True, preexec_fn=sandbox.limits.apply)
        os.close(write_fd)
        try:
            _follow(proc, ChannelReader(read_fd), job, settings, verdict, shapes, progress, log_path)
        finally:
            os.close(read_fd)
            _kill(proc)


def _follow(proc: subprocess.Popen, reader: ChannelReader, job: EvalJob, settings: Settings,
            verdict: Verdict, shapes: dict[str, ShapeResult], progress: Progress, log_path: Path) -> None:
    gate, gate_started, where = Gate.build, time.monotonic(), ""

    def limit(g: Gate) -> float:
        return settings.build_timeout if g is Gate.build else settings.timeout

    while True:
        message = reader.receive(gate_started + limit(gate))
        if message is None:
            if reader.closed:
                _crashed(proc, gate, where, verdict, log_path)
            else:
                _fail(verdict, gate, Status.timeout, f"the {gate.value} gate ran past its {limit(gate):g} s "
                      f"limit{where}; the child was killed")
            return
        kind = message["type"]
        if kind == "environment":
            verdict.environment = Environment.model_validate(message["environment"])
        elif kind == "gate" and message["phase"] == "start":
            gate, gate_started, where = Gate(message["gate"]), time.monotonic(), ""
            progress(gate.value)
        elif kind == "gate":
            record = GateRecord(gate=Gate(message["gate"]), ok=message["ok"],
                                seconds=message.get("seconds", time.monotonic() - gate_started),
                                detail=message.get("detail", ""), cached=message.get("cached"))
            verdict.gates.append(record)
            if not record.ok:
                status = Status(message["status"])
                _fail(verdict, record.gate, status, *message.get("messages", []))
        elif kind == "progress":  # correctness and timing: the limit applies to each shape
            where, gate_started = f" (shape '{message['shape']}')", time.monotonic()
            progress(f"{gate.value} {message['shape']}")
        elif kind == "checks":
            result = shapes[message["shape"]]
            result.checks = [SeedCheck.model_validate(c) for c in message["checks"]]
            result.correct = all(c.ok for c in result.checks)
        elif kind == "timings":
            result = shapes[message["shape"]]
            result.reference = TimingStats.model_validate(message["reference"])
            result.candidate = TimingStats.model_validate(message["candidate"])
        elif kind == "done":
            return
        elif kind == "garbled":
            _fail(verdict, gate, Status.internal_error, f"unreadable message from the child: {message['text']}")
            return


def _crashed(proc: subprocess.Popen, gate: Gate, where: str, verdict: Verdict, log_path: Path) -> None:
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        code = None
    if code is not None and verdict.sandbox == "bwrap" and 128 < code < 128 + 65:
        code = 128 - code  # bwrap reports its child's death by signal N as exit status 128 + N
    if code is not None and code < 0:
        how = f"was killed by {_signal_name(-code)}"
    else:
        how = f"exited with status {code}" if code is not None else "closed its channel"
    tail = _log_tail(log_path)
    status = _CRASH_STATUS.get(gate, Status.runtime_error)
    _fail(verdict, gate, status, f"the solution's process {how} during the {gate.value} gate{where}"
          + (f"; its last output:\n{tail}" if tail else ""))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _log_tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])[-1500:]


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass

