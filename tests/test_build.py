from conftest import FIXTURES

from rooftop.build.cache import build_dir
from rooftop.build.toolchain import arch_flag, trim_compiler_log
from rooftop.solution.loader import Language, load_solution


def test_trim_keeps_the_compilers_error_not_the_build_tool_noise():
    text = trim_compiler_log((FIXTURES / "logs/load_inline_failure.txt").read_text())
    assert text.splitlines()[0].endswith('error: identifier "row_total" is undefined')
    assert "row_total += v;" in text
    assert "nvcc -MD" not in text and "FAILED" not in text


def test_trim_caps_the_number_of_errors():
    log = "\n".join(f"k.cu({i}): error: thing {i} is undefined" for i in range(20))
    text = trim_compiler_log(log, max_errors=3, context=0)
    assert "thing 0" in text and "thing 2" in text and "thing 3" not in text and "17 more" in text


def test_arch_flag():
    assert arch_flag((9, 0)) == "-arch=sm_90a" and arch_flag((8, 0)) == "-arch=sm_80"


def test_build_dir_is_keyed_by_source_and_platform(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFTOP_CACHE", str(tmp_path))
    a, b = build_dir("ab" * 32, "torch2.13-cpu"), build_dir("ab" * 32, "torch2.13-cuda-sm90")
    assert a != b and a.is_dir() and a.parent == b.parent == tmp_path / "builds" / ("ab" * 10)


def test_solution_kinds_and_inline_sources_are_read_without_running_it():
    sol = load_solution(FIXTURES / "solutions/cuda_inline_ok.py")
    assert Language.cuda_inline in sol.languages and sol.needs_cuda
    assert "scale_kernel" in sol.inline.cuda[0] and sol.inline.resolved
    assert load_solution(FIXTURES / "solutions/triton_scale.py").languages == [Language.triton]
    folder = load_solution(FIXTURES / "solutions/cuda_ctypes_scale")
    assert Language.cuda_nvcc in folder.languages and [f.name for f in folder.cu_files] == ["scale.cu"]


def test_source_hash_changes_with_any_file(tmp_path):
    (tmp_path / "solution.py").write_text("class ModelNew: pass\n")
    (tmp_path / "k.cu").write_text("// v1\n")
    first = load_solution(tmp_path).source_hash
    assert load_solution(tmp_path).source_hash == first
    (tmp_path / "k.cu").write_text("// v2\n")
    assert load_solution(tmp_path).source_hash != first


def test_a_build_killed_mid_way_leaves_no_lock_that_stops_the_next(tmp_path):
    from torch.utils.file_baton import FileBaton

    from rooftop.build.cache import exclusive_build

    stale = tmp_path / "torch_extensions" / "ext_v1" / "lock"  # as torch leaves it when killed
    stale.parent.mkdir(parents=True)
    stale.write_text("")
    with exclusive_build(tmp_path):
        assert not stale.exists()
        assert FileBaton(str(stale)).try_acquire()  # torch's builder would now build, not wait


def test_builds_of_one_source_take_turns_across_processes(tmp_path):
    import subprocess
    import sys

    from rooftop.build.cache import exclusive_build

    # the other process holds the folder, starts a build (its torch lock file), then dies without
    # cleaning up; this process gets the folder only after it is gone, and then finds no lock
    code = (
        "import sys, time; from pathlib import Path; from rooftop.build.cache import exclusive_build\n"
        "folder = Path(sys.argv[1])\n"
        "with exclusive_build(folder):\n"
        "    ext = folder / 'torch_extensions' / 'ext'; ext.mkdir(parents=True); (ext / 'lock').write_text('')\n"
        "    print('holding', flush=True); time.sleep(1.0); (folder / 'finished').write_text('')\n"
        "    import os; os._exit(0)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with exclusive_build(tmp_path):
            assert (tmp_path / "finished").exists()
            assert not (tmp_path / "torch_extensions" / "ext" / "lock").exists()
    finally:
        holder.wait(timeout=30)
