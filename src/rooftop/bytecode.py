"""Compiled bytecode for an interpreter whose packages were installed without it.

An environment that keeps no bytecode (packages installed without compiling them, as uv does by
default, and PYTHONDONTWRITEBYTECODE set or a read-only site-packages, as container images often
have) compiles torch's thousand-odd source files again in every process: about 4 s of each
verdict's start-up on an H200 host, in the trusted process and again in the child. There rooftop
keeps that bytecode in its own cache instead (never beside the sources, which is what the variable
protects). Only trusted processes write it: the child reads it through a read-only bind, so a
candidate cannot plant bytecode that a later evaluation would run. ROOFTOP_PYCACHE=off keeps
Python's own behaviour.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from rooftop import config

PROBE_PACKAGE = "torch"  # the package whose import a verdict waits for


def has_own_bytecode(package: str = PROBE_PACKAGE) -> bool:
    """Whether the package's __init__ has a compiled file beside its source (True when the package
    is missing or is not a source package: there is nothing to compile)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True
    head, tail = os.path.split(spec.origin)
    tag = sys.implementation.cache_tag
    return os.path.exists(os.path.join(head, "__pycache__", f"{tail[:-3]}.{tag}.pyc"))


def enable(cache: Path, package: str = PROBE_PACKAGE) -> Path | None:
    """In a trusted process, before it imports torch: read and write bytecode under `cache` when
    the interpreter has none of its own. Returns the folder in use (a prefix the user set is kept)."""
    if sys.pycache_prefix:
        return Path(sys.pycache_prefix)
    if (config.read(config.PYCACHE) or "").lower() in ("0", "off", "no", "false") or has_own_bytecode(package):
        return None
    folder = cache / "pycache" / sys.implementation.cache_tag
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    sys.pycache_prefix = str(folder)
    sys.dont_write_bytecode = False  # it now goes to rooftop's cache, not beside the sources
    return folder


def for_child() -> tuple[dict[str, str], list[Path]]:
    """The child's share of it: the environment that points its interpreter there and the folder
    to bind read-only (nothing when this process keeps no such folder)."""
    prefix = sys.pycache_prefix
    if not prefix or not Path(prefix).is_dir():
        return {}, []
    return {"PYTHONPYCACHEPREFIX": prefix}, [Path(prefix)]
