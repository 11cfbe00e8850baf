"""A job: one (problem, solution, settings) to judge, named by what decides its verdict.

The job id is a digest of the problem (its name, version and files), the solution's source and
the evaluation settings, so submitting the same work twice names the same job: a batch run
again, or a client that retries a request, finds the job it already made instead of judging the
candidate a second time. The solution's files are kept in the store when the job is made
(`sources`), so what is judged is what was submitted even if the file changes or disappears
before a worker reaches it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel

from rooftop.build.cache import cache_root
from rooftop.errors import UserError
from rooftop.problem.spec import Problem
from rooftop.solution.loader import Solution, detect, hash_sources, load_solution
from rooftop.vocabulary import Settings

MAX_SOURCE_BYTES = 4 << 20  # a solution's files together; more is not a kernel but a payload


class JobState(StrEnum):
    """queued → building → built → running → done, or failed where no verdict could be made; a job
    with nothing to compile starts built."""

    queued = "queued"
    building = "building"
    built = "built"
    running = "running"
    done = "done"
    failed = "failed"


FINAL = (JobState.done, JobState.failed)


class Job(BaseModel):
    """One row of the `jobs` table."""

    id: str
    created_at: str
    updated_at: str
    problem: str  # the problem's name: a deck name or an absolute path, as `problem.registry.resolve` takes
    problem_version: int
    problem_hash: str
    solution: str  # what the submitter called it (a path, a name): the verdict's `solution`
    source_hash: str
    settings: Settings
    state: JobState
    attempts: int  # evaluations started on a device (more than one only after a worker or orchestrator died)
    owner: str | None
    lease_until: float | None
    device: str | None
    queued_at: float
    build_wait_s: float | None
    build_s: float | None
    build_cached: bool | None
    run_wait_s: float | None
    built_at: float | None
    evaluation_id: int | None
    status: str | None
    error: str | None


def problem_hash(problem: Problem) -> str:
    """The problem's files and its validated spec: an edit to either is a different problem."""
    digest = hashlib.sha256(problem.spec.model_dump_json().encode())
    for path in (problem.reference, problem.root / "problem.yaml", problem.sota):
        if path is not None and path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def job_id(problem: Problem, problem_digest: str, solution_hash: str, settings: Settings,
           nonce: str | None = None) -> str:
    """The job's id; `problem_digest` is `problem_hash(problem)`, computed once by the caller. A
    `nonce` makes it a job of its own: the same work judged again rather than found."""
    key: dict[str, object] = {"problem": problem.name, "version": problem.spec.version,
                              "problem_hash": problem_digest, "source": solution_hash,
                              "settings": settings.model_dump(mode="json")}
    if nonce is not None:
        key["nonce"] = nonce
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


class SourceSnapshot(BaseModel):
    """A solution's files as they were when the job was made (`sources` table)."""

    source_hash: str
    kind: str  # file: one .py file; folder: a folder with solution.py
    entry: str  # the file to load, relative to the snapshot's folder
    files: dict[str, str]  # relative path -> base64 of the bytes

    @classmethod
    def of(cls, solution: Solution) -> SourceSnapshot:
        root = solution.path if solution.path.is_dir() else solution.path.parent
        files = {str(f.relative_to(root)): f.read_bytes() for f in solution.files}
        size = sum(len(b) for b in files.values())
        if size > MAX_SOURCE_BYTES:
            raise UserError(f"{solution.path}: the solution's source files hold {size} bytes; at most "
                            f"{MAX_SOURCE_BYTES} are accepted")
        return cls(source_hash=solution.source_hash, kind="folder" if solution.path.is_dir() else "file",
                   entry=str(solution.entry.relative_to(root)),
                   files={k: base64.b64encode(v).decode() for k, v in files.items()})

    @classmethod
    def from_code(cls, code: str, name: str = "solution.py") -> SourceSnapshot:
        """A solution handed over as text (an environment's action, a JSONL line)."""
        data = code.encode()
        if len(data) > MAX_SOURCE_BYTES:
            raise UserError(f"code: {len(data)} bytes; at most {MAX_SOURCE_BYTES} are accepted")
        return cls(source_hash=hash_sources([(name, data)]), kind="file", entry=name,
                   files={name: base64.b64encode(data).decode()})

    @property
    def languages(self) -> list[str]:
        """As the loader reads them: from the entry file's text and the files' names."""
        entry = base64.b64decode(self.files[self.entry]).decode(errors="replace")
        return detect(entry, [Path(name) for name in self.files])[0]

    def materialize(self, root: Path | None = None) -> Solution:
        """The files under the cache, in a folder named by their hash (written once, then reused),
        loaded as a solution; its hash is checked against the one the job was made with."""
        folder = (root or cache_root()) / "sources" / self.source_hash[:24]
        if not (folder / ".complete").is_file():
            import os
            import shutil

            # written under a name of this process's own, then renamed whole: two workers that
            # materialize the same source at once each finish, and one of them wins the name
            partial = folder.with_name(f"{folder.name}.{os.getpid()}.part")
            shutil.rmtree(partial, ignore_errors=True)
            for relative, data in self.files.items():
                target = partial / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(base64.b64decode(data))
            (partial / ".complete").write_text("")
            try:
                partial.rename(folder)
            except OSError:  # another worker's copy got there first
                shutil.rmtree(partial, ignore_errors=True)
        solution = load_solution(folder if self.kind == "folder" else folder / self.entry)
        if solution.source_hash != self.source_hash:
            raise UserError(f"{folder}: the stored source hashes to {solution.source_hash[:12]}, not "
                            f"{self.source_hash[:12]}")
        return solution
