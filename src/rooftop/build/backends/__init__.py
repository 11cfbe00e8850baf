"""Language backends: what rooftop knows of each language a solution's kernels are written in.

A backend is one module of this package that registers one `Backend` (or a few, for variants of one
builder) in `BACKENDS`; adding a language is one new module. A backend says how to recognise its
language in a solution's statically read sources, what it needs from the machine, how its code is
built before the solution is imported and compile-checked where no GPU is present, and how task
rules and prompts name it. Its name is the language's name in a `Solution` and in verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rooftop.build.inline import InlineCallSpec
from rooftop.plugins import Registry


class InlineCallScan(InlineCallSpec, Protocol):
    """One load_inline call as the static scan read it, and whether all of it could be read."""

    @property
    def resolved(self) -> bool: ...


class InlineScan(Protocol):
    """The load_inline calls of a solution's entry file (solution.loader.InlineSources)."""

    @property
    def cuda(self) -> list[str]: ...
    @property
    def resolved(self) -> bool: ...
    @property
    def calls(self) -> Sequence[InlineCallScan]: ...


@dataclass(frozen=True)
class SourceScan:
    """What a backend may look at to recognise its language: nothing is imported or run."""

    imports: frozenset[str]  # the modules the entry file imports
    files: tuple[Path, ...]  # every source file of the solution
    inline: InlineScan | None  # its load_inline calls; None when it makes none


@dataclass(frozen=True)
class BuildRequest:
    """One solution's build in the evaluation child: its files, for which GPU, into which folder."""

    files: Sequence[Path]
    inline: InlineScan
    folder: Path
    capability: tuple[int, int] | None
    device: str  # "cuda" or "cpu"
    timeout: float


@dataclass
class Checked:
    """What a compile check without a GPU concluded, said to the user, and whether it was cached."""

    notes: list[str] = field(default_factory=list)
    cached: bool = True


class Backend:
    """One language. The defaults are a language with nothing to build (Python that runs as it is)."""

    name: str = ""
    rank: int = 100  # where it comes in a solution's list of languages, and in prompts
    family: str | None = None  # the kernel-to-kernel task language it belongs to ("cuda", "triton")
    fallback: bool = False  # the language of a solution no backend recognises
    compiled: bool = False  # has a build worth a build worker's time before the GPU sees it
    needs_gpu: bool = False  # runs only on a GPU: without one it is at most compile-checked
    runtime_modules: tuple[str, ...] = ()  # what it imports when the solution loads (warmed early)
    kernel_markers: frozenset[str] = frozenset()  # the calls and decorators that make its kernels
    source_suffixes: frozenset[str] = frozenset()  # its source files beside the Python entry
    prompt_route: str | None = None  # how a prompt offers it as a way to write kernels

    def recognise(self, scan: SourceScan) -> bool:
        """Whether the solution uses this language."""
        return False

    def build(self, request: BuildRequest) -> bool | None:
        """Build what the import needs before it runs: whether that came from the cache (None: nothing
        to build). A failure raises `GateFailed(compile_error)`."""
        return None

    def check_without_gpu(self, request: BuildRequest) -> Checked:
        """Compile-check what only a GPU would run, on a machine that has nvcc and no GPU."""
        return Checked()


BACKENDS: Registry[Backend] = Registry("language backend", __name__)


def ordered(names: Iterable[str] | None = None) -> list[Backend]:
    """The backends of `names` (all when None), in rank order."""
    chosen = BACKENDS.values() if names is None else [BACKENDS[name] for name in set(names)]
    return sorted(chosen, key=lambda backend: (backend.rank, backend.name))


def recognise(scan: SourceScan | None) -> list[str]:
    """The languages of a solution, in rank order; the fallback's when none is recognised or the
    sources could not be read (`scan` None)."""
    found = [backend.name for backend in ordered() if scan is not None and backend.recognise(scan)]
    return found or [backend.name for backend in ordered() if backend.fallback]


def family_markers(family: str) -> set[str]:
    """The kernel-making calls and decorators of every language of one task family."""
    return {marker for backend in ordered() if backend.family == family for marker in backend.kernel_markers}


def family_suffixes(family: str) -> set[str]:
    """The source-file suffixes of every language of one task family."""
    return {suffix for backend in ordered() if backend.family == family for suffix in backend.source_suffixes}
