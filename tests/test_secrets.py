"""Secrets kept from what a candidate could read: a worker's environment, and the memory of a
trusted process (integrity/environ.py)."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from rooftop.integrity import environ
from rooftop.service.local import ProcessTransport
from rooftop.service.orchestrator import Slot

SYSTEM_PYTHON = "/usr/bin/python3"  # another user may not reach a venv's or pyenv's interpreter


def test_a_worker_holds_no_api_key_or_token_in_its_environment(monkeypatch):
    """A worker is spawned with its orchestrator's environment; it withdraws every variable whose
    name looks like a secret, from /proc/<pid>/environ too, before it takes a task."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-a-worker")
    monkeypatch.setenv("ROOFTOP_SESSION_TOKEN", "token-never-in-a-worker")
    transport = ProcessTransport()
    slot = Slot(name="cpu:0", role="device", device="cpu")
    transport.start(slot)
    try:
        deadline = time.monotonic() + 120
        hello = []
        while not hello and time.monotonic() < deadline:
            hello = [m for s, m, _ in transport.poll([slot], 1.0) if s is slot and m is not None]
        assert hello, "the worker never greeted"
        process, _ = slot.handle
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
        assert b"PATH=" in environ  # the block is there, and read
        assert b"sk-never-in-a-worker" not in environ and b"token-never-in-a-worker" not in environ
    finally:
        transport.stop([slot])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the two processes as another user")
def test_a_trusted_process_s_memory_and_environment_are_closed_to_its_own_user():
    """Made non-dumpable, a process of user U keeps its environment and memory from other processes
    of U (a candidate run without a sandbox), which could read them before."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no interpreter another user may run ({SYSTEM_PYTHON})")
    tmp_path = Path(tempfile.mkdtemp(prefix="rooftop-dumpable-"))  # pytest's folders are closed to other users
    try:
        _closed_to_its_own_user(tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def _closed_to_its_own_user(tmp_path: Path) -> None:
    # run as another user, who may not read this checkout: the module travels (it imports nothing of ours)
    shutil.copy(environ.__file__, tmp_path / "environ.py")
    holder = tmp_path / "holder.py"
    holder.write_text(
        "import sys, time\n"
        "from environ import undumpable\n"
        "if sys.argv[1] == 'closed':\n"
        "    assert undumpable()\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")
    os.chmod(tmp_path, 0o755)
    for path in tmp_path.iterdir():
        os.chmod(path, 0o644)

    def nobody() -> None:
        os.setgid(65534)
        os.setuid(65534)

    readable = {}
    env = {"SECRET_OF_THE_SERVER": "s3cret", "PYTHONPATH": str(tmp_path), "PATH": os.environ["PATH"]}
    for mode in ("open", "closed"):
        proc = subprocess.Popen([SYSTEM_PYTHON, "-S", str(holder), mode], preexec_fn=nobody, stdout=subprocess.PIPE,
                                text=True, cwd=tmp_path, env=env)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            reader = subprocess.run([SYSTEM_PYTHON, "-S", "-c", f"print(open('/proc/{proc.pid}/environ').read())"],
                                    preexec_fn=nobody, capture_output=True, text=True)
            readable[mode] = "s3cret" in reader.stdout
        finally:
            proc.kill()
            proc.wait()
    assert readable == {"open": True, "closed": False}
