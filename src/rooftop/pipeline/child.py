"""The evaluation child: the only process that imports and runs candidate code.

Started by the trusted side as `python -m rooftop.pipeline.child JOB.json REQUEST_FD REPLY_FD`
in a fresh interpreter (inside bubblewrap when available). It serves requests one at a time:
build the solution, load one model per shape, and run one call — generating that call's inputs
from the seed in the request, timing it, and reading back values at random positions of its
outputs. It never sees an expected output, a tolerance or a statistic: the trusted side keeps
those. Its own stdout and stderr go to a log file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from rooftop.integrity.audit import TamperGuard
from rooftop.pipeline.channel import ChannelWriter
from rooftop.pipeline.job import EvalJob


class GateFailure(Exception):
    """Ends a request: a gate failed with a status and messages for the verdict."""

    def __init__(self, status: str, *messages: str, cached: bool | None = None) -> None:
        super().__init__(messages[0] if messages else status)
        self.status, self.messages, self.cached = status, [m for m in messages if m], cached


def main(argv: list[str]) -> int:
    job_path, request_fd, reply_fd = Path(argv[0]), int(argv[1]), int(argv[2])
    for fd in (request_fd, reply_fd):
        os.set_inheritable(fd, False)  # compilers and other children the solution starts do not get them
    channel = ChannelWriter(reply_fd)
    requests = os.fdopen(request_fd, "r")
    job = EvalJob.model_validate_json(job_path.read_text())
    import torch

    from rooftop.pipeline.environment import collect_environment

    guard = TamperGuard()  # before any candidate code runs
    channel.send("hello", environment=collect_environment(job.device, job.solution).model_dump())
    harness = Harness(job, torch.device(job.device), guard)
    for line in requests:
        request = json.loads(line)
        op = request.get("op")
        if op == "quit":
            break
        try:
            reply = getattr(harness, op)(request)
        except GateFailure as failure:
            reply = {"failure": {"status": failure.status, "messages": failure.messages, "cached": failure.cached}}
        except Exception as exc:  # candidate code raised where no gate expected it
            reply = {"failure": {"status": _status_for_exception(exc, harness.gate),
                                 "messages": [_describe(exc, job)]}}
        channel.send("reply", id=request["id"], **reply)
    return 0


class Harness:
    """The child's side of each request; holds the built module and one model per shape."""

    def __init__(self, job: EvalJob, device: Any, guard: TamperGuard) -> None:
        self.job, self.device, self.guard = job, device, guard
        self.gate = "build"
        self.module: ModuleType | None = None
        self.reference: ModuleType | None = None
        self.models: dict[str, Any] = {}
        self.shapes = {s.name: s for s in job.shapes}
        self.clock: Any = None
        self.reused: dict[tuple[str, int], list] = {}
        self.pool: Any = None  # InputPool, made at load (it needs the device's memory size)
        self.graphs: dict[str, Any] = {}  # shape -> GraphedCall (--graphs)

    def build(self, _request: dict) -> dict:
        from rooftop.check.inputs import set_precision

        set_precision(self.job.problem.spec)
        folder = _prepare_build_folder(self.job)
        started = time.monotonic()
        self.module, cached = _build(self.job, folder)
        return {"seconds": time.monotonic() - started, "cached": cached}

    def load(self, _request: dict) -> dict:
        from rooftop.check.inputs import InputPool, device_memory
        from rooftop.measure.timer import CpuClock, CudaEventClock

        self.gate = "load"
        started = time.monotonic()
        with _blame_reference("importing reference.py"):
            self.reference = _import_file(self.job.problem.reference, "rooftop_reference")
        copied = True
        for shape in self.job.shapes:
            self.models[shape.name], same = _construct(self.job, self.reference, self.module, shape, self.device)
            copied = copied and same
        self.clock = CudaEventClock(self.device) if self.device.type == "cuda" else CpuClock()
        self.pool = InputPool(device_memory(self.device))
        self.gate = "correctness"
        return {"seconds": time.monotonic() - started, "detail": "weights copied" if copied else
                "parameter names differ from the reference: constructed under the same seed"}

    def call(self, request: dict) -> dict:
        """One call of the candidate on fresh inputs: the same path for every call, checked or timed."""
        import torch

        from rooftop.check.compare import storage_overlaps
        from rooftop.check.inputs import clone, make_inputs, modified_inputs, tensors
        from rooftop.check.probe import probe_output, probe_outputs
        from rooftop.integrity.audit import Audit
        from rooftop.integrity.cupti import ProfilerUnavailable
        from rooftop.integrity.kernels import profile_kernels
        from rooftop.pipeline.tensorfile import dump_tensors

        self.gate = request.get("gate", self.gate)
        shape, model = self.shapes[request["shape"]], self.models[request["shape"]]
        key = (shape.name, request["seed"])
        if request.get("reuse") and key in self.reused:  # checks off: a fixed pool, as naive harnesses do
            inputs = self.reused[key]
        else:
            with _blame_reference("get_inputs"):
                inputs = make_inputs(self.reference, self.job.problem.spec, shape, request["seed"], self.device)
            if request.get("reuse"):
                self.reused[key] = inputs
            else:
                self.pool.admit(inputs, shape.name)
        reply: dict[str, Any] = {}
        if request.get("check_inputs"):
            reply["inputs"] = [probe_output(x).model_dump() for x in inputs]
        pristine = clone(inputs) if request.get("check_inputs") else None
        audit = Audit(count_compute=request.get("audit", False) and not self.job.problem.spec.policy.allow_torch_ops)
        box: dict[str, Any] = {}

        def run() -> None:
            with audit:
                box["result"] = model(*inputs)

        with torch.no_grad():
            if request.get("profile"):
                self.clock.prepare()
                try:
                    _, reply["kernels"], reply["stream"] = profile_kernels(run)
                except ProfilerUnavailable as exc:
                    reply["detail"] = f"the profiler is unavailable: {exc}"
                    if "result" not in box:
                        run()
            elif request.get("graph") and self.device.type == "cuda":
                graphed = self._graphed(shape.name, model, inputs)
                inputs = graphed.static
                reply["seconds"] = self.clock.time(graphed.replay)
                box["result"] = graphed.outputs
            else:
                reply["seconds"] = self.clock.time(run)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        result, findings = box["result"], audit.findings()
        replaced = self.guard.replaced()
        if replaced:
            findings.append(f"[tamper] the solution replaced {', '.join(replaced[:5])}, which the harness's "
                            "own timing and reports rely on")
        reply["findings"] = findings
        if request.get("probe", True):
            reply["outputs"] = [p.model_dump() for p in probe_outputs(result)]
        outs = [t for t in tensors(result) if type(t) is torch.Tensor]
        reply["aliased_inputs"] = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)
                                   and any(storage_overlaps(o, x) for o in outs)]
        if pristine is not None:
            reply["changed_inputs"] = modified_inputs(pristine, inputs)
        if request.get("full"):
            from rooftop.check.compare import as_outputs

            values = as_outputs(result)
            if all(type(v) is torch.Tensor for v in values):
                reply["dump"] = [e.model_dump() for e in dump_tensors(Path.cwd() / "outputs.bin", values)]
        return reply


    def _graphed(self, name: str, model: Any, inputs: list) -> Any:
        """The shape's call captured in a CUDA graph (on its first graphed call), loaded with inputs."""
        from rooftop.measure.graphs import GraphCaptureFailed, GraphedCall

        try:
            if name not in self.graphs:
                self.graphs.clear()  # one shape's graph at a time
                self.graphs[name] = GraphedCall(model, inputs)
            self.graphs[name].load(inputs)
        except GraphCaptureFailed as exc:
            raise GateFailure("runtime_error", f"[graphs] shape '{name}': the call could not be captured in or "
                              f"replayed from a CUDA graph: {exc}")
        return self.graphs[name]


# -- build ------------------------------------------------------------------------------------
def _build(job: EvalJob, folder: Path) -> tuple[ModuleType, bool | None]:
    from rooftop.build.backends import build_standalone, compile_check_inline, nvcc_path, trim_compiler_log

    solution = job.solution
    capability = _capability(job.device)
    cached = True
    if solution.cu_files and (job.device == "cuda" or nvcc_path() is not None):
        result = build_standalone(solution.cu_files, folder, capability, job.build_timeout)
        if not result.ok:
            raise GateFailure("compile_error", "nvcc failed:\n" + trim_compiler_log(result.log))
        cached = result.cached
    if job.device == "cpu" and solution.needs_cuda:
        messages = []
        if nvcc_path() is None:
            messages.append("nvcc is not installed here, so its CUDA code was not compile-checked")
        elif solution.inline.cuda:
            result = compile_check_inline(solution.inline.cuda, folder, capability, job.build_timeout)
            if not result.ok:
                raise GateFailure("compile_error", "nvcc failed on the load_inline CUDA source:\n"
                                  + trim_compiler_log(result.log))
            messages.append("its load_inline CUDA source compiles with nvcc")
            cached = cached and result.cached
        elif not solution.inline.resolved:
            messages.append("its load_inline sources are built at run time and could not be compile-checked")
        if solution.cu_files and nvcc_path() is not None:
            messages.append("its .cu files compile with nvcc")
        raise GateFailure("needs_gpu", "this solution uses CUDA and this machine has no GPU: "
                          + "; ".join(messages) + "; run it on a GPU for a verdict", cached=cached)
    compiled_before = set(folder.rglob("*.so"))
    try:
        module = _import_file(solution.entry, "rooftop_solution")
    except GateFailure:
        raise
    except SyntaxError as exc:
        raise GateFailure("compile_error", f"{Path(exc.filename or '').name}:{exc.lineno}: syntax error: {exc.msg}")
    except Exception as exc:
        text = str(exc)
        if "Error building extension" in text or "ninja" in text.lower():
            raise GateFailure("compile_error", "load_inline build failed:\n" + trim_compiler_log(text))
        raise GateFailure(_status_for_exception(exc, "build"), "importing the solution failed: "
                          + _describe(exc, job))
    compiled_after = set(folder.rglob("*.so"))
    if not compiled_after:
        return module, None  # nothing was compiled: Python, or Triton (which compiles at first call)
    return module, cached and compiled_after == compiled_before


def _prepare_build_folder(job: EvalJob) -> Path:
    """The build folder for this source on this platform, and the variables that point at it."""
    import torch

    from rooftop.build.cache import build_dir

    key = f"torch{torch.__version__}-{job.device}"
    capability = _capability(job.device)
    if capability is not None:
        major, minor = capability
        key += f"-sm{major}{minor}"
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}{'a' if major >= 9 else ''}"
    folder = build_dir(job.solution.source_hash, key, job.cache_root)
    os.environ["ROOFTOP_BUILD_DIR"] = str(folder)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(folder / "torch_extensions")
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
    return folder


def _capability(device: str) -> tuple[int, int] | None:
    if device != "cuda":
        return None
    import torch

    return torch.cuda.get_device_capability()


def _import_file(path: Path, name: str) -> ModuleType:
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise GateFailure("internal_error", f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- load -------------------------------------------------------------------------------------
def _construct(job: EvalJob, reference: ModuleType, module: Any, shape: Any, device: Any) -> tuple[Any, bool]:
    """The candidate model for one shape, with the reference's weights when the names match."""
    import torch

    from rooftop.check.inputs import construct, init_inputs

    cls = getattr(module, "ModelNew", None) or getattr(module, "Model", None)
    if cls is None:
        raise GateFailure("init_error", "the solution defines neither ModelNew nor Model")
    with _blame_reference("get_init_inputs"):
        init = init_inputs(reference, job.problem.spec, shape)
    with _blame_reference("constructing the reference Model"):
        ref_state = construct(reference.Model, init, job.weights_seed, device).state_dict()
    try:
        cand_model = construct(cls, init, job.weights_seed, device)
    except Exception as exc:
        raise GateFailure("init_error", f"constructing {cls.__name__} for shape '{shape.name}' failed: "
                          + _describe(exc, job))
    copied = False
    if isinstance(cand_model, torch.nn.Module):
        cand_state = cand_model.state_dict()
        if ref_state and ref_state.keys() == cand_state.keys() and \
                all(ref_state[k].shape == cand_state[k].shape for k in ref_state):
            try:
                cand_model.load_state_dict(ref_state, strict=True)
                copied = True
            except Exception as exc:
                raise GateFailure("init_error", f"copying the reference weights failed: {exc}")
        try:
            cand_model = cand_model.to(device).eval()
        except Exception as exc:
            raise GateFailure("init_error", f"moving {cls.__name__} to {device} failed: " + _describe(exc, job))
    return cand_model, copied or not ref_state


# -- errors ---------------------------------------------------------------------------------
@contextlib.contextmanager
def _blame_reference(what: str) -> Iterator[None]:
    """The problem's own code failing is our problem (internal_error), never the candidate's."""
    try:
        yield
    except Exception as exc:
        raise GateFailure("internal_error", f"{what} of the problem failed: {type(exc).__name__}: {exc}") from exc


# -- status -----------------------------------------------------------------------------------
def _status_for_exception(exc: BaseException, gate: str) -> str:
    from rooftop.integrity.sandbox import denial

    if denial(exc):
        return "rejected"
    kind = type(exc)
    if "CompilationError" in kind.__name__ or (kind.__module__.startswith("triton") and "compil" in str(exc).lower()):
        return "compile_error"
    return {"build": "compile_error", "load": "init_error"}.get(gate, "runtime_error")


def _describe(exc: BaseException, job: EvalJob) -> str:
    """Type and message, plus the innermost line of the solution that was running."""
    where = ""
    solution_files = {str(f) for f in job.solution.files}
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename in solution_files:
            where = f" (at {Path(frame.filename).name}:{frame.lineno}: {(frame.line or '').strip()})"
            break
    from rooftop.integrity.sandbox import denial

    text = str(exc).strip().splitlines()
    message = " ".join(text[:3])[:600] if text else ""
    refused = denial(exc)
    prefix = f"[sandbox] {refused}: " if refused else ""
    return f"{prefix}{type(exc).__name__}: {message}{where}"


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
