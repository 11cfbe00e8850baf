"""Where an agent process runs: inside bubblewrap when it is available.

The agent sees a read-only system (the interpreter and its packages, rooftop's own package, the
CUDA toolkit, its CLI), its workspace and a private home as the only writable places, a private
/tmp, the run's gateway socket (./check and ./bench), and a network namespace of its own whose
only way out is the run's egress proxy (`egress.py`), which reaches the endpoints its config lists
(its model's API) and nothing else: no rooftop server, no host service, no other machine.
The results database, other runs, the repository's problem folders and held-out data are simply
not there, and it gets no GPU: kernels reach the GPU only through the gateway's queue, so an
agent cannot disturb another run's timing. Its environment holds only what its config names.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from rooftop import config
from rooftop.agents.egress import Egress, is_loopback
from rooftop.integrity.sandbox import SYSTEM_PATHS, bwrap_path, python_paths, require_bwrap, ro_binds
from rooftop.pipeline.trusted.spawn import PACKAGE
from rooftop.vocabulary import SandboxKind

# variables an agent process inherits whatever its config says: no secrets among them
BASE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "CUDA_HOME", "CUDA_PATH")
RELAY = Path(__file__).with_name("relay.py")
HOST_NETWORK = "host"  # an agent given the host's network (endpoints: ["*"])


@dataclass
class AgentSandbox:
    kind: SandboxKind
    prefix: list[str]
    warning: str | None = None


def agent_sandbox(kind: SandboxKind | str, *, workspace: Path, home: Path, gateway: Path,
                  readable: list[Path], network: Egress | str | None = None) -> AgentSandbox:
    """The command prefix that starts an agent in its sandbox. `network`: the run's egress proxy
    (the agent reaches its listed endpoints only), HOST_NETWORK (the host's network, said in the
    warning), or None (no network at all: the version probe)."""
    asked = SandboxKind(kind)
    binary = require_bwrap() if asked is SandboxKind.bwrap else (bwrap_path() if asked is SandboxKind.auto else None)
    if binary is None:
        unsandboxed = ("no agent sandbox: bubblewrap is not installed, so the agent ran with this user's files and "
                   "network" if asked is SandboxKind.auto else "no agent sandbox (--agent-sandbox none): the agent "
                   "ran with this user's files and network")
        return AgentSandbox(SandboxKind.none, [], unsandboxed)
    args = [binary, "--die-with-parent", "--unshare-all", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    warning: str | None = None
    if network == HOST_NETWORK:
        args.append("--share-net")
        warning = "the agent shared the host's network (endpoints: *): it could reach any service this machine can"
    args += ro_binds([*map(Path, SYSTEM_PATHS), *python_paths(), PACKAGE, *readable])
    for path in (workspace, home, gateway, *([network.folder] if isinstance(network, Egress) else [])):
        args += ["--bind", str(path), str(path)]
    # the root bwrap builds is a tmpfs: read-only too, so the only writable places are the three
    # above and the private /tmp
    args += ["--remount-ro", "/", "--chdir", str(workspace), "--"]
    if isinstance(network, Egress):
        args += [sys.executable, "-I", "-S", str(RELAY), str(network.socket)]
        for target in filter(is_loopback, network.allowed):
            args += ["--forward", target]
        args.append("--")
    return AgentSandbox(SandboxKind.bwrap, args, warning)


def agent_env(names: list[str], *, home: Path, tmp: Path, extra: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The agent's environment: the base variables, the ones its config names (its API key),
    and the adapter's own; and which named ones were not set here."""
    env = {k: os.environ[k] for k in BASE_ENV if k in os.environ}
    missing = [n for n in names if n not in os.environ]
    env.update({n: os.environ[n] for n in names if n in os.environ})
    env.update({"HOME": str(home), "TMPDIR": str(tmp), config.WORKSPACE: "1", **extra})
    return env, missing
