"""Candidates per hour: one `rooftop batch` (job queue, build pool, warm device worker) against one
`rooftop eval` process per candidate, on the same candidates, with the same verdicts expected.

The candidates are made from the examples deck's own solutions (problems/examples/*/solutions),
cycling through 21 templates: CUDA C++ (load_inline, and nvcc + ctypes), Triton and PyTorch, and
broken ones of every kind (compile errors in load_inline, nvcc and Triton; wrong results; runtime
errors, a segfault among them; a failing constructor; a forbidden op). Three templates are mutated
copies made here (an undeclared identifier in gemm.cu, a Triton load that pads with ones, a Triton
kernel that names an undefined variable); the others are the bundled files. The hanging example is
left out, so no candidate waits for a gate limit. Of the default 50: 12 CUDA, 16 Triton, 22 PyTorch,
24 built to fail.

Every candidate is a distinct source (a job is named by its source, so copies would be judged
once), and every CUDA candidate differs in its CUDA text itself: a comment naming this run and the
candidate goes inside the load_inline string or at the top of the .cu file, so nvcc compiles a new
file for each and the build cache can serve none of them. Cold builds count, as they would for
fresh candidates from an agent. Python and Triton candidates differ by a trailing comment; a
Triton kernel is compiled at its first call into its own source's build folder, so cold as well.

Path A is one `rooftop batch IN.jsonl --builders N` process; path B is one `rooftop eval PROBLEM
SOLUTION` process after another, in the same order. Each path gets an empty cache folder of its own
(ROOFTOP_CACHE: builds, materialized sources, the bytecode cache and per-reference sizes; and
TRITON_CACHE_DIR for rooftop's own kernels), so both start equally cold; both get the same
`--shapes`, `--timeout`, `--device`. An untimed `rooftop eval` with a throwaway cache runs first, so
that neither path pays for reading torch and the compilers from disk. Wall time is measured from
outside each path. The report: candidates per hour for each path and their ratio (target: A at
least 3x B); the compile seconds each path spent, summed over the build gates that compiled or
failed to build (nvcc and load_inline; in A mostly its build workers', beside the device; Triton's
compiles fall in the correctness gate and are not counted; a failed build counts its gate's wall
time, which in a build worker includes starting its child); how many CUDA candidates that built
found their build in the cache where they were evaluated (in A all should: the build worker made
it; in B none); and whether the two paths gave every candidate the same status (those that differ
are listed), beside the status each template is expected to get.

The default shape is `tiny` (one smoke shape every example problem has): the run measures what
the service changes (process and child start-up, builds, hand-over, the gates' fixed costs) rather
than long timings of large shapes; `--shapes held_out` or `all` gives heavier evaluations and a
longer run.

    python benchmarks/batch_throughput.py [--count 50] [--device cuda|cpu] [--timeout 60] [--shapes tiny]
                                          [--builders N] [--order ab|ba] [--no-warmup] [--keep] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "problems" / "examples"
INLINE_ANCHOR = 'CUDA_SOURCE = r"""\n'
TARGET_RATIO = 3.0


@dataclass(frozen=True)
class Template:
    """One kind of candidate: a bundled solution, possibly mutated (`edit`: file, old text, new text)."""

    problem: str
    source: str  # a .py file or a solution folder under problems/examples/<problem>/solutions
    language: str  # cuda, triton, pytorch
    label: str = ""
    edit: tuple[str, str, str] | None = None
    expected: dict[str, str] = field(default_factory=dict)  # for mutations; else expected.yaml's

    @property
    def name(self) -> str:
        return self.label or Path(self.source).stem


TEMPLATES = [
    Template("gemm", "cuda_ctypes_gemm", "cuda"),
    Template("softmax", "triton_softmax.py", "triton"),
    Template("softmax", "broken_wrong.py", "pytorch"),
    Template("conv2d", "broken_runtime.py", "pytorch"),
    Template("gemm", "cuda_ctypes_gemm", "cuda", "cuda_ctypes_gemm_undeclared",
             ("gemm.cu", "acc[i][j] = 0.0f;", "acc[i][j] = undeclared_zero;"),
             {"cpu": "compile_error", "cuda": "compile_error"}),
    Template("layernorm", "pytorch_layernorm.py", "pytorch"),
    Template("row_sum", "triton_row_sum.py", "triton"),
    Template("linear_gelu", "broken_crash.py", "pytorch"),
    Template("row_sum", "cuda_row_sum.py", "cuda"),
    Template("gemm", "triton_gemm.py", "triton"),
    Template("softmax", "broken_zeros.py", "pytorch"),
    Template("row_sum", "broken_compile.py", "cuda"),
    Template("conv2d", "pytorch_conv2d.py", "pytorch"),
    Template("layernorm", "triton_layernorm.py", "triton"),
    Template("conv2d", "broken_init.py", "pytorch"),
    Template("softmax", "cuda_softmax.py", "cuda"),
    Template("row_sum", "triton_row_sum.py", "triton", "triton_row_sum_pads_ones",
             ("solution.py", "mask=cols < n_cols, other=0.0)", "mask=cols < n_cols, other=1.0)"),
             {"cpu": "incorrect", "cuda": "incorrect"}),
    Template("softmax", "pytorch_softmax.py", "pytorch"),
    Template("gemm", "broken_forbidden.py", "pytorch"),
    Template("linear_gelu", "triton_linear_gelu.py", "triton"),
    # Triton reports an undefined name when it compiles the kernel (compile_error); its CPU
    # interpreter only when the line runs (runtime_error)
    Template("softmax", "triton_softmax.py", "triton", "triton_softmax_undefined",
             ("solution.py", "inv_total = 1.0 / tl.sum(run_sum * lane_scale, axis=0)",
              "inv_total = row_scale / tl.sum(run_sum * lane_scale, axis=0)"),
             {"cpu": "runtime_error", "cuda": "compile_error"}),
]


@dataclass
class Candidate:
    index: int
    template: Template
    path: Path  # the solution as both paths get it: a .py file or a folder

    @property
    def problem(self) -> str:
        return f"examples/{self.template.problem}"

    @property
    def name(self) -> str:
        return f"{self.index:02d} {self.template.problem}/{self.template.name}"


def expected_status(template: Template, device: str) -> str | None:
    if template.expected:
        return template.expected.get(device)
    table = yaml.safe_load((EXAMPLES / template.problem / "solutions" / "expected.yaml").read_text()) or {}
    return (table.get(template.source) or {}).get(device)


def mark(text: str, filename: str, tag: str) -> str:
    """The source with this candidate's tag in it: inside the CUDA string of a load_inline solution,
    at the top of a .cu file, as a trailing comment elsewhere."""
    if filename.endswith(".cu"):
        return f"// {tag}\n{text}"
    if INLINE_ANCHOR in text:
        return text.replace(INLINE_ANCHOR, f"{INLINE_ANCHOR}// {tag}\n", 1)
    return text.rstrip("\n") + f"\n# {tag}\n"


def make_candidates(count: int, folder: Path, run: str) -> list[Candidate]:
    """`count` distinct candidates under `folder`, cycling through TEMPLATES."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for index in range(count):
        template = TEMPLATES[index % len(TEMPLATES)]
        origin = EXAMPLES / template.problem / "solutions" / template.source
        stem = f"c{index:02d}_{template.problem}_{template.name}"
        files = {f.name: f.read_text() for f in origin.iterdir() if f.is_file()} if origin.is_dir() \
            else {"solution.py": origin.read_text()}
        if template.edit is not None:
            target, old, new = template.edit
            if old not in files[target]:
                raise SystemExit(f"{origin}: the text this benchmark mutates is gone ({old!r} in {target})")
            files[target] = files[target].replace(old, new, 1)
        tag = f"batch_throughput run {run} candidate {index}"
        cuda_files = [n for n in files if n.endswith(".cu")]
        if template.language == "cuda" and not cuda_files and INLINE_ANCHOR not in files["solution.py"]:
            raise SystemExit(f"{origin}: no CUDA string found to mark ({INLINE_ANCHOR!r})")
        for name in cuda_files:
            files[name] = mark(files[name], name, tag)
        files["solution.py"] = mark(files["solution.py"], "solution.py", tag)
        if origin.is_dir():
            path = folder / stem
            path.mkdir()
            for name, text in files.items():
                (path / name).write_text(text)
        else:
            path = folder / f"{stem}.py"
            path.write_text(files["solution.py"])
        out.append(Candidate(index, template, path))
    return out


def path_env(cache: Path) -> dict[str, str]:
    """The environment of one path's rooftop processes: its own caches, src importable."""
    src = str(ROOT / "src")
    python_path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "ROOFTOP_CACHE": str(cache / "rooftop"), "TRITON_CACHE_DIR": str(cache / "triton"),
            "PYTHONPATH": python_path, "COLUMNS": "200"}


def rooftop(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT)
    return time.perf_counter() - started, proc


def common_options(args: argparse.Namespace) -> list[str]:
    return ["--device", args.device, "--shapes", args.shapes, "--timeout", str(args.timeout)]


def build_record(verdict: dict) -> dict | None:
    return next((g for g in verdict.get("gates", []) if g["gate"] == "build"), None)


def device_build(record: dict | None) -> str | None:
    """What the build gate found where the candidate was evaluated: a cached build, a fresh one, or
    a failed one (None: no build gate there)."""
    if record is None:
        return None
    return "failed" if not record["ok"] else "cached" if record.get("cached") else "built"


def compile_seconds(verdict: dict | None) -> float | None:
    """Seconds of a build gate in which something was compiled (or failed to build); None otherwise."""
    record = build_record(verdict) if verdict else None
    if record is None:
        return None
    if not record["ok"] or record.get("cached") is False:
        return record["seconds"]
    return None


def warm_up(args: argparse.Namespace, work: Path) -> float:
    """One untimed evaluation with a throwaway cache: torch, rooftop and the compilers read from disk."""
    solution = EXAMPLES / "softmax" / "solutions" / "pytorch_softmax.py"
    wall, proc = rooftop(["eval", "examples/softmax", str(solution), *common_options(args), "--json",
                          "--db", str(work / "warmup.db")], path_env(work / "cache-warmup"))
    if proc.returncode != 0:
        raise SystemExit(f"the warm-up evaluation failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}"
                         f"\n{proc.stderr[-2000:]}")
    return wall


def path_a(candidates: list[Candidate], args: argparse.Namespace, work: Path) -> dict:
    """One `rooftop batch` over every candidate; per candidate its job and verdict."""
    lines = work / "candidates.jsonl"
    lines.write_text("".join(json.dumps({"problem": c.problem, "solution": str(c.path)}) + "\n" for c in candidates))
    db = work / "A.db"
    command = ["batch", str(lines), *common_options(args), "--builders", str(args.builders), "--json", "--db", str(db)]
    print(f"path A: rooftop {' '.join(command)}", flush=True)
    wall, proc = rooftop(command, path_env(work / "cache-a"))
    if proc.returncode not in (0, 1):  # 1: some job got no verdict (reported per candidate below)
        raise SystemExit(f"rooftop batch failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                         f"{proc.stderr[-3000:]}")
    jobs = {j["solution"]: j for j in json.loads(proc.stdout)}
    ids = [j["evaluation_id"] for j in jobs.values() if j["evaluation_id"] is not None]
    verdicts: dict[int, dict] = {}
    if ids:
        with sqlite3.connect(db) as con:
            verdicts = {i: json.loads(text) for i, text in con.execute(
                f"SELECT id, verdict_json FROM evaluations WHERE id IN ({','.join('?' * len(ids))})", ids)}
    rows = []
    for c in candidates:
        job = jobs.get(str(c.path))
        if job is None:
            raise SystemExit(f"rooftop batch returned no job for {c.path}")
        verdict = verdicts.get(job["evaluation_id"])
        # the device's own build gate; a job settled by a build worker never reached the device
        record = build_record(verdict) if verdict and job["device"] is not None else None
        # a build worker's compile is the job's build_s; a build that failed there, or one the device
        # had to do itself, is in the verdict's build gate
        parts = [job["build_s"] if job["build_cached"] is False else None, compile_seconds(verdict)]
        compiled = [p for p in parts if p is not None]
        rows.append({"status": job["status"] or f"no verdict ({job['state']}: {(job['error'] or '')[:200]})",
                     "compile_s": sum(compiled) if compiled else None,
                     "builder_s": job["build_s"], "builder_cached": job["build_cached"],
                     "device": job["device"], "device_build": device_build(record),
                     "evaluation_s": verdict["wall_seconds"] if verdict else None,
                     "build_wait_s": job["build_wait_s"], "run_wait_s": job["run_wait_s"], "attempts": job["attempts"]})
    return {"wall_s": wall, "command": command, "rows": rows, "exit_code": proc.returncode}


def path_b(candidates: list[Candidate], args: argparse.Namespace, work: Path) -> dict:
    """One `rooftop eval` process per candidate, one after another."""
    env, db = path_env(work / "cache-b"), work / "B.db"
    print(f"path B: rooftop eval PROBLEM SOLUTION {' '.join(common_options(args))} --json --db {db}  "
          f"(x{len(candidates)})", flush=True)
    rows, environment = [], None
    started = time.perf_counter()
    for c in candidates:
        wall, proc = rooftop(["eval", c.problem, str(c.path), *common_options(args), "--json", "--db", str(db)], env)
        try:
            verdict = json.loads(proc.stdout)
        except json.JSONDecodeError:
            verdict = {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}
        if "error" in verdict:
            rows.append({"status": f"no verdict ({verdict['error'][:200]})", "process_s": wall})
            continue
        environment = environment or verdict.get("environment")
        record = build_record(verdict)
        rows.append({"status": verdict["status"], "process_s": wall, "compile_s": compile_seconds(verdict),
                     "device_build": device_build(record), "evaluation_s": verdict["wall_seconds"]})
        if args.verbose:
            print(f"  {c.name:44s} {verdict['status']:14s} {wall:6.1f} s", flush=True)
    return {"wall_s": time.perf_counter() - started, "rows": rows, "environment": environment}


def summarize(wall: float, rows: list[dict], cuda: list[int]) -> dict:
    """The path's figures; `cuda`: the indices of the CUDA candidates."""
    compiles = [r["compile_s"] for r in rows if r.get("compile_s") is not None]
    evaluated = [i for i in cuda if rows[i].get("device_build") in ("cached", "built")]
    return {"wall_s": wall, "per_candidate_s": wall / len(rows), "candidates_per_hour": 3600 * len(rows) / wall,
            "compiles": len(compiles), "compile_s": sum(compiles), "cuda_built_and_evaluated": len(evaluated),
            "cuda_cached_at_evaluation": sum(1 for i in evaluated if rows[i]["device_build"] == "cached")}


def report(candidates: list[Candidate], a: dict, b: dict, args: argparse.Namespace) -> dict:
    cuda = [c.index for c in candidates if c.template.language == "cuda"]
    sa, sb = summarize(a["wall_s"], a["rows"], cuda), summarize(b["wall_s"], b["rows"], cuda)
    ratio = sa["candidates_per_hour"] / sb["candidates_per_hour"]
    languages = {k: sum(1 for c in candidates if c.template.language == k) for k in ("cuda", "triton", "pytorch")}
    expected = [expected_status(c.template, args.device) for c in candidates]
    failing = sum(1 for e in expected if e not in (None, "correct", "needs_gpu"))
    device = (b.get("environment") or {}).get("device_name", args.device)
    print(f"\n{len(candidates)} candidates on {args.device} ({device}), shapes {args.shapes}, gate limit "
          f"{args.timeout:g} s: {languages['cuda']} CUDA C++, {languages['triton']} Triton, {languages['pytorch']} "
          f"PyTorch; {failing} built to fail")
    print(f"{'path':32s} {'wall s':>8s} {'s/cand.':>8s} {'cand./hour':>11s} {'compiles':>9s} {'compile s':>10s} "
          f"{'CUDA found built':>17s}")
    workers = f"{args.builders} build worker{'s' if args.builders > 1 else ''}"
    for label, s in ((f"A  rooftop batch ({workers})", sa), (f"B  rooftop eval x{len(candidates)}", sb)):
        found = f"{s['cuda_cached_at_evaluation']}/{s['cuda_built_and_evaluated']}"
        print(f"{label:32s} {s['wall_s']:8.1f} {s['per_candidate_s']:8.2f} {s['candidates_per_hour']:11,.0f} "
              f"{s['compiles']:9d} {s['compile_s']:10.1f} {found:>17s}")
    print("(compile s: build gates that compiled or failed to build, summed; CUDA found built: CUDA candidates whose "
          "build gate found the build in the cache where they were evaluated, of those that built)")
    print(f"A / B: {ratio:.2f}x the candidates per hour (target >= {TARGET_RATIO:g}x: "
          f"{'met' if ratio >= TARGET_RATIO else 'missed'})")
    evaluations = [r["evaluation_s"] for r in a["rows"] if r.get("evaluation_s") is not None]
    processes = [r["process_s"] for r in b["rows"]]
    if evaluations and processes:
        print(f"A: verdict wall in its worker, median {statistics.median(evaluations):.2f} s; B: process wall per "
              f"candidate, median {statistics.median(processes):.2f} s ({min(processes):.2f}-{max(processes):.2f})")
    differences = []
    for c, ra, rb in zip(candidates, a["rows"], b["rows"]):
        if ra["status"] != rb["status"]:
            differences.append({"candidate": c.name, "path": str(c.path), "a": ra["status"], "b": rb["status"]})
    print(f"statuses identical, candidate by candidate: {len(candidates) - len(differences)} of {len(candidates)}")
    for d in differences:
        print(f"  differs: {d['candidate']}: A {d['a']}, B {d['b']}")
    statuses = sorted({r["status"] for r in a["rows"] + b["rows"]} | {e for e in expected if e})
    print(f"{'status':16s} {'A':>4s} {'B':>4s} {'expected':>9s}")
    for status in statuses:
        print(f"{status[:16]:16s} {sum(r['status'] == status for r in a['rows']):4d} "
              f"{sum(r['status'] == status for r in b['rows']):4d} {sum(e == status for e in expected):9d}")
    unexpected = [(c, e, ra["status"], rb["status"]) for c, e, ra, rb in zip(candidates, expected, a["rows"], b["rows"])
                  if e is not None and e not in (ra["status"], rb["status"])]
    for c, e, sa_, sb_ in unexpected:
        print(f"  not the expected status: {c.name}: expected {e}, A {sa_}, B {sb_}")
    per_candidate = [{"index": c.index, "candidate": c.name, "problem": c.problem, "solution": str(c.path),
                      "language": c.template.language, "expected": e, "a": ra, "b": rb}
                     for c, e, ra, rb in zip(candidates, expected, a["rows"], b["rows"])]
    return {"summary": {"a": sa, "b": sb, "ratio": ratio, "target_ratio": TARGET_RATIO, "met": ratio >= TARGET_RATIO,
                        "identical": not differences, "differences": differences, "languages": languages,
                        "built_to_fail": failing},
            "candidates": per_candidate}


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_builders(device: str) -> int:
    """On a GPU host, the cores left after the device worker's four, two compilers per build
    (load_inline runs the host and the CUDA compile side by side)."""
    return max(1, (usable_cores() - 4) // 2) if device == "cuda" else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=50, help="candidates (default 50)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per gate, both paths (default 60)")
    parser.add_argument("--shapes", default="tiny", help="shape group or names, both paths (default tiny)")
    parser.add_argument("--builders", type=int, help="path A's build workers (default: (cores - 4) / 2 on cuda, "
                        "1 on cpu)")
    parser.add_argument("--order", choices=("ab", "ba"), default="ab", help="which path runs first")
    parser.add_argument("--no-warmup", action="store_true", help="skip the untimed evaluation before both paths")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (candidates, databases, caches)")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per candidate of path B as it ends")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--tag", default=None, help="names the candidates' variants (default: random); the same "
                        "tag makes the same candidates, for --only")
    parser.add_argument("--only", choices=("a", "b"), help="run one path and write its raw result to --json (for "
                        "machines whose commands are time-limited)")
    parser.add_argument("--combine", type=Path, nargs=2, metavar=("A_JSON", "B_JSON"),
                        help="report two --only results of the same --tag and --count instead of running")
    args = parser.parse_args()
    if args.count < 1:
        parser.error("--count: at least 1")
    args.builders = args.builders or default_builders(args.device)
    work = Path(tempfile.mkdtemp(prefix="rooftop-batch-throughput-"))
    try:
        candidates = make_candidates(args.count, work / "candidates", args.tag or secrets.token_hex(4))
        paths: dict[str, dict] = {}
        warmup = None
        if args.combine:
            paths = {which: json.loads(path.read_text())[which] for which, path in zip("ab", args.combine)}
        else:
            warmup = None if args.no_warmup else warm_up(args, work)
            if warmup is not None:
                print(f"warm-up evaluation (not counted): {warmup:.1f} s", flush=True)
            for which in args.only or args.order:
                paths[which] = (path_a if which == "a" else path_b)(candidates, args, work)
                print(f"path {which.upper()}: {paths[which]['wall_s']:.1f} s", flush=True)
        if args.only:
            if args.json:
                args.json.write_text(json.dumps(paths, indent=2, default=str) + "\n")
            return
        result = report(candidates, paths["a"], paths["b"], args)
        result["settings"] = {"count": args.count, "device": args.device, "timeout": args.timeout,
                              "shapes": args.shapes, "builders": args.builders, "order": args.order,
                              "warmup_s": warmup, "cores": usable_cores()}
        result["environment"] = paths["b"].get("environment")
        result["commands"] = {"a": paths["a"]["command"], "a_exit_code": paths["a"]["exit_code"]}
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
