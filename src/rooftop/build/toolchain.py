"""The compiler every CUDA backend shares: where nvcc is, its version and architecture flag, what a
build returns, and the compiler log a failed build reports.

Each language's own build lives with its backend (build/backends/); `load_inline` builds happen
inside the evaluation child when the solution module is imported, with the settings in build/jit.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rooftop import config
from rooftop.build.jit import cuda_arch_list


@dataclass
class BuildResult:
    ok: bool
    cached: bool = False
    seconds: float = 0.0
    log: str = ""
    unchecked: str = ""  # why nothing could be concluded here (this machine lacks something), if so


def nvcc_path() -> str | None:
    """nvcc from $ROOFTOP_NVCC ('none' hides it), the PATH, or /usr/local/cuda."""
    override = config.read(config.NVCC)
    if override is not None:
        return None if override.lower() in ("", "none") else override
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.exists() else None


def nvcc_version() -> str | None:
    nvcc = nvcc_path()
    if not nvcc:
        return None
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"release ([\d.]+)", out)
    return match.group(1) if match else None


def arch_flag(capability: tuple[int, int] | None) -> str:
    """`-arch=sm_XY`, with the 'a' suffix on Hopper and later so wgmma/TMA code builds."""
    return "-arch=sm_" + cuda_arch_list(capability).replace(".", "")


def trim_compiler_log(log: str, max_errors: int = 3, context: int = 2, max_chars: int = 2000) -> str:
    """The first few compiler errors with a little context, instead of pages of template noise.

    Build-tool lines (ninja's FAILED, the echoed compiler command) are dropped when the compiler's
    own `error` lines are there; every kept line is cut to a readable length.
    """
    lines = [line.rstrip()[:400] for line in log.splitlines() if line.strip()]
    errors = re.compile(r"(\berror\b\s*[:(#]|: error|fatal error|undefined reference|Error:)")
    error_at = [i for i, line in enumerate(lines) if errors.search(line) and not _is_command(line)]
    if not error_at:
        error_at = [i for i, line in enumerate(lines) if "FAILED" in line or "error" in line.lower()]
    if not error_at:
        text = "\n".join(lines[-15:])
    else:
        keep: list[int] = []
        for i in error_at[:max_errors]:
            keep.extend(j for j in range(i, min(i + context + 1, len(lines))) if not _is_command(lines[j]))
        text = "\n".join(lines[i] for i in sorted(set(keep)))
        if len(error_at) > max_errors:
            text += f"\n... ({len(error_at) - max_errors} more error line(s))"
    return text if len(text) <= max_chars else text[:max_chars] + " ..."


def _is_command(line: str) -> bool:
    """An echoed compiler invocation, as ninja prints it before the output."""
    first = line.strip().split(" ", 1)[0]
    return first.endswith(("nvcc", "c++", "g++", "gcc", "clang++")) or line.startswith("FAILED:") \
        or (len(line) > 300 and " -I" in line)
