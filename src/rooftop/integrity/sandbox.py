"""Where the evaluation child runs: inside bubblewrap when it is available, and always with a
scrubbed environment and resource limits.

Inside bwrap the child sees a read-only system (the interpreter, its packages, the CUDA toolkit
and driver), its own scratch folder and its solution's build folder as the only writable places,
the solution and the problem's `reference.py` read-only, a private /tmp, no network, and the GPU
device nodes. The results database, other solutions and the rest of the problem folder are simply
not there.
"""

from __future__ import annotations

import glob
import os
import re
import resource
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from rooftop import config
from rooftop.errors import UserError


class SandboxKind(StrEnum):
    """How a process (an evaluation's child, an agent) is isolated: auto is bwrap when installed,
    else none, said wherever the result is shown."""

    auto = "auto"
    bwrap = "bwrap"
    none = "none"


# environment variables a child may inherit; everything else (keys, tokens, secrets) is dropped
ENV_ALLOWED = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "CUDA_HOME", "CUDA_PATH",
               "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CC", "CXX", "NVCC_CCBIN", "CUDA_MODULE_LOADING",
               "PYTHONPATH", "TRITON_INTERPRET", config.NVCC, "MAX_JOBS", "TORCH_CUDA_ARCH_LIST",
               "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
               "NVSHMEM_DISABLE_NVLS"}
ENV_PREFIXES = ("NVIDIA_", "LC_")
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|SEED|AUTH)", re.IGNORECASE)

# read-only system paths the child needs (those that exist are bound)
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt", "/sys", "/usr/local/cuda",
                "/usr/local/nvidia", "/run/nvidia-persistenced")


MAX_PROCESSES = 1024  # a child's tree at once: a build's compilers fit many times over, a fork bomb does not


@dataclass
class Limits:
    """Per-child resource limits (setrlimit), applied whether or not bwrap is used."""

    cpu_seconds: int = 4 * 3600
    file_bytes: int = 4 << 30  # largest file it may write (logs, objects)
    open_files: int = 4096
    address_space_bytes: int | None = None  # CPU runs only: CUDA reserves huge virtual ranges
    # the whole process tree, watched from outside (integrity/watchdog.py): resident host memory and
    # processes at once
    memory_bytes: int | None = None
    processes: int | None = None
    disk_bytes: int | None = None  # the files it writes in the host folders it may write, in all

    def apply(self) -> None:
        die_with_parent()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_seconds, self.cpu_seconds))
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_bytes, self.file_bytes))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = self.open_files if hard == resource.RLIM_INFINITY else min(self.open_files, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        if self.address_space_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (self.address_space_bytes, self.address_space_bytes))


def die_with_parent() -> None:
    """SIGKILL this process when the one that started it dies (bwrap's --die-with-parent, for
    every child): a killed worker or orchestrator leaves no candidate running behind it."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class SandboxPlan:
    """How to start the child: the command prefix, its environment and what it may touch."""

    kind: SandboxKind
    prefix: list[str]
    env: dict[str, str]
    limits: Limits
    writable: list[Path] = field(default_factory=list)
    warning: str | None = None


def bwrap_path() -> str | None:
    """bwrap from $ROOFTOP_BWRAP (a carried binary), else the PATH."""
    override = config.read(config.BWRAP)
    if override:
        return override if Path(override).exists() else None
    return shutil.which("bwrap")


def require_bwrap() -> str:
    """The bwrap binary, or a usage error saying how to get one."""
    binary = bwrap_path()
    if binary is None:
        raise UserError("--sandbox bwrap: bubblewrap (bwrap) is not installed here "
                        "(apt-get install bubblewrap, or point ROOFTOP_BWRAP at a bwrap binary)")
    return binary


def require_isolation(choice: str, what: str, option: str = "--sandbox") -> None:
    """What runs candidates for others (the server, a batch, the env, agent runs) takes no silent
    fallback: `auto` without bubblewrap is a usage error, and running unsandboxed is asked for by
    name (`none`), which every verdict then says."""
    if SandboxKind(choice) is SandboxKind.auto and bwrap_path() is None:
        raise UserError(f"{option} auto: bubblewrap is not installed here, so {what} would run code with this "
                        "user's files and network; install it (apt-get install bubblewrap, or point ROOFTOP_BWRAP "
                        f"at a bwrap binary), or pass {option} none to run it unsandboxed")


def unsandboxed_warning() -> str | None:
    """The first line `eval` and `demo` print where `auto` finds no bubblewrap (None where it does)."""
    if bwrap_path() is not None:
        return None
    return ("warning: no sandbox: bubblewrap is not installed, so candidates run with this user's files and "
            "network (apt-get install bubblewrap)")


def reaper_prefix() -> list[str]:
    """What an unsandboxed child is started through (integrity/reaper.py): a parent that kills the
    child's whole tree, compilers included, when this process ends, as bwrap's pid namespace does."""
    from rooftop.integrity import reaper

    return [sys.executable, "-I", "-S", reaper.__file__, str(os.getpid()), "--"]


def scrubbed_env(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """Only allow-listed variables whose names do not look like secrets, plus ours."""
    kept = {k: v for k, v in base.items()
            if (k in ENV_ALLOWED or k.startswith(ENV_PREFIXES)) and not SECRET_NAME.search(k)}
    return {**kept, **extra}


def plan(kind: SandboxKind | str, *, scratch: Path, writable: list[Path], readable: list[Path],
         device: str, extra_env: dict[str, str]) -> SandboxPlan:
    """The sandbox for one child. `bwrap` without bwrap installed is a usage error."""
    asked = SandboxKind(kind)
    if asked is SandboxKind.bwrap:
        binary: str | None = require_bwrap()
    else:
        binary = bwrap_path() if asked is SandboxKind.auto else None
    kind = SandboxKind.bwrap if binary else SandboxKind.none
    home = scratch / "home"
    home.mkdir(parents=True, exist_ok=True)
    child_env = scrubbed_env(dict(os.environ), {
        **extra_env, "HOME": str(home), "PYTHONNOUSERSITE": "1", config.SANDBOX: kind.value,
        "TMPDIR": "/tmp" if kind is SandboxKind.bwrap else str(scratch)})
    from rooftop.integrity.watchdog import default_disk_limit, default_memory_limit

    limits = Limits(address_space_bytes=(48 << 30) if device == "cpu" else None, memory_bytes=default_memory_limit(),
                    processes=MAX_PROCESSES, disk_bytes=default_disk_limit(scratch))
    if binary is None:
        warning = ("no sandbox: bubblewrap is not installed, so the candidate ran with this user's file "
                   "and network access" if asked is SandboxKind.auto else
                   "no sandbox (--sandbox none): the candidate ran with this user's file and network access")
        return SandboxPlan(SandboxKind.none, reaper_prefix(), child_env, limits, [scratch, *writable], warning)
    return SandboxPlan(SandboxKind.bwrap, _bwrap_args(binary, scratch, writable, readable, device),
                       child_env, limits, [scratch, *writable])


def _bwrap_args(binary: str, scratch: Path, writable: list[Path], readable: list[Path], device: str) -> list[str]:
    args = [binary, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    args += ro_binds([*map(Path, SYSTEM_PATHS), *python_paths(), *readable])
    for path in [scratch, *writable]:
        path.mkdir(parents=True, exist_ok=True)
        args.extend(["--bind", str(path), str(path)])
    if device == "cuda":
        for node in sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri/*")):
            args.extend(["--dev-bind", node, node])
    args.extend(["--chdir", str(scratch), "--"])
    return args


def ro_binds(paths: Iterable[Path]) -> list[str]:
    """bwrap's read-only binds of the paths that exist, in order; one inside a folder already bound
    is skipped (bound once, by its folder)."""
    args: list[str] = []
    bound: list[Path] = []
    for path in map(Path, paths):
        if path.exists() and not any(path == b or b in path.parents for b in bound):
            args += ["--ro-bind", str(path), str(path)]
            bound.append(path)
    return args


def python_paths() -> list[Path]:
    """The interpreter and its package folders (a venv, the system prefix, folders named on
    PYTHONPATH). Not every `sys.path` entry: the current folder or a test runner's folders may be
    a checkout holding results and problems the child must not see."""
    prefixes = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent}
    named = {Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    roots = set(prefixes)
    for entry in sys.path:
        path = Path(entry)
        if entry and path.is_dir() and (path.name in ("site-packages", "dist-packages") or path in named
                                        or any(path.is_relative_to(p) for p in prefixes)):
            roots.add(path)
    return sorted(roots, key=lambda p: len(p.parts))


def denial(exc: BaseException) -> str | None:
    """If an exception (or its cause) is the sandbox saying no, what was refused; else None.

    Runs in the child, which knows from ROOFTOP_SANDBOX whether it is sandboxed.
    """
    import errno
    import socket

    if config.read(config.SANDBOX) != SandboxKind.bwrap.value:
        return None
    link: BaseException | None = exc  # then its cause or context; bounded, as a chain can loop
    seen = 0
    while link is not None and seen < 10:
        if isinstance(link, socket.gaierror):
            return "network access (name resolution) is not available in the sandbox"
        if isinstance(link, OSError):
            code, name = link.errno, getattr(link, "filename", None)
            if code in (errno.ENETUNREACH, errno.ENETDOWN, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL,
                        errno.ECONNREFUSED):
                return "network access is not available in the sandbox"
            if code == errno.EROFS:
                return f"writing outside the scratch folder ({name}) is not allowed"
            if code in (errno.EACCES, errno.EPERM):
                return f"access to {name or 'a resource'} is not allowed"
            if code == errno.ENOENT and name and os.path.isabs(str(name)) and not _inside_allowed(str(name)):
                return f"{name} is outside the sandbox (results, other solutions and problem data are not visible)"
        link, seen = link.__cause__ or link.__context__, seen + 1
    return None


def _inside_allowed(path: str) -> bool:
    # not /tmp: the sandbox's /tmp is private, so a host path there is exactly what it hides
    allowed = [os.environ.get("HOME", ""), os.getcwd(), config.read(config.BUILD_DIR) or ""]
    return any(a and (path == a or path.startswith(a.rstrip("/") + "/")) for a in allowed)
