"""Where an agent process runs: inside bubblewrap when it is available.

The agent sees a read-only system (the interpreter and its packages, rooftop's own package, the
CUDA toolkit, its CLI), its workspace and a private home as the only writable places, a private
/tmp, the run's gateway socket (./check and ./bench), and the network (it must reach its model).
The results database, other runs, the repository's problem folders and held-out data are simply
not there, and it gets no GPU: kernels reach the GPU only through the gateway's queue, so an
agent cannot disturb another run's timing. Its environment holds only what its config names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rooftop.integrity.sandbox import SYSTEM_PATHS, SandboxKind, bwrap_path, python_paths, require_bwrap, ro_binds
from rooftop.pipeline.spawn import PACKAGE

# variables an agent process inherits whatever its config says: no secrets among them
BASE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "CUDA_HOME", "CUDA_PATH")


@dataclass
class AgentSandbox:
    kind: SandboxKind
    prefix: list[str]
    warning: str | None = None


def agent_sandbox(kind: SandboxKind | str, *, workspace: Path, home: Path, gateway: Path,
                  readable: list[Path]) -> AgentSandbox:
    asked = SandboxKind(kind)
    binary = require_bwrap() if asked is SandboxKind.bwrap else (bwrap_path() if asked is SandboxKind.auto else None)
    if binary is None:
        warning = ("no agent sandbox: bubblewrap is not installed, so the agent ran with this user's files"
                   if asked is SandboxKind.auto else "no agent sandbox (--agent-sandbox none)")
        return AgentSandbox(SandboxKind.none, [], warning)
    args = [binary, "--die-with-parent", "--unshare-all", "--share-net", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    args += ro_binds([*map(Path, SYSTEM_PATHS), *python_paths(), PACKAGE, *readable])
    for path in (workspace, home, gateway):
        args += ["--bind", str(path), str(path)]
    # the root bwrap builds is a tmpfs: read-only too, so the only writable places are the three
    # above and the private /tmp
    args += ["--remount-ro", "/", "--chdir", str(workspace), "--"]
    return AgentSandbox(SandboxKind.bwrap, args)


def agent_env(names: list[str], *, home: Path, tmp: Path, extra: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The agent's environment: the base variables, the ones its config names (its API key),
    and the adapter's own; and which named ones were not set here."""
    env = {k: os.environ[k] for k in BASE_ENV if k in os.environ}
    missing = [n for n in names if n not in os.environ]
    env.update({n: os.environ[n] for n in names if n in os.environ})
    env.update({"HOME": str(home), "TMPDIR": str(tmp), "ROOFTOP_WORKSPACE": "1", **extra})
    return env, missing
