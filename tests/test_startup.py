"""What a verdict's wall time is spent on: the child started ahead of its evaluation, the phases the
verdict keeps, and the events cross-check held to the profiled call's own time."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, fixture_problem, run

from rooftop.pipeline.trusted import spawn
from rooftop.solution.loader import load_solution


def test_a_child_started_ahead_is_the_one_its_evaluation_takes_and_others_are_left():
    problem = fixture_problem("scale")
    good, other = load_solution(FIXTURES / "solutions" / "good.py"), load_solution(FIXTURES / "solutions" / "hang.py")
    spawn.prestart(problem, good, "cpu", "auto")
    spawn.prestart(problem, other, "cpu", "auto")
    [ahead_good, ahead_other] = spawn._ahead
    v = run("scale", "good.py", timing=False)
    assert v.status.value == "correct"
    assert spawn._ahead == [ahead_other]  # taken: the one for this solution, not the other
    assert ahead_good.session.proc.poll() is not None  # and ended with its evaluation
    assert v.phases["child_start"] < v.phases["gate_build"] + 1e-9
    spawn._stop_unclaimed()  # what the exit handler does
    assert spawn._ahead == [] and ahead_other.session.proc.poll() is not None
    assert not ahead_other.scratch.exists()


def test_the_verdict_keeps_its_phases_and_verbose_prints_them(tmp_path):
    args = [sys.executable, "-m", "rooftop", "eval", str(FIXTURES / "problems" / "scale"),
            str(FIXTURES / "solutions" / "good.py"), "--device", "cpu", "--no-timing", "--db", str(tmp_path / "r.db")]
    verdict = json.loads(subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=300).stdout)
    phases = verdict["phases"]
    for name in ("check_problem", "trusted_setup", "child_start", "child_interpreter_and_imports", "inputs",
                 "reference", "gate_build", "gate_load", "gate_correctness"):
        assert phases[name] >= 0, name
    assert phases["child_interpreter_and_imports"] > 0  # the child's own age when it said hello
    assert verdict["inputs"] == ("made on cpu by both sides from each call's seed; bit-identical at the sampled "
                                 "positions of all 3 checked calls")
    shown = subprocess.run([*args, "-v"], capture_output=True, text=True, timeout=300).stdout
    assert "from this process's start to the evaluation" in shown
    assert "child start" in shown and "gate correctness" in shown


def test_kernels_overlapping_on_concurrent_streams_count_once():
    """cuDNN's FFT convolutions run kernels side by side on its streams: their durations add up to
    more than the call took, while the GPU was busy for less. The busy time is the union of the
    kernels' intervals; work that ran apart from the others still adds."""
    from rooftop.integrity.kernels import busy_seconds
    from rooftop.pipeline.wire import Kernel

    side_by_side = [Kernel(name="fft_a", microseconds=80, stream=1, start_us=0),
                    Kernel(name="fft_b", microseconds=80, stream=2, start_us=10),
                    Kernel(name="gemm", microseconds=20, stream=1, start_us=85)]
    assert busy_seconds(side_by_side) == pytest.approx(105e-6)  # 0..90 and 85..105: not 180 us
    assert busy_seconds([]) == 0.0
    late = [*side_by_side, Kernel(name="escaped", microseconds=50, stream=3, start_us=300)]
    assert busy_seconds(late) == pytest.approx(155e-6)


BYTECODE_SCRIPT = """
import sys
from pathlib import Path
from rooftop.bytecode import enable, for_child
print(enable(Path(sys.argv[1]), "slowpkg"))
import slowpkg
print(for_child())
"""


def test_packages_installed_without_bytecode_get_it_in_rooftops_cache_and_the_child_only_reads_it(tmp_path):
    """Where the environment keeps no bytecode, each process would compile torch again: the trusted
    process writes it under the cache, and a child is pointed at it through a read-only folder."""
    packages = tmp_path / "site"
    (packages / "slowpkg").mkdir(parents=True)
    (packages / "slowpkg" / "__init__.py").write_text("VALUE = 1\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{packages}:{Path(spawn.PACKAGE).parent}",
           "PYTHONDONTWRITEBYTECODE": "1"}
    cache = tmp_path / "cache"
    shown = subprocess.run([sys.executable, "-c", BYTECODE_SCRIPT, str(cache)], env=env, capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    folder = cache / "pycache" / sys.implementation.cache_tag
    assert shown.stdout.splitlines()[0] == str(folder)
    assert list(folder.rglob("__init__.*.pyc")), "the package's bytecode was written under the cache"
    assert not (packages / "slowpkg" / "__pycache__").exists()  # never beside the sources
    assert f"'PYTHONPYCACHEPREFIX': '{folder}'" in shown.stdout and f"PosixPath('{folder}')" in shown.stdout
    off = subprocess.run([sys.executable, "-c", BYTECODE_SCRIPT, str(tmp_path / "off")],
                         env={**env, "ROOFTOP_PYCACHE": "off"}, capture_output=True, text=True, timeout=60)
    assert off.stdout.splitlines()[0] == "None" and not (tmp_path / "off").exists()  # the switch
    # a package installed with its bytecode leaves Python's behaviour alone
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(packages)], check=True, timeout=60)
    again = subprocess.run([sys.executable, "-c", BYTECODE_SCRIPT, str(tmp_path / "other")], env=env,
                           capture_output=True, text=True, timeout=60)
    assert again.stdout.splitlines()[0] == "None" and not (tmp_path / "other").exists()


def test_the_childs_sandbox_binds_the_bytecode_folder_read_only(tmp_path, monkeypatch):
    folder = tmp_path / "pycache"
    folder.mkdir()
    monkeypatch.setattr(sys, "pycache_prefix", str(folder))
    problem = fixture_problem("scale")
    started = spawn._start(problem, load_solution(FIXTURES / "solutions" / "good.py"), "cpu", "auto", tmp_path)
    try:
        assert started.sandbox.env["PYTHONPYCACHEPREFIX"] == str(folder)
        assert started.sandbox.env["PYTHONDONTWRITEBYTECODE"] == "1"
        if started.sandbox.kind.value == "bwrap":
            args = started.sandbox.prefix
            assert ["--ro-bind", str(folder), str(folder)] in [args[i:i + 3] for i in range(len(args) - 2)]
            assert str(folder) not in [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--bind"]
    finally:
        started.session.close()


def test_inputs_made_on_the_current_gpu_count_as_made_there():
    """'cuda' names the current GPU: a tensor get_inputs made there (cuda:0) was not moved."""
    import torch

    from rooftop.problem.instance import _on

    assert _on(torch.device("cuda:0"), torch.device("cuda"))
    assert _on(torch.device("cpu"), torch.device("cpu"))
    assert not _on(torch.device("cpu"), torch.device("cuda"))
    assert not _on(torch.device("cuda:1"), torch.device("cuda:0"))


def test_the_child_imports_what_its_solutions_language_needs_before_its_hello(tmp_path, monkeypatch):
    """cpp_extension for load_inline, triton for Triton: imported while the parent starts, not
    during the build gate; a module that cannot be imported there is left to the build to report."""
    from rooftop.pipeline.job import WARM_IMPORTS
    from rooftop.solution.loader import Solution

    problem = fixture_problem("scale")
    for name, modules in (("triton_scale.py", "triton"), ("cuda_inline_ok.py", "torch.utils.cpp_extension"),
                          ("good.py", "")):
        started = spawn._start(problem, load_solution(FIXTURES / "solutions" / name), "cpu", "auto", tmp_path)
        started.session.close()
        assert started.sandbox.env[WARM_IMPORTS] == modules
    monkeypatch.setattr(Solution, "runtime_modules", property(lambda self: ["no_such_module_anywhere"]))
    assert run("scale", "good.py", timing=False).status.value == "correct"


def test_the_child_is_started_ahead_before_this_process_imports_torch():
    """Starting the child ahead must not itself import torch: the two imports run side by side
    only when the child is spawned first."""
    snippet = ("import sys\nfrom pathlib import Path\n"
               "from rooftop.problem.loader import load_problem\n"
               "from rooftop.solution.loader import load_solution\n"
               f"FIXTURES = Path({str(FIXTURES)!r})\n"
               "problem = load_problem(FIXTURES / 'problems' / 'scale')\n"
               "assert 'torch' not in sys.modules, 'loading the problem imported torch'\n"
               "from rooftop.pipeline.trusted import spawn\n"
               "spawn.prestart(problem, load_solution(FIXTURES / 'solutions' / 'triton_scale.py'), 'cpu', 'auto')\n"
               "assert 'torch' not in sys.modules, 'starting the child imported torch'\n")
    proc = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_command_switches_the_bytecode_cache_on_before_it_imports_its_own_modules(tmp_path):
    """Typer, rich, pydantic and rooftop's own modules are compiled once into the cache too, not
    again in every process: the entry point enables it before importing the CLI."""
    snippet = ("import sys\nimport rooftop.bytecode as bytecode\n"
               "bytecode.has_own_bytecode = lambda package='torch': False  # as on a machine without any\n"
               "sys.argv = ['rooftop', 'problems', '--json']\n"
               "from rooftop.cli.entry import main\nmain()\n")
    env = {**__import__("os").environ, "ROOFTOP_CACHE": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "pycache" / sys.implementation.cache_tag
    for module in ("typer/main", "pydantic/main", "rooftop/cli/main", "rooftop/vocabulary"):
        assert list(folder.rglob(f"{module}.*.pyc")), f"{module} was imported before the cache was on"
