"""The tools rooftop's own agent (agents/llm.py) gives its model: run a candidate through the
workspace's ./bench, read a file of the workspace, and the parsing of a tool call's arguments."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

from rooftop.agents.processes import kill_group

OUTPUT_LIMIT = 16 * 1024  # characters of ./bench output handed back to the model
READ_LIMIT = 64 * 1024  # bytes of a file read_file returns



def truncate(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """Head and tail: the summary lines of a report sit at its start, the errors at its end."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def run_kernel(workspace: Path, code: str, *, timeout: float, hide_env: tuple[str, ...] = ()) -> str:
    try:
        (workspace / "solution.py").write_text(code, encoding="utf-8")
    except OSError as exc:
        return f"error: could not write solution.py: {exc.strerror or exc}"
    bench = workspace / "bench"
    if not os.access(bench, os.X_OK):
        return "error: ./bench is missing or not executable in the workspace"
    env = {k: v for k, v in os.environ.items() if k not in hide_env}
    proc = subprocess.Popen(["./bench"], cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            out, _ = proc.communicate(timeout=timeout)
            footer = f"[./bench exit status: {proc.returncode}]"
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                out = b""
            footer = f"[./bench timed out after {timeout:g} s and was stopped]"
    finally:
        if proc.poll() is None:
            kill_group(proc.pid)
    text = truncate(out.decode("utf-8", errors="replace"))
    return f"{text.rstrip()}\n{footer}" if text.strip() else footer


def read_file(workspace: Path, path: str) -> str:
    if not path:
        return "error: read_file needs a non-empty relative path"
    pure = PurePosixPath(path)
    if pure.is_absolute() or Path(path).is_absolute():
        return f"error: {path}: absolute paths are refused; give a path relative to the workspace"
    if ".." in pure.parts:
        return f"error: {path}: '..' is refused; only files inside the workspace can be read"
    root = workspace.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        return f"error: {path}: resolves outside the workspace"
    if target.is_dir():
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
        return f"{path} is a directory; entries: {', '.join(entries) or '(none)'}"
    if not target.is_file():
        return f"error: {path}: no such file in the workspace"
    try:
        size = target.stat().st_size
        with target.open("rb") as f:
            data = f.read(READ_LIMIT)
    except OSError as exc:
        return f"error: {path}: {exc.strerror or exc}"
    text = data.decode("utf-8", errors="replace")
    if size > READ_LIMIT:
        text += f"\n[... truncated: the file is {size} bytes, this is its first {READ_LIMIT}]"
    return text


def parse_arguments(raw: str | None) -> dict[str, Any] | str:
    """A call's arguments as a dict, or the error text the model gets back instead."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"error: the arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object"
    if not isinstance(value, dict):
        return "error: the arguments must be a JSON object"
    return value
