"""KernelBench-Hard as input: problem folders (problem.yaml, shapes.py, reference.py) imported as
the deck `kernelbench-hard`, on small folders in their format that the tests write themselves."""

import json
import os
from pathlib import Path

import pytest
import torch
import yaml
from test_kernelbench import one_line_error, rooftop

from rooftop.errors import UserError
from rooftop.problem.formats._kernelbench_hard_read import ADAPTER_MARK
from rooftop.problem.formats._kernelbench_hard_spec import convert
from rooftop.problem.formats.kernelbench_hard import import_kernelbench_hard
from rooftop.problem.instance import ProblemInstance
from rooftop.problem.loader import load_problem
from rooftop.problem.registry import bundled_names, resolve, resolve_many

# -- an fp8 GEMM-like problem: their tolerance key (fp8_e4m3fn) differs from their precision (fp8_e4m3)
FP8_YAML = """\
name: 01_fp8_matmul
display_name: "Tiny FP8 matmul"
precision: fp8_e4m3
regime: compute

# two operations per multiply-add
flops_formula: "2 * M * N * K"
bytes_formula: "M*K + K*N + 2*M*N"

hardware: [SOME_GPU]
peak_tflops_key: fp8
peak_bandwidth_key: dram

tolerance:
  fp8_e4m3fn: 0.15
  bfloat16: 0.02   # never applies: the problem is fp8

forbidden:
  - "torch._scaled_mm"
  - "torch.ops.aten._scaled_mm"
  - "F.linear"

sota:
  name: "a library"
  url: "https://example.invalid/lib"
  function: "lib.fp8_matmul"
  deps: ["lib>=1"]

num_correct_trials: 3
num_perf_trials: 10
"""

FP8_SHAPES = '''"""Two sizes."""

SHAPES = [
    {"M": 16, "N": 32, "K": 64},   # square-ish
    {"M": 8,  "N": 48, "K": 40},   # K not a multiple of 16
]
'''

FP8_REFERENCE = '''"""Matrix product of an fp8 input with a bf16 weight, upcast to bf16.

This second paragraph stays out of the description.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, M: int, N: int, K: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(N, K, dtype=torch.bfloat16) * 0.05)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.bfloat16) @ self.weight.T


M = 16
N = 32
K = 64


def get_inputs():
    return [(torch.rand(M, K) * 4 - 2).to(torch.float8_e4m3fn)]


def get_init_inputs():
    return [M, N, K]
'''

# -- a top-k-like problem: two outputs, lower-case shape keys over upper-case globals, a flag no global reads
TOPK_YAML = """\
name: 02_top_k
display_name: "Top-k of each row"
precision: fp32
regime: memory
flops_formula: "batch * n * math.log2(n)"
bytes_formula: "batch * vocab * 4"
peak_tflops_key: fp32
tolerance:
  "torch.float32": {"atol": 1.0e-5, "rtol": 1.0e-5}
forbidden:
  - "torch.topk"
  - ".sort("
  - "import fastselect"
"""

TOPK_SHAPES = '''SHAPES = [
    {"batch": 4, "n": 100, "k": 5, "spiky": False},
    # odd width, one row
    {"batch": 1, "n": 257, "k": 1, "spiky": True},
]
'''

TOPK_REFERENCE = '''"""Top-k values and their indices along the last dimension."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, batch, n, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        values, indices = torch.topk(x, self.k, dim=-1)
        return values, indices


BATCH = 8
N = 64
K = 4


def get_inputs():
    return [torch.randn(BATCH, N)]


def get_init_inputs():
    return [BATCH, N, K]
'''

BROKEN = {
    "08_stub": {"problem.yaml": "name: 08_stub\nstatus: stub\n"},
    "09_no_shapes_list": {"problem.yaml": FP8_YAML, "shapes.py": "SIZES = [{'M': 1}]\n", "reference.py": FP8_REFERENCE},
    "10_syntax": {"problem.yaml": FP8_YAML, "shapes.py": FP8_SHAPES, "reference.py": "def get_inputs(:\n"},
    "11_words": {"problem.yaml": FP8_YAML, "shapes.py": "SHAPES = [{'M': 'big'}]\n", "reference.py": FP8_REFERENCE},
    "12_no_yaml": {"shapes.py": FP8_SHAPES, "reference.py": FP8_REFERENCE},
    "13_lists": {"problem.yaml": FP8_YAML, "shapes.py": "SHAPES = [[1, 2]]\n", "reference.py": FP8_REFERENCE},
    "14_no_model": {"problem.yaml": FP8_YAML, "shapes.py": FP8_SHAPES,
                    "reference.py": "def get_inputs():\n    return []\n\n\ndef get_init_inputs():\n    return []\n"},
}


def problem_folder(root: Path, name: str, files: dict[str, str]) -> Path:
    folder = root / "problems" / name
    folder.mkdir(parents=True, exist_ok=True)
    for file, text in files.items():
        (folder / file).write_text(text)
    return folder


def checkout(root: Path, broken: bool = False) -> Path:
    """A KernelBench-Hard checkout with two good problems (and the broken ones, when asked)."""
    problem_folder(root, "01_fp8_matmul", {"problem.yaml": FP8_YAML, "shapes.py": FP8_SHAPES,
                                           "reference.py": FP8_REFERENCE, "sota.py": "def is_available():\n"
                                           "    return False\n", "PROMPT.txt": "every shape is listed here\n"})
    problem_folder(root, "02_top_k", {"problem.yaml": TOPK_YAML, "shapes.py": TOPK_SHAPES,
                                      "reference.py": TOPK_REFERENCE})
    for name, files in BROKEN.items() if broken else ():
        problem_folder(root, name, files)
    return root


@pytest.fixture
def kbh(tmp_path):
    return checkout(tmp_path / "kbh")


@pytest.fixture
def decks(tmp_path, monkeypatch):
    root = tmp_path / "decks"
    monkeypatch.setenv("ROOFTOP_DECKS", str(root))
    return root


def notes(report, name: str) -> dict[str, list[str]]:
    item = next(i for i in report.imported if i.name == name)
    found: dict[str, list[str]] = {}
    for n in item.notes:
        found.setdefault(n.field, []).append(n.note)
    return found


# -- import ---------------------------------------------------------------------------------------
def test_each_folder_becomes_a_problem_of_the_deck(kbh, decks):
    report = import_kernelbench_hard(kbh, decks)
    assert [i.name for i in report.imported] == ["kernelbench-hard/01_fp8_matmul", "kernelbench-hard/02_top_k"]
    assert not report.skipped and {i.change for i in report.imported} == {"added"}
    folder = decks / "kernelbench-hard/01_fp8_matmul"
    assert sorted(p.name for p in folder.iterdir()) == ["problem.yaml", "reference.py"]  # no sota.py, no PROMPT.txt
    reference = (folder / "reference.py").read_text()
    assert reference.startswith(FP8_REFERENCE) and ADAPTER_MARK in reference[len(FP8_REFERENCE):]
    assert bundled_names("kernelbench-hard") == [i.name for i in report.imported]
    spec = resolve("kernelbench-hard/01_fp8_matmul").spec
    assert spec.name == "01_fp8_matmul" and spec.title == "Tiny FP8 matmul" and spec.version == 1
    assert spec.description.startswith("Tiny FP8 matmul. Matrix product of an fp8 input with a bf16 weight")
    assert "second paragraph" not in spec.description and "KernelBench-Hard problem 01_fp8_matmul" in spec.description
    assert (spec.dtype, spec.regime, spec.peak_dtype) == ("float8_e4m3fn", "compute", None)  # fp8 peak = dtype
    assert spec.tags == ["kernelbench-hard", "gpu-only"] and spec.smoke == [] and spec.outputs == []
    assert [(s.name, s.split.value, s.params) for s in spec.shapes] == [
        ("shape0", "visible", {"M": 16, "N": 32, "K": 64}), ("shape1", "visible", {"M": 8, "N": 48, "K": 40})]
    assert spec.shapes[0].note == "M=16, N=32, K=64: square-ish"
    assert spec.policy.forbidden == ["torch._scaled_mm", "torch.ops.aten._scaled_mm", "torch.nn.functional.linear"]
    topk = resolve("kernelbench-hard/02_top_k").spec
    assert topk.shapes[1].note == "batch=1, n=257, k=1, spiky=True: odd width, one row"  # the comment above it
    assert "sota.py is not converted" in notes(report, "kernelbench-hard/01_fp8_matmul")["sota"][0]
    assert any("no held-out shapes" in n for n in report.notes) and any("smoke" in n for n in report.notes)


def test_the_formulas_give_each_shapes_figures(kbh, decks):
    import_kernelbench_hard(kbh, decks)
    spec = resolve("kernelbench-hard/01_fp8_matmul").spec
    assert [spec.flops_for(s) for s in spec.shapes] == [2 * 16 * 32 * 64, 2 * 8 * 48 * 40]
    assert [spec.bytes_for(s) for s in spec.shapes] == [16 * 64 + 64 * 32 + 2 * 16 * 32, 8 * 40 + 40 * 48 + 2 * 8 * 48]


def test_formulas_rooftop_cannot_read_are_dropped_with_the_reason(kbh, decks):
    report = import_kernelbench_hard(kbh, decks)
    spec = resolve("kernelbench-hard/02_top_k").spec
    assert spec.flops is None and spec.bytes is None
    said = notes(report, "kernelbench-hard/02_top_k")
    assert "'math.log2' is not allowed" in said["flops"][0]
    assert "uses vocab, which shape0 does not define" in said["bytes"][0]


def test_only_the_tolerance_of_the_problems_dtype_is_kept(kbh, decks):
    report = import_kernelbench_hard(kbh, decks)
    fp8 = resolve("kernelbench-hard/01_fp8_matmul").spec
    assert {k: (t.atol, t.rtol) for k, t in fp8.tolerance.items()} == {"float8_e4m3fn": (0.15, 0.15)}
    assert fp8.tolerance_for("bfloat16").atol == 0.15  # the bf16 output is judged by the fp8 tolerance
    assert notes(report, "kernelbench-hard/01_fp8_matmul")["tolerance.bfloat16"] == [
        "dropped: never applied (the problem's dtype is float8_e4m3fn)"]
    topk = resolve("kernelbench-hard/02_top_k").spec
    assert {k: (t.atol, t.rtol) for k, t in topk.tolerance.items()} == {"float32": (1e-5, 1e-5)}


def test_forbidden_patterns_become_names_and_unread_params_are_reported(kbh, decks):
    report = import_kernelbench_hard(kbh, decks)
    assert resolve("kernelbench-hard/02_top_k").spec.policy.forbidden == ["torch.topk", "Tensor.sort"]
    said = notes(report, "kernelbench-hard/02_top_k")
    assert said["forbidden"] == ["'.sort(' read as Tensor.sort",
                                 "'import fastselect' dropped: rooftop's import allow-list refuses fastselect already"]
    assert "sets no global of reference.py" in said["shapes.spiky"][0]


def test_a_precision_that_is_no_dtype_takes_the_peak_key(tmp_path):
    folder = problem_folder(tmp_path, "07_w4a16", {
        "problem.yaml": FP8_YAML.replace("precision: fp8_e4m3", "precision: int4_bf16")
                                .replace("peak_tflops_key: fp8", "peak_tflops_key: bf16"),
        "shapes.py": FP8_SHAPES, "reference.py": FP8_REFERENCE})
    spec, _, said = convert(folder)
    assert spec["dtype"] == "bfloat16" and "peak_dtype" not in spec
    assert [n.field for n in said][:1] == ["dtype"] and "int4_bf16" in said[0].note
    assert set(spec["tolerance"]) == {"bfloat16"}  # now their bf16 entry is the one that applies


def test_the_references_own_imports_are_allowed_to_solutions(tmp_path):
    """Their harness allows any import; rooftop's allow-list would refuse the reference itself as a
    candidate (a self-check, an agent's first solution) without them."""
    from rooftop.batch.selfcheck import relaxed

    reference = FP8_REFERENCE.replace("import torch.nn as nn\n", "import torch.nn as nn\nimport einops\n"
                                      "from scipy import special\nimport math\n")
    folder = problem_folder(tmp_path, "02_attention", {"problem.yaml": FP8_YAML, "shapes.py": FP8_SHAPES,
                                                       "reference.py": reference})
    spec, _, said = convert(folder)
    assert spec["policy"]["extra_imports"] == ["einops", "scipy"]
    assert "reference.py imports einops: solutions may too" in [n.note for n in said]
    import_kernelbench_hard(folder, tmp_path / "decks")
    problem = load_problem(tmp_path / "decks/kernelbench-hard/02_attention")
    assert relaxed(problem).spec.policy.extra_imports == ["einops", "scipy"]  # the self-check keeps them


def test_the_adapter_makes_each_shapes_inputs_in_one_process(kbh, decks):
    import_kernelbench_hard(kbh, decks)
    fp8 = ProblemInstance(resolve("kernelbench-hard/01_fp8_matmul"), "cpu")
    first, second = fp8.spec.shapes
    assert fp8.init_inputs(second) == [8, 48, 40] and fp8.init_inputs(first) == [16, 32, 64]
    (x,) = fp8.inputs(second, seed=1)
    assert x.shape == (8, 40) and x.dtype == torch.float8_e4m3fn
    assert fp8.model(second).weight.shape == (48, 40)
    (x,) = fp8.inputs(first, seed=1)
    assert x.shape == (16, 64) and fp8.model(first).weight.shape == (32, 64)
    assert torch.equal(fp8.inputs(first, seed=2)[0].float(), fp8.inputs(first, seed=2)[0].float())
    topk = ProblemInstance(resolve("kernelbench-hard/02_top_k"), "cpu")
    shapes = topk.spec.shapes
    assert [topk.inputs(s, seed=0)[0].shape for s in (*shapes, shapes[0])] == [(4, 100), (1, 257), (4, 100)]
    assert [topk.init_inputs(s) for s in shapes] == [[4, 100, 5], [1, 257, 1]]  # batch -> BATCH, n -> N, k -> K


def test_each_reference_is_correct_as_its_own_candidate_on_the_cpu(kbh, decks):
    """The selfcheck of the deck: the reference with `ModelNew = Model` added (the adapter included)
    passes the static gate and is correct on every shape, both outputs of the top-k included."""
    from rooftop.batch.selfcheck import selfcheck
    from rooftop.vocabulary import Settings

    import_kernelbench_hard(kbh, decks)
    rows = selfcheck(resolve_many("kernelbench-hard"), Settings(device="cpu", shapes="visible", timing=False,
                                                                timeout=120))
    assert [(r.problem, r.status, r.passed) for r in rows] == [
        ("kernelbench-hard/01_fp8_matmul", "correct", True), ("kernelbench-hard/02_top_k", "correct", True)], rows


def test_reimport_is_idempotent_and_a_change_bumps_the_version(kbh, decks):
    import_kernelbench_hard(kbh, decks)
    spec_file = decks / "kernelbench-hard/01_fp8_matmul/problem.yaml"
    first = spec_file.read_text()
    again = import_kernelbench_hard(kbh, decks)
    assert {i.change for i in again.imported} == {"unchanged"} and spec_file.read_text() == first
    source = kbh / "problems/01_fp8_matmul"
    (source / "reference.py").write_text(FP8_REFERENCE.replace("* 0.05", "* 0.02"))
    changed = {i.name: (i.change, i.version) for i in import_kernelbench_hard(kbh, decks).imported}
    assert changed == {"kernelbench-hard/01_fp8_matmul": ("updated", 2), "kernelbench-hard/02_top_k": ("unchanged", 1)}
    (source / "shapes.py").write_text(FP8_SHAPES.replace("]\n", '    {"M": 1, "N": 8, "K": 8},\n]\n'))
    changed = {i.name: (i.change, i.version) for i in import_kernelbench_hard(kbh, decks).imported}
    assert changed["kernelbench-hard/01_fp8_matmul"] == ("updated", 3)
    assert len(load_problem(spec_file.parent).spec.shapes) == 3
    assert import_kernelbench_hard(kbh, decks).imported[0].change == "unchanged"
    assert yaml.safe_load(spec_file.read_text())["version"] == 3


def test_bad_folders_are_skipped_with_a_reason(tmp_path, decks):
    kbh = checkout(tmp_path / "kbh", broken=True)
    report = import_kernelbench_hard(kbh, decks)
    assert [i.name for i in report.imported] == ["kernelbench-hard/01_fp8_matmul", "kernelbench-hard/02_top_k"]
    reasons = {Path(s.origin).name: s.reason for s in report.skipped}
    assert reasons == {
        "08_stub": "no reference.py (its problem.yaml says status: stub)",
        "09_no_shapes_list": "shapes.py defines no SHAPES at module level",
        "10_syntax": "reference.py: Python syntax error at line 1: invalid syntax",
        "11_words": "shapes.py: SHAPES[0]['M'] is 'big', not a number",
        "12_no_yaml": "no problem.yaml",
        "13_lists": "shapes.py: SHAPES[0] is not a dict of sizes",
        "14_no_model": "reference.py defines no Model at module level",
    }
    assert not (decks / "kernelbench-hard/08_stub").exists()


def test_a_checkout_its_problems_folder_or_one_problem(kbh, tmp_path):
    every = ["kernelbench-hard/01_fp8_matmul", "kernelbench-hard/02_top_k"]
    assert [i.name for i in import_kernelbench_hard(kbh, tmp_path / "a").imported] == every
    assert [i.name for i in import_kernelbench_hard(kbh / "problems", tmp_path / "b").imported] == every
    one = import_kernelbench_hard(kbh / "problems/02_top_k", tmp_path / "c")
    assert [i.name for i in one.imported] == ["kernelbench-hard/02_top_k"]
    with pytest.raises(UserError, match="no such folder"):
        import_kernelbench_hard(tmp_path / "missing", tmp_path / "d")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no KernelBench-Hard problem folders here"):
        import_kernelbench_hard(tmp_path / "empty", tmp_path / "d")
    with pytest.raises(UserError, match="not a folder"):
        import_kernelbench_hard(kbh / "problems/02_top_k/shapes.py", tmp_path / "d")


# -- the command ----------------------------------------------------------------------------------
def test_cli_import_reports_and_json(tmp_path):
    kbh = checkout(tmp_path / "kbh", broken=True)
    into = tmp_path / "elsewhere"
    proc = rooftop("import", "kernelbench-hard", str(kbh), "--into", str(into))
    assert proc.returncode == 0, proc.stderr
    assert "kernelbench-hard/02_top_k" in proc.stdout and f"ROOFTOP_DECKS={into}" in proc.stdout
    assert "skipped" in proc.stdout and "status: stub" in proc.stdout and "never applied" in proc.stdout
    proc = rooftop("import", "kernelbench-hard", str(kbh), "--into", str(into), "--json")
    report = json.loads(proc.stdout)
    assert [i["change"] for i in report["imported"]] == ["unchanged"] * 2 and len(report["skipped"]) == len(BROKEN)
    assert {"field": "tolerance.bfloat16", "note": "dropped: never applied (the problem's dtype is float8_e4m3fn)"} \
        in report["imported"][0]["notes"]
    one_line_error(rooftop("import", "kernelbench-hard", str(tmp_path / "missing"), "--into", str(into)),
                   "no such folder")
    proc = rooftop("import", "kernelbench-hard", str(tmp_path / "missing"), "--json")
    assert proc.returncode == 2 and json.loads(proc.stdout)["exit_code"] == 2


def test_the_deck_is_listed_and_refused_on_a_cpu_unless_shapes_are_named(kbh, tmp_path):
    decks = tmp_path / "decks"
    assert rooftop("import", "kernelbench-hard", str(kbh), decks=decks).returncode == 0
    listing = {p["name"]: p for p in json.loads(rooftop("problems", "--json", decks=decks).stdout)}
    assert listing["kernelbench-hard/02_top_k"]["shapes"] == {"visible": 2, "held_out": 0, "smoke": 0}
    solution = tmp_path / "solution.py"
    solution.write_text(FP8_REFERENCE + "\nModelNew = Model\n")
    db = str(tmp_path / "r.db")
    one_line_error(rooftop("eval", "kernelbench-hard/01_fp8_matmul", str(solution), "--device", "cpu", "--db", db,
                           decks=decks), "no smoke shapes, and its shapes are sized for a GPU (gpu-only)")
    one_line_error(rooftop("selfcheck", "kernelbench-hard", "--device", "cpu", decks=decks), "--shapes")


@pytest.mark.skipif(not os.environ.get("ROOFTOP_KBH_CHECKOUT"), reason="ROOFTOP_KBH_CHECKOUT names no checkout")
def test_a_real_checkout_imports_and_loads(tmp_path):
    """Their own problems: every folder with a reference and shapes imports, and each loads."""
    checkout_root = Path(os.environ["ROOFTOP_KBH_CHECKOUT"])
    report = import_kernelbench_hard(checkout_root, tmp_path)
    assert report.imported, report.skipped
    for item in report.imported:
        problem = load_problem(item.folder)
        assert problem.spec.shapes and problem.spec.tags[0] == "kernelbench-hard"
    for skipped in report.skipped:
        folder = Path(skipped.origin)
        assert not ((folder / "reference.py").is_file() and (folder / "shapes.py").is_file()), skipped


def test_the_pipeline_itself_refuses_a_gpu_only_problem_on_a_cpu(tmp_path):
    """Not only the command line: the API and the service evaluate through the same shape choice."""
    from rooftop.errors import UserError
    from rooftop.pipeline.evaluate import select_shapes
    from rooftop.problem.loader import load_problem

    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "reference.py").write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                                         "    def forward(self, x):\n        return x * 2\n\n\n"
                                         "def get_init_inputs(**shape):\n    return []\n\n\n"
                                         "def get_inputs(N, **shape):\n    return [torch.randn(N)]\n")
    (folder / "problem.yaml").write_text("name: big\ntitle: t\ndescription: d\nversion: 1\ndtype: float32\n"
                                         "regime: memory\nbytes: '8 * N'\ntags: [gpu-only]\n"
                                         "shapes:\n  - {name: shape0, params: {N: 100000000}}\n")
    problem = load_problem(folder)
    with pytest.raises(UserError, match="gpu-only"):
        select_shapes(problem, "auto", "cpu")
    assert select_shapes(problem, "shape0", "cpu")[1][0].name == "shape0"  # named shapes still run
    assert select_shapes(problem, "auto", "cuda")[0] == "all"
