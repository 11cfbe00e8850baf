"""One agent run: a fresh workspace, the agent under its budget in its sandbox, then grading.

    plan = RunPlan(agent=AgentConfig(adapter="claude", env=["ANTHROPIC_API_KEY"]), model="...",
                   problem="hard/topk", repeat=0)
    record = run_agent(plan, evaluator=evaluator, settings=settings, runs_dir=Path("runs"), db=db)

The agent's process group is killed at the budget (TERM, then KILL after a grace period), and
whatever it left running is killed when it exits: every process of the run carries a marker in
its environment, and under bwrap the run's PID namespace dies with it too. Its solution is then
read from outside the sandbox and graded twice through the service: on the shapes it was shown
(the visible verdict) and on every shape, held-out ones included (the graded verdict).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rooftop import config
from rooftop.agents.adapters import Adapter
from rooftop.agents.adapters import adapter as find_adapter
from rooftop.agents.egress import Egress, endpoint
from rooftop.agents.gateway import Gateway
from rooftop.agents.processes import feed, kill_group, kill_marked, stop_group
from rooftop.agents.record import AgentRun, Grade
from rooftop.agents.sandbox import HOST_NETWORK, agent_env, agent_sandbox
from rooftop.agents.workspace import NO_SOLUTION, build_workspace, snapshot, solution_files
from rooftop.env.core import shape_groups
from rooftop.errors import UserError
from rooftop.problem.registry import resolve
from rooftop.problem.spec import Problem
from rooftop.service.evaluator import Evaluator
from rooftop.store.db import Store
from rooftop.transcripts.detect import AGENT_FILES
from rooftop.vocabulary import Settings

GRACE_S = 5.0  # between TERM and KILL
MARKER = config.AGENT_RUN
MAX_FILE_BYTES, MAX_FILES_BYTES = 64 << 20, 256 << 20


class AgentConfig(BaseModel):
    """An agent as a sweep's config names it."""

    model_config = ConfigDict(extra="forbid")

    adapter: str
    name: str | None = Field(default=None, description="label in run names and reports (default: the adapter)")
    models: list[str] = Field(default=[], description="models to run it with (none: the CLI's default)")
    executable: str | None = Field(default=None, description="the CLI to start (default: the adapter's, on PATH)")
    args: list[str] = Field(default=[], description="extra arguments (the `command` adapter: the whole command)")
    env: list[str] = Field(default=[], description="environment variables passed to the agent (its API key)")
    home_files: list[Path] = Field(default=[], description="files copied into the agent's private home")
    mounts: list[Path] = Field(default=[], description="more folders the agent may read")
    endpoints: list[str] = Field(default=[], description=(
        "host:port (or URLs) the agent may reach from its sandbox, in place of its adapter's provider; "
        "http(s) URLs in args and in the variables it is passed are added; [\"*\"]: the host's network"))
    max_turns: int | None = Field(default=None, ge=1)
    timeout: float = Field(default=2700.0, gt=0, description="wall-clock budget per run, seconds")

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, value: list[str]) -> list[str]:
        return value if value == ["*"] else [endpoint(v) for v in value]

    @model_validator(mode="after")
    def _command_line(self) -> AgentConfig:
        """The `command` adapter's whole command line is `args`; an `executable` given beside them is
        its program, and the args are what follows it (as `--executable X --arg Y` reads)."""
        if self.adapter != "command":
            return self
        if self.executable:
            self.args, self.executable = [self.executable, *self.args], None
        if not self.args or not self.args[0].strip():
            raise ValueError("the command adapter needs the agent's command line: its program (--executable, or "
                             "`executable` in a config) and each argument after it (--arg, or `args`), e.g. "
                             "--executable my-agent --arg=--model --arg '{model}' --arg '{prompt_file}'")
        return self

    @property
    def label(self) -> str:
        return self.name or self.adapter

    def reachable(self, adapter: Adapter) -> list[str] | None:
        """The endpoints its sandbox lets it reach (None: the host's network): the listed ones or
        the adapter's provider, and the host:port of every http(s) URL in its args or passed
        variables (a base URL pointing at another server)."""
        if self.endpoints == ["*"]:
            return None
        named = [os.environ[n] for n in self.env if n in os.environ]
        urls = [url for text in [*self.args, *named] for url in re.findall(r"https?://[^\s\"'<>,;]+", text)]
        return sorted({*(self.endpoints or adapter.endpoints), *map(_endpoint_or_none, urls)} - {None})


class RunPlan(BaseModel):
    agent: AgentConfig
    model: str | None = None
    problem: str
    repeat: int = 0
    sweep: str | None = None

    def cell(self) -> tuple[str, str | None, str, int]:
        return self.agent.label, self.model, self.problem, self.repeat


def _endpoint_or_none(url: str) -> str | None:
    try:
        return endpoint(url)
    except ValueError:
        return None


def slug(text: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", text or "default").strip("-")[:60] or "x"


def run_agent(plan: RunPlan, *, evaluator: Evaluator, settings: Settings, runs_dir: Path, db: Path,
              agent_sandbox_kind: str = "auto", grace_s: float = GRACE_S, problem: Problem | None = None) -> AgentRun:
    problem = problem or resolve(plan.problem)
    adapter = find_adapter(plan.agent.adapter)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    ident = f"{stamp}_{slug(plan.agent.label)}_{slug(plan.model)}_{slug(Path(problem.name).name)}_{plan.repeat}"
    folder = runs_dir.resolve() / ident
    workspace, home = folder / "workspace", folder / "home"
    run_shapes, graded_shapes = shape_groups(problem, evaluator.device)
    record = AgentRun(id=ident, sweep=plan.sweep, agent=plan.agent.label, adapter=adapter.name, model=plan.model,
                      problem=problem.name, repeat=plan.repeat, started_at=_now(), budget_s=plan.agent.timeout,
                      max_turns=plan.agent.max_turns, run_shapes=run_shapes, graded_shapes=graded_shapes,
                      folder=str(folder))
    folder.mkdir(parents=True)
    _save(db, record)
    try:
        # before the gateway and the workspace exist: the probe is the whole CLI (a `command` agent
        # ignores --version and runs), which must get nothing of the run's, not even its API key
        record.cli_version = _probe_version(plan, adapter, agent_sandbox_kind, ident)
        with Gateway(evaluator, problem, settings, run_shapes=run_shapes, label=f"agent:{ident}",
                     log=folder / "calls.jsonl", workspace=workspace) as gateway:
            build_workspace(problem, workspace, socket_path=gateway.socket, run_shapes=run_shapes,
                            budget_s=plan.agent.timeout, max_turns=plan.agent.max_turns)
            home.mkdir()
            for source in plan.agent.home_files:
                _copy_home_file(Path(source).expanduser(), home)
            reachable = plan.agent.reachable(adapter)
            with Egress(reachable or []) as egress:
                network = HOST_NETWORK if reachable is None else egress
                _run_session(plan, adapter, record, folder, workspace, home, gateway.folder, agent_sandbox_kind,
                             grace_s, network)
            # without bwrap nothing stood between the agent and the host's network
            record.endpoints = ["*"] if reachable is None or record.sandbox == "none" else egress.allowed
            record.egress_refused = egress.refused
            record.checks = sum(c.tool == "check" for c in gateway.calls)
            record.benches = sum(c.tool == "bench" for c in gateway.calls)
        record.visible, record.graded = _grade(evaluator, problem, settings, workspace, run_shapes, graded_shapes,
                                               ident, folder / "verdicts")
        record.state = "done"
    except UserError as exc:
        record.state, record.error = "failed", str(exc)
    except Exception as exc:  # the harness's own failure: this run is lost, the sweep goes on
        import traceback

        (folder / "harness_error.log").write_text(traceback.format_exc())
        record.state, record.error = "failed", f"internal error: {type(exc).__name__}: {exc} (harness_error.log)"
    finally:
        shutil.rmtree(home, ignore_errors=True)  # it may hold credentials copied for the CLI
        record.finished_at = _now()
        (folder / "run.json").write_text(record.model_dump_json(indent=2))
        _save(db, record)
    return record


def _run_session(plan: RunPlan, adapter: Adapter, record: AgentRun, folder: Path, workspace: Path, home: Path,
                 gateway: Path, sandbox_kind: str, grace_s: float, network: Egress | str) -> None:
    program, readable = _program(plan, adapter)
    prompt = (workspace / "PROMPT.md").read_text()
    launch = adapter.launch(executable=program, prompt=prompt, workspace=workspace, home=home, model=plan.model,
                            max_turns=plan.agent.max_turns, args=list(plan.agent.args))
    sandbox = agent_sandbox(sandbox_kind, workspace=workspace, home=home, gateway=gateway, readable=readable,
                            network=network)
    tmp = Path("/tmp") if sandbox.prefix else home / "tmp"
    tmp.mkdir(exist_ok=True)
    env, missing = agent_env(plan.agent.env, home=home, tmp=tmp, extra={**launch.env, MARKER: record.id})
    record.sandbox, record.sandbox_warning = sandbox.kind.value, sandbox.warning
    record.env_passed, record.env_missing = [n for n in plan.agent.env if n not in missing], missing
    record.command = _redacted(launch.argv, prompt, [os.environ[n] for n in record.env_passed])
    transcript, stderr = folder / "transcript.jsonl", folder / "stderr.log"
    record.transcript = transcript.name
    started = time.monotonic()
    with transcript.open("wb") as out, stderr.open("wb") as err:
        try:
            proc = subprocess.Popen([*sandbox.prefix, *launch.argv], cwd=workspace, env=env, stdout=out, stderr=err,
                                    stdin=subprocess.PIPE if launch.stdin is not None else subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            raise UserError(f"agent {plan.agent.label}: could not start {launch.argv[0]} ({exc.strerror})") from None
        if launch.stdin is not None:
            threading.Thread(target=feed, args=(proc, launch.stdin), daemon=True).start()
        try:
            proc.wait(timeout=plan.agent.timeout)
        except subprocess.TimeoutExpired:
            record.timed_out = True
            stop_group(proc, grace_s)
        finally:
            kill_group(proc.pid)
            kill_marked(MARKER, record.id)
    record.wall_s = round(time.monotonic() - started, 3)
    record.exit_code = proc.returncode
    extra = collect_files(adapter.extra_transcripts(home), home, folder / AGENT_FILES)
    exit_code = None if record.timed_out else proc.returncode
    record.usage = adapter.usage(transcript, extra).checked(adapter.usage_origin)
    record.completed = adapter.completed(transcript, exit_code)


def collect_files(paths: list[Path], home: Path, into: Path) -> list[Path]:
    """Copies of the agent's files under `into`, at their place relative to its home: only regular
    files reached through no link (each opened with O_NOFOLLOW, checked after opening), at most
    MAX_FILE_BYTES each and MAX_FILES_BYTES in all; anything else is left where it is. The agent's
    processes are gone by now, so nothing changes under the walk."""
    root, copied, left = Path(os.path.realpath(home)), [], MAX_FILES_BYTES
    for path in paths:
        place = Path(os.path.abspath(path))
        if not place.is_relative_to(root) or Path(os.path.realpath(place)) != place:
            continue  # outside the home, or a link on the way
        try:
            fd = os.open(place, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as source:
            status = os.fstat(source.fileno())
            if not stat.S_ISREG(status.st_mode) or status.st_size > min(MAX_FILE_BYTES, left):
                continue
            target = into / place.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = source.read(min(MAX_FILE_BYTES, left) + 1)
            if len(data) > min(MAX_FILE_BYTES, left):
                continue
            target.write_bytes(data)
            left -= len(data)
            copied.append(target)
    return copied


def _grade(evaluator: Evaluator, problem: Problem, settings: Settings, workspace: Path, run_shapes: str,
           graded_shapes: str, ident: str, verdicts: Path) -> tuple[Grade, Grade]:
    """Both gradings' headline figures; their whole verdicts go to `verdicts/` (visible.json,
    graded.json) beside the run's other files, outside anything an agent ever sees."""
    try:
        files = solution_files(workspace)
    except UserError as exc:
        return (Grade(shapes=run_shapes, status="rejected", message=str(exc)),
                Grade(shapes=graded_shapes, status="rejected", message=str(exc)))
    if not files:
        why = NO_SOLUTION
        return (Grade(shapes=run_shapes, status="no_solution", message=why),
                Grade(shapes=graded_shapes, status="no_solution", message=why))
    source = snapshot(files)
    groups = {"visible": run_shapes, "graded": graded_shapes}
    # one job per group: the same code on the same shapes (smoke ones on a CPU) is one evaluation
    jobs = {name: evaluator.submit(problem, source, settings.model_copy(update={"shapes": group, "timing": True}),
                                   label=f"agent:{ident}:{name}")
            for name, group in groups.items()}
    grades: dict[str, Grade] = {}
    verdicts.mkdir(exist_ok=True)
    for name, job in jobs.items():
        result = evaluator.wait(job)
        if result.verdict is None:
            grades[name] = Grade(shapes=groups[name], job=job, status="internal_error", message=result.error)
            continue
        grades[name] = Grade.of(groups[name], job, result.verdict)
        (verdicts / f"{name}.json").write_text(result.verdict.model_dump_json(indent=1))
    return grades["visible"], grades["graded"]


def _program(plan: RunPlan, adapter: Adapter) -> tuple[str, list[Path]]:
    """The CLI to start, and the folders it may read besides the system's."""
    program = executable(plan.agent.executable or adapter.program(plan.agent.args), plan.agent.adapter)
    real = Path(os.path.realpath(program))
    # a CLI installed with npm may start a binary of another package: its whole node_modules is readable
    packages = [p for p in real.parents if p.name == "node_modules"][-1:]
    return program, [Path(program).parent, real.parent, *packages,
                     *(Path(m).expanduser().resolve() for m in plan.agent.mounts)]


def _probe_version(plan: RunPlan, adapter: Adapter, sandbox_kind: str, ident: str) -> str | None:
    """The CLI's `--version` line, asked in a sandbox of empty folders: no workspace, no gateway,
    none of the variables the config passes (its API key), its leftovers killed after."""
    program, readable = _program(plan, adapter)
    with tempfile.TemporaryDirectory(prefix="rooftop-version-") as tmp:
        places = [Path(tmp) / name for name in ("workspace", "home", "gateway", "tmp")]
        for place in places:
            place.mkdir()
        workspace, home, gateway, scratch = places
        sandbox = agent_sandbox(sandbox_kind, workspace=workspace, home=home, gateway=gateway, readable=readable)
        marker = f"{ident}-version"
        env, _ = agent_env([], home=home, tmp=Path("/tmp") if sandbox.prefix else scratch, extra={MARKER: marker})
        try:
            return _version([*sandbox.prefix, *adapter.version_argv(program)], env, workspace)
        finally:
            kill_marked(MARKER, marker)


def _version(argv: list[str], env: dict[str, str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stdout or done.stderr).decode(errors="replace").strip().splitlines()
    return lines[0][:200] if lines else None


def _redacted(argv: list[str], prompt: str, secrets: list[str]) -> list[str]:
    out = []
    for arg in argv:
        if prompt and prompt in arg:  # the prompt alone, or in an option (--prompt=...)
            arg = arg.replace(prompt, "{prompt}")
        for secret in secrets:
            if len(secret) >= 4:
                arg = arg.replace(secret, "***")
        out.append(arg)
    return out


def executable(name: str, adapter: str) -> str:
    if os.sep in name:
        path = Path(name).expanduser().absolute()  # not resolved: a venv's python is a link to its base
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UserError(f"executable: {name} (agent {adapter}) is not an executable file")
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise UserError(f"executable: '{name}' (agent {adapter}) is not on PATH; install it or set `executable`")
    return found


def _copy_home_file(source: Path, home: Path) -> None:
    if not source.is_file():
        raise UserError(f"home_files: {source} is not a file")
    user_home = Path.home()
    relative = source.relative_to(user_home) if source.is_relative_to(user_home) else Path(source.name)
    target = home / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def _save(db: Path, record: AgentRun) -> None:
    store = Store(db)
    try:
        store.agent_runs.save(record.id, sweep=record.sweep, agent=record.agent, model=record.model,
                              problem=record.problem, repeat=record.repeat, state=record.state,
                              visible_job=record.visible.job if record.visible else None,
                              graded_job=record.graded.job if record.graded else None,
                              record_json=record.model_dump_json())
    finally:
        store.close()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
