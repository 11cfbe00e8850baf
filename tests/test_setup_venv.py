"""scripts/setup_venv.sh on a machine whose python is itself a virtual environment (a GPU machine
with a CUDA torch in one): the new environment must see that environment's packages, and set up
offline from a folder of wheels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

SCRIPT = ROOT / "scripts" / "setup_venv.sh"
# a network request fails at once instead of reaching PyPI
OFFLINE = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "PIP_RETRIES": "0",
           "PIP_TIMEOUT": "2"}


def _parent_env(path: Path, modules: dict[str, str]) -> Path:
    """A virtual environment holding the given modules (name -> source) in its site-packages
    (made from the running interpreter's base one, so it holds nothing else)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for name, source in modules.items():
        target = Path(site) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source)
    return python


def _setup(cwd: Path, **env: str) -> subprocess.CompletedProcess:
    scrubbed = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "CONDA_PREFIX")}
    return subprocess.run(["bash", str(SCRIPT)], cwd=cwd, env={**scrubbed, **OFFLINE, **env},
                          capture_output=True, text=True, timeout=300)


def _python_says(python: Path, code: str) -> str:
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Error processing line" not in proc.stderr, proc.stderr
    return proc.stdout.strip()


def test_a_virtual_environment_is_reused_with_its_packages(tmp_path):
    parent = _parent_env(tmp_path / "parent", {"rooftop_marker.py": "WHERE = 'parent'\n"})
    venv = tmp_path / "venv"
    proc = _setup(ROOT, VENV=str(venv), PYTHON=str(parent), REUSE_TORCH="1",
                  INSTALL=f'python -c "import sys; print(sys.prefix)" > {tmp_path / "installed-by"}')
    assert proc.returncode == 0, proc.stderr
    assert f"of the environment {tmp_path / 'parent'}" in proc.stdout
    # the marker of the parent is seen, after the new environment's own folder
    assert _python_says(venv / "bin" / "python", "import rooftop_marker; print(rooftop_marker.WHERE)") == "parent"
    order = _python_says(venv / "bin" / "python", "import sys; print('\\n'.join(sys.path))").splitlines()
    own = next(i for i, p in enumerate(order) if p.startswith(str(venv)) and p.endswith("site-packages"))
    theirs = next(i for i, p in enumerate(order) if p.startswith(str(tmp_path / "parent")))
    assert own < theirs
    # the install step ran inside the new environment, and the stamp was left
    assert (tmp_path / "installed-by").read_text().strip() == str(venv)
    assert (venv / ".rooftop-installed").is_file()
    # a second run is skipped by the stamp (this setting would otherwise be refused)
    again = _setup(ROOT, VENV=str(venv), PYTHON=str(parent), REUSE_TORCH="maybe")
    assert again.returncode == 0 and again.stdout == "", again.stderr


def test_a_cuda_torch_in_a_virtual_environment_is_found_and_kept(tmp_path):
    # a stand-in for a CUDA build: all the check reads is torch.version.cuda
    parent = _parent_env(tmp_path / "parent", {"torch/__init__.py": "class version:\n    cuda = '12.8'\n"})
    venv = tmp_path / "venv"
    proc = _setup(ROOT, VENV=str(venv), PYTHON=str(parent), INSTALL=":")
    assert proc.returncode == 0, proc.stderr
    code = "import torch; print(torch.version.cuda, torch.__file__)"
    cuda, path = _python_says(venv / "bin" / "python", code).split()
    assert cuda == "12.8" and path.startswith(str(tmp_path / "parent"))


def test_bad_settings_are_refused_with_one_line(tmp_path):
    proc = _setup(ROOT, VENV=str(tmp_path / "v"), REUSE_TORCH="maybe", INSTALL=":")
    assert proc.returncode == 2 and proc.stderr.strip() == "REUSE_TORCH=maybe: expected auto, 1 or 0"
    proc = _setup(ROOT, VENV=str(tmp_path / "v"), WHEELS=str(tmp_path / "none"), INSTALL=":")
    assert proc.returncode == 2 and "no such folder" in proc.stderr and not (tmp_path / "v").exists()


@pytest.mark.slow
def test_offline_install_from_a_wheel_folder(tmp_path):
    """The whole install, no network: every dependency (and setuptools, which torch 2.13 requires
    in the test environment too) comes from the reused environment, the wheel folder is empty."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copy(SCRIPT, project / "scripts" / SCRIPT.name)
    shutil.copytree(ROOT / "src" / "rooftop", project / "src" / "rooftop",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "wheels").mkdir()
    proc = _setup(project, VENV=".venv", PYTHON=sys.executable, REUSE_TORCH="1", WHEELS=str(tmp_path / "wheels"),
                  PIP_NO_CACHE_DIR="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    code = "import rooftop, torch; print(rooftop.__file__); print(torch.__file__)"
    ours, torch_file = _python_says(project / ".venv" / "bin" / "python", code).splitlines()
    assert ours == str(project / "src" / "rooftop" / "__init__.py")  # its own install, editable
    assert torch_file.startswith(sys.prefix)  # torch of the reused environment, not a new one
    version = subprocess.run([str(project / ".venv" / "bin" / "rooftop"), "--version"], capture_output=True,
                             text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("rooftop "), version.stderr
