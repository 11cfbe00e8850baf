"""Every environment variable rooftop reads, in one place: its name, what it does, its default.

The user's settings come first; then the variables the trusted side hands its own processes (an
evaluation child, an agent's sandbox), which say nothing to a user. Code reads them through
`read` and `take` only, so this table is the whole list (docs/CONFIGURATION.md shows it, and a
test holds the two together).
"""

from __future__ import annotations

import os
from typing import NamedTuple


class Variable(NamedTuple):
    name: str
    meaning: str
    default: str = ""
    internal: bool = False  # set by rooftop for a process it starts, never by a user


DECKS = "ROOFTOP_DECKS"
PROBLEMS = "ROOFTOP_PROBLEMS"
CACHE = "ROOFTOP_CACHE"
NVCC = "ROOFTOP_NVCC"
BWRAP = "ROOFTOP_BWRAP"
LOCKS = "ROOFTOP_LOCKS"
CPU_THREADS = "ROOFTOP_CPU_THREADS"
PYCACHE = "ROOFTOP_PYCACHE"
TOKEN = "ROOFTOP_TOKEN"
SANDBOX = "ROOFTOP_SANDBOX"
BUILD_DIR = "ROOFTOP_BUILD_DIR"
WARM_IMPORTS = "ROOFTOP_WARM_IMPORTS"
WARM_CUDA = "ROOFTOP_WARM_CUDA"
SEALED_TIMER = "ROOFTOP_SEALED_TIMER"
WORKSPACE = "ROOFTOP_WORKSPACE"
AGENT_RUN = "ROOFTOP_AGENT_RUN"

VARIABLES: dict[str, Variable] = {v.name: v for v in (
    Variable(DECKS, "the folder of imported decks (`rooftop import ... --into` writes there by default), whose "
             "problems are then named `<deck>/<problem>`", "~/.local/share/rooftop/decks"),
    Variable(PROBLEMS, "the folder of the bundled decks", "the repository's problems/"),
    Variable(CACHE, "the build cache, the sealed timer, counted figures and sizes", "~/.cache/rooftop"),
    Variable(NVCC, "the nvcc to compile CUDA sources with; `none` hides nvcc", "nvcc on the PATH, else "
             "/usr/local/cuda/bin/nvcc"),
    Variable(BWRAP, "the bubblewrap binary (a carried one, where none is installed)", "bwrap on the PATH"),
    Variable(LOCKS, "the folder of GPU leases shared by every rooftop process of a host (give processes with "
             "private /tmp folders one they share)", "/tmp/rooftop-locks"),
    Variable(CPU_THREADS, "threads each side of a CPU timing uses", "1"),
    Variable(PYCACHE, "`off` keeps Python's own bytecode behaviour instead of rooftop's bytecode folder in "
             "the cache", "on"),
    Variable(TOKEN, "the bearer token of `rooftop serve` (withdrawn from the environment once read) and the "
             "client's default", "none"),
    Variable(SANDBOX, "how the evaluation child is isolated (bwrap or none), so it can explain a refusal", "",
             internal=True),
    Variable(BUILD_DIR, "the child's build folder, where its sandbox lets compilers write", "", internal=True),
    Variable(WARM_IMPORTS, "modules a child started ahead imports before its job arrives", "", internal=True),
    Variable(WARM_CUDA, "1: a child started ahead by a GPU worker makes its CUDA context first", "",
             internal=True),
    Variable(SEALED_TIMER, "the built sealed timer the child loads and seals before any candidate code", "",
             internal=True),
    Variable(WORKSPACE, "1 inside an agent's sandbox: ./check and ./bench talk to the run's gateway", "",
             internal=True),
    Variable(AGENT_RUN, "marks every process of an agent run, so that its leftovers can be found and killed", "",
             internal=True),
)}


def read(name: str, default: str | None = None) -> str | None:
    """A registered variable's value (`default` when unset)."""
    return os.environ.get(_registered(name), default)


def take(name: str) -> str:
    """A registered variable's value ('' when unset), removed from this process's environment:
    what a child is handed once, or a secret nothing started later may inherit."""
    return os.environ.pop(_registered(name), "")


def _registered(name: str) -> str:
    if name not in VARIABLES:
        raise KeyError(f"{name} is not a variable rooftop reads (add it to rooftop/config.py)")
    return name
