"""Build folders keyed by the hash of the solution's source, so the same source never rebuilds."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rooftop import config


def cache_root() -> Path:
    """$ROOFTOP_CACHE, else ~/.cache/rooftop."""
    env = config.read(config.CACHE)
    return Path(env) if env else Path.home() / ".cache" / "rooftop"


def keyed_file(kind: str, *key: bytes) -> Path:
    """The cache file of one derived figure (`kind`: figures, sizes), named by a digest of what it
    was derived from."""
    return cache_root() / kind / f"{hashlib.sha256(b''.join(key)).hexdigest()[:32]}.json"


def keep(path: Path, text: str) -> None:
    """Write a cache file whole or not at all; a read-only cache only costs the next computation."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(text)
        partial.replace(path)
    except OSError:
        pass


def source_dir(source_hash: str, root: Path | None = None) -> Path:
    """Everything built from one source: the only part of the cache its evaluation may write."""
    return (root or cache_root()) / "builds" / source_hash[:20]


def build_dir(source_hash: str, platform_key: str, root: Path | None = None) -> Path:
    """One folder per (source, platform): torch version and target architecture change the binary."""
    safe = re.sub(r"[^A-Za-z0-9_.\-]+", "_", platform_key)
    path = source_dir(source_hash, root) / safe
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def exclusive_build(folder: Path) -> Iterator[None]:
    """One build at a time in `folder`, across processes, and no lock left behind by a killed one.

    torch's extension builder marks a build in progress with a `lock` file that only the builder
    removes, and every later build of the same extension waits for that file with no time limit: a
    build killed at its time limit (or by a signal) made each later evaluation of the same source
    hang until the build gate's own limit. An advisory lock on the folder, which the kernel releases
    when its holder dies, says who is building; whoever holds it knows any `lock` file under
    torch_extensions/ is stale and removes it."""
    with open(folder / ".build.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # waits for a live build of the same source, then reuses it
        try:
            for stale in (folder / "torch_extensions").glob("**/lock"):
                stale.unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
