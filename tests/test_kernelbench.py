"""KernelBench as input: importing a checkout or a parquet file as decks, estimated roofline
figures, `rooftop selfcheck` and `rooftop batch-kb`, on small KernelBench-format files the tests
write themselves."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rooftop.batch.kernelbench import compiled
from rooftop.batch.selfcheck import judge
from rooftop.errors import UserError
from rooftop.measure.measurement import TimingStats, ratio_interval
from rooftop.problem.figures import CountFailed, estimate, ridge_point
from rooftop.problem.formats.kernelbench import import_kernelbench, read_sources
from rooftop.problem.registry import bundled_names, deck_names, resolve, resolve_many
from rooftop.verdict import Gate, ShapeResult, Status, Summary, Verdict

RELU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a ReLU activation.
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 16
dim = 1024

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
'''

MATMUL = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Single square matrix multiplication (C = A * B)."""
    def forward(self, A, B):
        return torch.matmul(A, B)

N = 512

def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]

def get_init_inputs():
    return []
'''

LINEAR_GELU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x))

batch_size = 8
in_features = 32
out_features = 16

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
'''

RELU_NEW = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
    "        return x.clamp_min({floor})\n"

NO_FUNCTIONS = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"


def checkout(root: Path, files: dict[str, str]) -> Path:
    """A KernelBench checkout: {'level1/19_ReLU.py': code, ...} under root/KernelBench."""
    for name, code in files.items():
        path = root / "KernelBench" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    return root


@pytest.fixture
def kb(tmp_path):
    return checkout(tmp_path / "kb", {"level1/19_ReLU.py": RELU, "level1/1_Square_matrix_multiplication_.py": MATMUL,
                                      "level2/3_Linear_GELU.py": LINEAR_GELU})


@pytest.fixture
def decks(tmp_path, monkeypatch):
    root = tmp_path / "decks"
    monkeypatch.setenv("ROOFTOP_DECKS", str(root))
    return root


def rooftop(*args, decks: Path | None = None, timeout=300):
    env = {**os.environ, "COLUMNS": "200"}
    if decks is not None:
        env["ROOFTOP_DECKS"] = str(decks)
    return subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True,
                          check=False, env=env, timeout=timeout)


def one_line_error(proc, needle: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr, proc.stderr


# -- import ---------------------------------------------------------------------------------------
def test_import_writes_one_problem_folder_per_file(kb, decks):
    report = import_kernelbench(kb, decks)
    assert [i.name for i in report.imported] == ["kernelbench/level1/1_Square_matrix_multiplication_",
                                                 "kernelbench/level1/19_ReLU", "kernelbench/level2/3_Linear_GELU"]
    assert not report.skipped and {i.change for i in report.imported} == {"added"}
    folder = decks / "kernelbench/level1/19_ReLU"
    assert (folder / "reference.py").read_text() == RELU
    spec = yaml.safe_load((folder / "problem.yaml").read_text())
    assert spec["kernelbench"] is True and spec["dtype"] == "float32" and spec["figures"] == "estimated"
    assert spec["shapes"] == [{"name": "default", "params": {"batch_size": 16, "dim": 1024}}]
    assert spec["description"] == "Simple model that performs a ReLU activation."


def test_an_imported_deck_is_a_target_of_the_deck_commands(kb, decks):
    """`rooftop baselines kernelbench/level1` times the deck, not one problem of that name."""
    from rooftop.cli.measure import _targets

    import_kernelbench(kb, decks)
    assert [p.name for p in _targets("kernelbench/level1")] == [
        "kernelbench/level1/1_Square_matrix_multiplication_", "kernelbench/level1/19_ReLU"]
    assert [p.name for p in _targets("kernelbench/level1/19_ReLU")] == ["kernelbench/level1/19_ReLU"]


def test_reimport_is_idempotent_and_a_changed_reference_bumps_the_version(kb, decks):
    import_kernelbench(kb, decks)
    spec_file = decks / "kernelbench/level1/19_ReLU/problem.yaml"
    first = spec_file.read_text()
    again = import_kernelbench(kb, decks)
    assert {i.change for i in again.imported} == {"unchanged"} and spec_file.read_text() == first
    (kb / "KernelBench/level1/19_ReLU.py").write_text(RELU.replace("dim = 1024", "dim = 2048"))
    changed = {i.name: i.change for i in import_kernelbench(kb, decks).imported}
    assert changed["kernelbench/level1/19_ReLU"] == "updated"
    assert changed["kernelbench/level2/3_Linear_GELU"] == "unchanged"
    spec = yaml.safe_load(spec_file.read_text())
    assert spec["version"] == 2 and spec["shapes"][0]["params"]["dim"] == 2048
    assert import_kernelbench(kb, decks).imported[1].change == "unchanged"
    assert yaml.safe_load(spec_file.read_text())["version"] == 2


def test_one_level_folder_imports_that_level(kb, decks):
    report = import_kernelbench(kb / "KernelBench/level2", decks)
    assert [i.name for i in report.imported] == ["kernelbench/level2/3_Linear_GELU"]


def test_bad_files_are_skipped_with_a_reason(tmp_path, decks):
    kb = checkout(tmp_path / "kb", {"level1/19_ReLU.py": RELU, "level1/4_Broken.py": NO_FUNCTIONS,
                                    "level1/5_Syntax.py": "def f(:\n", "level1/helpers.py": RELU,
                                    "level1/19_ReLU_copy.py": RELU})
    report = import_kernelbench(kb, decks)
    assert [i.name for i in report.imported] == ["kernelbench/level1/19_ReLU"]
    reasons = {Path(s.origin).name: s.reason for s in report.skipped}
    assert reasons["4_Broken.py"] == "defines no get_inputs, get_init_inputs at module level"
    assert "syntax error" in reasons["5_Syntax.py"]
    assert "problem id" in reasons["helpers.py"]
    assert reasons["19_ReLU_copy.py"].startswith("level 1 problem 19 is already") and "19_ReLU.py" in \
        reasons["19_ReLU_copy.py"]
    assert not (decks / "kernelbench/level1/4_Broken").exists()


def test_a_folder_without_levels_is_a_one_line_error(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = rooftop("import", "kernelbench", str(tmp_path / "empty"), "--into", str(tmp_path / "decks"))
    one_line_error(proc, "no KernelBench level folders")
    with pytest.raises(UserError, match="no such file or folder"):
        read_sources(tmp_path / "missing")
    (tmp_path / "kb/KernelBench/level1").mkdir(parents=True)
    with pytest.raises(UserError, match="hold no problem files"):
        read_sources(tmp_path / "kb")


def test_cli_import_reports_and_json(kb, tmp_path):
    into = tmp_path / "elsewhere"
    proc = rooftop("import", "kernelbench", str(kb), "--into", str(into))
    assert proc.returncode == 0, proc.stderr
    assert "kernelbench/level1" in proc.stdout and f"ROOFTOP_DECKS={into}" in proc.stdout
    proc = rooftop("import", "kernelbench", str(kb), "--into", str(into), "--json")
    report = json.loads(proc.stdout)
    assert [i["change"] for i in report["imported"]] == ["unchanged"] * 3 and report["skipped"] == []


# -- parquet --------------------------------------------------------------------------------------
def write_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_parquet_imports_like_a_checkout(kb, tmp_path):
    parquet = write_parquet(tmp_path / "level_1.parquet", [
        {"code": RELU, "level": 1, "name": "19_ReLU.py", "problem_id": 19},
        {"code": MATMUL, "level": 1, "name": "1_Square_matrix_multiplication_.py", "problem_id": 1},
        {"code": LINEAR_GELU, "level": 2, "name": "Linear_GELU", "problem_id": 3},  # a name without its id
    ])
    from_files = import_kernelbench(kb, tmp_path / "a")
    from_parquet = import_kernelbench(parquet, tmp_path / "b")
    assert [i.name for i in from_parquet.imported] == [i.name for i in from_files.imported]
    for item in from_files.imported:
        twin = tmp_path / "b" / item.name
        assert (twin / "problem.yaml").read_text() == (item.folder / "problem.yaml").read_text()


def test_bad_parquet_files_are_one_line_errors(tmp_path):
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"this is not parquet")
    one_line_error(rooftop("import", "kernelbench", str(garbage), "--into", str(tmp_path / "d")),
                   "not a readable parquet file")
    columns = write_parquet(tmp_path / "columns.parquet", [{"code": RELU, "level": 1}])
    one_line_error(rooftop("import", "kernelbench", str(columns), "--into", str(tmp_path / "d")),
                   "no column(s) name, problem_id")


def test_parquet_without_pyarrow_says_how_to_install_it(tmp_path, monkeypatch):
    parquet = write_parquet(tmp_path / "x.parquet", [{"code": RELU, "level": 1, "name": "19_ReLU.py",
                                                     "problem_id": 19}])
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import fails as if not installed
    with pytest.raises(UserError, match=r"needs pyarrow: pip install 'rooftop\[parquet\]'"):
        read_sources(parquet)


# -- estimated figures ----------------------------------------------------------------------------
def reference(tmp_path: Path, code: str, name: str = "ref.py") -> Path:
    path = tmp_path / name
    path.write_text(code)
    return path


def test_figures_of_a_matmul_are_its_flops_and_its_three_matrices(tmp_path):
    figures = estimate(reference(tmp_path, MATMUL))
    assert figures.flops == 2 * 512**3 and figures.bytes == 3 * 512 * 512 * 4


def test_a_time_below_an_estimated_floor_is_a_warning_not_a_rejection(tmp_path):
    """Counted flops are a direct algorithm's (cuDNN's FFT convolutions do fewer): a time under the
    floor of estimated figures is flagged, while under a problem's own formulas it is rejected."""
    from rooftop.pipeline.trusted.outcomes import assemble
    from rooftop.pipeline.trusted.scoring import score
    from rooftop.problem.loader import load_problem
    from rooftop.verdict import Environment, Gate

    problem = load_problem(reference(tmp_path, MATMUL, "1_matmul.py"))
    assert problem.spec.figures == "estimated"
    shape = problem.spec.shapes[0]
    h100 = Environment(device="cuda", device_name="NVIDIA H100 80GB HBM3", mode="gpu", python="3", torch="2",
                       platform="linux", hostname="h", rooftop="0")

    def verdict() -> Verdict:
        stats = TimingStats(clock="cuda_event", samples=[1e-9] * 20, stopped_by="precision")  # beyond any GPU
        return Verdict(problem=problem.name, problem_version=1, solution="s", source_hash="0", reward=0.0,
                       status=Status.correct, environment=h100,
                       shapes=[ShapeResult(shape=shape.name, split="visible", params={}, candidate=stats,
                                           reference=stats)])

    estimated = verdict()
    scored, impossible = score(estimated, problem, timed=True)
    assemble(estimated, Gate.score, [scored], 0.0)
    assert impossible == [] and estimated.shapes[0].flags == ["roofline"]
    assert any("not taken as proof" in w for w in estimated.warnings)
    exact = problem.model_copy(update={"spec": problem.spec.model_copy(update={"figures": "exact"})})
    _, impossible = score(verdict(), exact, timed=True)
    assert impossible and "work ran outside the timed call" in impossible[0]


def test_figures_count_parameters_and_leave_elementwise_work_out(tmp_path):
    figures = estimate(reference(tmp_path, LINEAR_GELU))
    assert figures.flops == 2 * 8 * 32 * 16  # the GELU counts nothing
    assert figures.bytes == 4 * (8 * 32 + 8 * 16 + 32 * 16 + 16)  # input, output, weight, bias


def test_an_output_aliasing_an_input_counts_once(tmp_path):
    code = RELU.replace("return torch.relu(x)", "return x.view(-1)")
    assert estimate(reference(tmp_path, code)).bytes == 16 * 1024 * 4


def test_regime_follows_the_ridge_point(kb, decks):
    import_kernelbench(kb, decks)
    assert 15 < ridge_point() < 25  # H100 SXM fp32: 67 TFLOP/s over 3.35 TB/s
    regimes = {n: resolve(n).spec.regime for n in bundled_names("kernelbench")}
    assert regimes == {"kernelbench/level1/1_Square_matrix_multiplication_": "compute",  # 85 FLOP/byte
                       "kernelbench/level1/19_ReLU": "memory", "kernelbench/level2/3_Linear_GELU": "memory"}
    relu = resolve("kernelbench/level1/19_ReLU").spec
    assert relu.flops is None and relu.bytes == str(2 * 16 * 1024 * 4)  # nothing counted is no compute roof
    matmul = resolve("kernelbench/level1/1_Square_matrix_multiplication_").spec
    assert matmul.flops_for(matmul.shapes[0]) == 2 * 512**3 and matmul.figures == "estimated"


def test_huge_problems_count_without_allocating(tmp_path):
    code = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, kernel_size):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size)

    def forward(self, x):
        return self.pool(x)

def get_inputs():
    return [torch.rand(16, 64, 2048, 2048)]  # 16 GiB

def get_init_inputs():
    return [11]
'''
    started = time.perf_counter()
    figures = estimate(reference(tmp_path, code))
    assert time.perf_counter() - started < 10
    assert figures.bytes == 4 * 16 * 64 * (2048 * 2048 + 186 * 186)


def test_a_file_that_cannot_count_is_imported_without_figures(tmp_path, decks):
    code = RELU.replace("return torch.relu(x)", "return x * float(x.sum().item())")
    kb = checkout(tmp_path / "kb", {"level1/7_Item.py": code})
    with pytest.raises(CountFailed, match="item"):
        estimate(kb / "KernelBench/level1/7_Item.py")
    [item] = import_kernelbench(kb, decks).imported
    assert item.flops is None and item.bytes is None and "meta" in item.note("figures")
    spec = resolve("kernelbench/level1/7_Item").spec
    assert spec.figures == "exact" and spec.flops is None and spec.bytes is None
    assert "roofline figures not estimated" in spec.description


def test_a_single_kernelbench_file_gets_estimated_figures(tmp_path):
    from rooftop.problem.loader import load_problem

    spec = load_problem(reference(tmp_path, RELU, "relu.py")).spec
    assert spec.kernelbench and spec.figures == "estimated" and spec.regime == "memory"
    assert resolve("examples/softmax").spec.figures == "exact"


# -- the registry ---------------------------------------------------------------------------------
def test_imported_decks_are_listed_and_resolved_beside_the_bundled_ones(kb, decks):
    import_kernelbench(kb, decks)
    names = bundled_names()
    assert "examples/softmax" in names and "kernelbench/level1/19_ReLU" in names
    assert names.index("examples/softmax") < names.index("kernelbench/level1/19_ReLU")
    assert bundled_names("kernelbench/level1") == ["kernelbench/level1/1_Square_matrix_multiplication_",
                                                   "kernelbench/level1/19_ReLU"]
    assert len(bundled_names("kernelbench")) == 3 and bundled_names("kernelbench/level1/19_ReLU") == []
    assert {"examples", "kernelbench/level1", "kernelbench/level2"} <= set(deck_names())
    problem = resolve("kernelbench/level1/19_ReLU")
    assert problem.name == "kernelbench/level1/19_ReLU" and problem.spec.kernelbench
    assert resolve(str(decks / "kernelbench/level1/19_ReLU")).name == "kernelbench/level1/19_ReLU"
    assert [p.name for p in resolve_many("kernelbench/level2")] == ["kernelbench/level2/3_Linear_GELU"]
    assert [p.name for p in resolve_many(str(decks / "kernelbench"))][-1] == "kernelbench/level2/3_Linear_GELU"
    with pytest.raises(UserError, match="did you mean 'kernelbench/level1/19_ReLU'"):
        resolve("kernelbench/level1/19_Relu")
    with pytest.raises(UserError, match="not a problem of a deck"):
        resolve("kernelbench/../examples/softmax")


def test_problems_command_lists_them_and_eval_takes_their_name(kb, tmp_path):
    decks = tmp_path / "decks"
    assert rooftop("import", "kernelbench", str(kb), decks=decks).returncode == 0
    listing = json.loads(rooftop("problems", "--json", decks=decks).stdout)
    kernelbench = {p["name"]: p for p in listing if p["name"].startswith("kernelbench/")}
    assert kernelbench["kernelbench/level1/19_ReLU"]["regime"] == "memory"
    solution = tmp_path / "relu_new.py"
    solution.write_text(RELU_NEW.format(floor=0))
    proc = rooftop("eval", "kernelbench/level1/19_ReLU", str(solution), "--device", "cpu", "--no-timing", "--json",
                   "--db", str(tmp_path / "r.db"), decks=decks)
    verdict = json.loads(proc.stdout)
    assert verdict["status"] == "correct" and verdict["problem"] == "kernelbench/level1/19_ReLU"
    assert verdict["figures"] == "estimated" and verdict["shapes"][0]["bytes"] == 2 * 16 * 1024 * 4


def test_the_verdict_table_marks_estimated_figures():
    from rich.console import Console

    from rooftop.cli.render import print_verdict

    def text(figures: str) -> str:
        shape = ShapeResult(shape="default", split="visible", params={}, correct=True, bytes=1e6, gbps=10.0,
                            candidate=TimingStats(clock="cuda_event", samples=[1e-4, 1e-4]),
                            reference=TimingStats(clock="cuda_event", samples=[1e-4, 1e-4]),
                            roofline_fraction=0.5, speedup=1.0)
        verdict = Verdict(status=Status.correct, reward=0.0, problem="p", problem_version=1, solution="s.py",
                          source_hash="h", shapes=[shape], figures=figures,
                          summary=Summary(geomean_speedup=1.0, geomean_roofline=0.5))
        console = Console(width=250, record=True)
        print_verdict(verdict, console)
        return console.export_text()

    estimated, exact = text("estimated"), text("exact")
    assert "roof (est.)" in estimated and "geomean roofline 50.0% (est.)" in estimated
    assert "flops and bytes estimated" in estimated
    assert "(est.)" not in exact


# -- selfcheck ------------------------------------------------------------------------------------
def made_verdict(status=Status.correct, shapes=()):
    return Verdict(status=status, reward=None, problem="p", problem_version=1, solution="s.py", source_hash="h",
                   shapes=list(shapes), messages=[] if status is Status.correct else ["it went wrong"])


def timed(low, high, flags=()):
    stats = TimingStats(clock="cuda_event", samples=[1e-3])
    return ShapeResult(shape="default", split="visible", params={}, correct=True, candidate=stats, reference=stats,
                       speedup=None if low is None else (low + high) / 2, speedup_low=low, speedup_high=high,
                       flags=list(flags))


def test_judge_checks_the_interval_on_a_gpu():
    inside = judge("p", made_verdict(shapes=[timed(0.97, 1.02)]), "cuda")
    assert inside.passed and inside.interval_checked and inside.reason == ""
    outside = judge("p", made_verdict(shapes=[timed(1.05, 1.10)]), "cuda")
    assert not outside.passed and "[1.050, 1.100] excludes 1.0" in outside.reason
    assert judge("p", made_verdict(shapes=[timed(1.05, 1.10)]), "cuda", tolerance=0.05).passed
    loose = judge("p", made_verdict(shapes=[timed(1.05, 1.10)]), "cuda", tolerance=0.04)
    assert not loose.passed and "excludes 1.0 ± 0.04" in loose.reason
    none = judge("p", made_verdict(shapes=[timed(None, None)]), "cuda")
    assert none.passed and not none.interval_checked and "no speedup interval" in none.reason
    wrong = judge("p", made_verdict(Status.incorrect), "cuda")
    assert not wrong.passed and wrong.reason == "it went wrong"
    cpu = judge("p", made_verdict(shapes=[timed(1.2, 1.3)]), "cpu")
    assert cpu.passed and not cpu.interval_checked and "CPU" in cpu.reason


def test_judge_takes_no_interval_from_too_few_samples_or_a_shared_machine():
    """88_MinGPTNewGelu: one sample before the wall-time cap, once shown as `1.266x [1.266, 1.266]`
    and judged as if it were a 95 % interval."""
    one = TimingStats(clock="cuda_event", samples=[1e-3], stopped_by="max_wall_seconds")
    low, high = ratio_interval(one.samples, [0.79e-3])[1:]
    capped = ShapeResult(shape="default", split="visible", params={}, correct=True, candidate=one, reference=one,
                         speedup=1.266, speedup_low=low, speedup_high=high)
    assert capped.no_interval == "no 95 % interval: 1 sample, at least 6 needed (sampling stopped by max_wall_seconds)"
    assert capped.model_dump()["no_interval"] == capped.no_interval
    row = judge("p", made_verdict(shapes=[capped]), "cuda")
    assert row.passed and not row.interval_checked and [(s.low, s.high) for s in row.shapes] == [(None, None)]
    assert "no speedup interval was measured" in row.reason and "1 sample, at least 6 needed" in row.reason
    assert "1 sample" in judge("p", made_verdict(shapes=[capped]), "cpu").reason
    # an interval taken on a shared machine is not judged either, and the row says the reward ignores it
    shared = judge("p", made_verdict(shapes=[timed(1.2, 1.3, ["contention"])]), "cuda")
    assert shared.passed and not shared.interval_checked
    assert "not measured: machine shared; ignored by the reward" in shared.reason
    assert timed(0.9, 1.1).no_interval is None


def test_selfcheck_passes_sound_references_and_fails_the_others(kb, tmp_path):
    decks = tmp_path / "decks"
    # a reference whose answer depends on the process that runs it cannot judge anything
    flaky = RELU.replace("return torch.relu(x)", "return x + float(id(object()) % 1000003)")
    checkout(kb, {"level3/5_Flaky.py": flaky})
    assert rooftop("import", "kernelbench", str(kb), decks=decks).returncode == 0
    proc = rooftop("selfcheck", "kernelbench/level1", "--device", "cpu", "--json", decks=decks)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["problem"] for r in rows] == ["kernelbench/level1/1_Square_matrix_multiplication_",
                                            "kernelbench/level1/19_ReLU"]
    for row in rows:
        assert row["status"] == "correct" and row["passed"] and not row["interval_checked"]
        assert "on a CPU the speedup interval is not checked" in row["reason"]
        assert row["shapes"][0]["shape"] == "smoke"  # derived on import: a CPU checks that, not the full size
    proc = rooftop("selfcheck", "kernelbench/level3/5_Flaky", "--device", "cpu", decks=decks)
    assert proc.returncode == 1
    assert "kernelbench/level3/5_Flaky" in proc.stdout and "incorrect" in proc.stdout and "fail" in proc.stdout


def test_selfcheck_of_an_unknown_deck_is_a_one_line_error(tmp_path):
    one_line_error(rooftop("selfcheck", "no_such_deck", decks=tmp_path / "decks"), "no_such_deck")


# -- batch-kb -------------------------------------------------------------------------------------
def test_compiled_means_no_compile_error_and_no_build_timeout():
    def verdict(status, gate):
        return Verdict(status=status, reward=None, problem="p", problem_version=1, solution="s", source_hash="h",
                       failed_gate=gate)

    assert not compiled(verdict(Status.compile_error, Gate.static))
    assert not compiled(verdict(Status.compile_error, Gate.build))
    assert not compiled(verdict(Status.timeout, Gate.build))
    for status, gate in [(Status.timeout, Gate.correctness), (Status.rejected, Gate.static),
                         (Status.init_error, Gate.load), (Status.needs_gpu, Gate.build),
                         (Status.incorrect, Gate.correctness), (Status.correct, None)]:
        assert compiled(verdict(status, gate)), status


def test_batch_kb_scores_a_run_of_generations(kb, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "level_1_problem_19_sample_0_kernel.py").write_text(RELU_NEW.format(floor=0))
    (run / "level_1_problem_19_sample_1_kernel.py").write_text(RELU_NEW.format(floor=0.5))  # wrong
    (run / "level_2_problem_3_sample_0_kernel.py").write_text("import torch\nraise RuntimeError('no build')\n")
    (run / "level_1_problem_77_sample_0_kernel.py").write_text("import torch\n")
    (run / "eval_results.json").write_text("{}")  # not a generation: ignored
    proc = rooftop("batch-kb", str(run), "--kernelbench", str(kb), "--device", "cpu", "--json",
                   "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    samples = {s["file"]: s for s in report["samples"]}
    assert len(samples) == 4 and report["n"] == 4
    good, wrong = samples["level_1_problem_19_sample_0_kernel.py"], samples["level_1_problem_19_sample_1_kernel.py"]
    broken, unknown = samples["level_2_problem_3_sample_0_kernel.py"], samples["level_1_problem_77_sample_0_kernel.py"]
    assert good["status"] == "correct" and good["compiled"] and good["correct"]
    assert good["problem"] == "kernelbench/level1/19_ReLU"
    assert wrong["status"] == "incorrect" and wrong["compiled"] and not wrong["correct"]
    assert broken["status"] == "compile_error" and not broken["compiled"] and "no build" in broken["reason"]
    assert unknown["status"] == "unknown_problem" and not unknown["compiled"]
    assert "no problem 77 in level 1" in unknown["reason"]
    assert report["compile_rate"] == 0.5 and report["correctness_rate"] == 0.25 and report["fast_0"] == 0.25
    for p in ("0.5", "0.8", "1", "1.5", "2"):
        expected = 0.25 if good["speedup"] is not None and good["speedup"] > float(p) else 0.0
        assert report[f"fast_{p}"] == expected
    assert report["geomean_speedup"] == good["speedup"]
    assert report["pass_at_k"] == {"1": pytest.approx((0.5 + 0 + 0) / 3)}  # problems 19 (1 of 2), 3, 77


def test_batch_kb_starts_each_next_generations_child_ahead_on_a_gpu(kb, tmp_path, monkeypatch):
    """On a GPU the next generation's child comes up while the current one is judged (here the
    device is taken for a GPU and the start only recorded; the evaluations run on the CPU)."""
    from rooftop.batch import kernelbench as batch
    from rooftop.vocabulary import Settings

    run = tmp_path / "run"
    run.mkdir()
    for sample in range(3):
        (run / f"level_1_problem_19_sample_{sample}_kernel.py").write_text(RELU_NEW.format(floor=0))
    started = []
    monkeypatch.setattr(batch, "resolve_device", lambda device: "cuda")
    monkeypatch.setattr(batch, "prestart", lambda problem, solution, *_: started.append(solution.path.name))
    report = batch.run_batch(run, kb, Settings(device="cpu", timing=False))
    assert report["n"] == 3 and report["correctness_rate"] == 1.0
    assert started == ["level_1_problem_19_sample_1_kernel.py", "level_1_problem_19_sample_2_kernel.py"]


def test_batch_kb_needs_generations(tmp_path, kb):
    (tmp_path / "run").mkdir()
    one_line_error(rooftop("batch-kb", str(tmp_path / "run"), "--kernelbench", str(kb)), "no generation files")


@pytest.mark.parametrize("command", [["import", "kernelbench"], ["selfcheck"], ["batch-kb"]])
def test_help(command):
    proc = rooftop(*command, "-h")
    assert proc.returncode == 0 and "-h, --help" in proc.stdout and "<bool>" not in proc.stdout


def test_the_references_own_imports_are_allowed_to_solutions(tmp_path, decks):
    """KernelBench's level-3 Mamba2 references import einops: without it on the problem's allow-list
    their own self-check was rejected by the static gate before anything ran."""
    from rooftop.batch.selfcheck import relaxed, self_solution
    from rooftop.integrity.policy import check_source

    code = RELU.replace("import torch\n", "import torch\nfrom einops import rearrange\nimport math\n", 1)
    assert code != RELU
    kb = checkout(tmp_path / "kb", {"level3/49_Mamba.py": code, "level1/1_Relu.py": RELU})
    import_kernelbench(kb, decks)
    problem = resolve("kernelbench/level3/49_Mamba")
    assert problem.spec.policy.extra_imports == ["einops"]
    assert resolve("kernelbench/level1/1_Relu").spec.policy.extra_imports == []
    assert "extra_imports" in (decks / "kernelbench/level3/49_Mamba/problem.yaml").read_text()
    solution = self_solution(problem, tmp_path / "self")
    assert check_source(solution.read_text(), relaxed(problem).spec.policy) == []
    refused = check_source(solution.read_text(), relaxed(problem).spec.policy.model_copy(update={"extra_imports": []}))
    assert any("einops" in str(r) for r in refused)


def test_an_imported_file_gets_a_cpu_smoke_shape_derived_from_its_constants(tmp_path):
    """19_ReLU's real sizes are 6.4 GB of input: the import halves its size constants until the
    counted bytes fit 1 MiB, checks the reference runs there on the CPU, and marks the shape as
    derived with its own counts. A file whose reference breaks at a smaller size gets none, and
    its description says why."""
    from rooftop.problem.formats.kernelbench import SourceFile, write_problem
    from rooftop.problem.loader import load_problem

    big = RELU.replace("batch_size = 16", "batch_size = 4096").replace("dim = 1024", "dim = 393216")
    imported = write_problem(SourceFile(level=1, problem_id=19, stem="19_ReLU", code=big, origin="x"),
                             tmp_path / "relu")
    spec = load_problem(tmp_path / "relu").spec
    [smoke] = spec.smoke
    assert spec.shapes[0].params == {"batch_size": 4096, "dim": 393216} and int(imported.bytes or 0) > 6e9
    assert smoke.params["batch_size"] < 4096 and smoke.params["dim"] < 393216
    assert smoke.params["dim"] * 393216 // smoke.params["dim"] == 393216  # halved: the ratios kept
    assert "derived by rooftop" in smoke.note and "halved" in smoke.note
    assert spec.bytes_for(smoke) is not None and spec.bytes_for(smoke) <= 1 << 20
    assert spec.bytes_for(spec.shapes[0]) == int(imported.bytes or 0)  # the problem's own count stays the full size's
    fixed = big.replace("return torch.relu(x)", "assert x.shape[0] == 4096\n        return torch.relu(x)")
    write_problem(SourceFile(level=1, problem_id=20, stem="20_Fixed", code=fixed, origin="x"), tmp_path / "fixed")
    spec = load_problem(tmp_path / "fixed").spec
    assert spec.smoke == [] and "no CPU smoke shape: " in spec.description and "AssertionError" in spec.description
