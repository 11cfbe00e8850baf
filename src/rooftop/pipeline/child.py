"""The evaluation child: the only process that imports and runs candidate code.

Started by `evaluate` as `python -m rooftop.pipeline.child JOB.json FD` in a fresh interpreter. It
walks the gates build -> load -> correctness -> timing and reports each over the channel; the
parent turns the reports (or the child's silence, crash or hang) into a verdict. Its own stdout
and stderr go to a log file so nothing the candidate prints reaches the caller's terminal.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from rooftop.pipeline.channel import ChannelWriter
from rooftop.pipeline.job import EvalJob


class GateFailure(Exception):
    """Ends the run: a gate failed with a status and messages for the verdict."""

    def __init__(self, status: str, *messages: str, cached: bool | None = None) -> None:
        super().__init__(messages[0] if messages else status)
        self.status, self.messages, self.cached = status, [m for m in messages if m], cached


def main(argv: list[str]) -> int:
    job_path, fd = Path(argv[0]), int(argv[1])
    channel = ChannelWriter(fd)
    job = EvalJob.model_validate_json(job_path.read_text())
    gate = "build"
    try:
        import torch

        from rooftop.pipeline.environment import collect_environment

        channel.send("environment", environment=collect_environment(job.device, job.solution).model_dump())
        device = torch.device(job.device)
        _set_precision(job)
        build_folder = _prepare_build_folder(job)
        channel.send("gate", gate="build", phase="start")
        started = time.monotonic()
        module, cached = _build(job, build_folder)
        channel.send("gate", gate="build", phase="end", ok=True, seconds=time.monotonic() - started, cached=cached)
        gate = "load"
        channel.send("gate", gate="load", phase="start")
        started = time.monotonic()
        with _blame_reference("importing reference.py"):
            reference = _import_file(job.problem.reference, "rooftop_reference")
        models = {s.name: _construct(job, reference, module, s, device) for s in job.shapes}
        channel.send("gate", gate="load", phase="end", ok=True, seconds=time.monotonic() - started,
                     detail="weights copied" if all(m[2] for m in models.values()) else
                     "parameter names differ from the reference: constructed under the same seed")
        gate = "correctness"
        channel.send("gate", gate="correctness", phase="start")
        started = time.monotonic()
        inputs = {}
        for shape in job.shapes:
            channel.send("progress", gate=gate, shape=shape.name)
            checks, inputs[shape.name] = _check_shape(job, reference, models[shape.name], shape, device)
            channel.send("checks", shape=shape.name, checks=checks)
            failed = next((c for c in checks if not c["ok"]), None)
            if failed:
                raise GateFailure(failed.get("status", "incorrect"), f"shape '{shape.name}' "
                                  f"({_params(shape.params)}), seed {failed['seed']}: {failed['message']}")
        channel.send("gate", gate="correctness", phase="end", ok=True, seconds=time.monotonic() - started)
        if job.timing is not None:
            gate = "timing"
            channel.send("gate", gate="timing", phase="start")
            started = time.monotonic()
            for shape in job.shapes:
                channel.send("progress", gate=gate, shape=shape.name)
                ref_model, cand_model, _ = models[shape.name]
                stats = _time_shape(job, ref_model, cand_model, inputs[shape.name], device)
                channel.send("timings", shape=shape.name, **stats)
            channel.send("gate", gate="timing", phase="end", ok=True, seconds=time.monotonic() - started)
        channel.send("done")
        return 0
    except GateFailure as failure:
        channel.send("gate", gate=gate, phase="end", ok=False, status=failure.status, messages=failure.messages,
                     cached=failure.cached)
    except Exception as exc:  # candidate code raised where no gate expected it
        status = _status_for_exception(exc, gate)
        channel.send("gate", gate=gate, phase="end", ok=False, status=status, messages=[_describe(exc, job)])
    channel.send("done")
    return 0


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


def _set_precision(job: EvalJob) -> None:
    """fp32 means IEEE fp32: no TF32 in cuBLAS or cuDNN (cuDNN allows it by default), unless the
    problem says tf32. The reference, its eager timing and the candidate all see the same setting."""
    import torch

    spec = job.problem.spec
    tf32 = "tfloat32" in (spec.dtype, spec.peak_dtype)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


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
def _construct(job: EvalJob, reference: ModuleType, module: ModuleType, shape: Any, device: Any) -> tuple:
    import torch

    from rooftop.check.inputs import clone, init_inputs

    cls = getattr(module, "ModelNew", None) or getattr(module, "Model", None)
    if cls is None:
        raise GateFailure("init_error", "the solution defines neither ModelNew nor Model")
    with _blame_reference("get_init_inputs"):
        init = init_inputs(reference, job.problem.spec, shape)
    torch.manual_seed(job.weights_seed)
    with _blame_reference("constructing the reference Model"):
        ref_model = reference.Model(*clone(init))
    torch.manual_seed(job.weights_seed)
    try:
        cand_model = cls(*clone(init))
    except Exception as exc:
        raise GateFailure("init_error", f"constructing {cls.__name__} for shape '{shape.name}' failed: "
                          + _describe(exc, job))
    copied = False
    if isinstance(cand_model, torch.nn.Module):
        ref_state, cand_state = ref_model.state_dict(), cand_model.state_dict()
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
    with _blame_reference("moving the reference to the device"):
        ref_model = ref_model.to(device).eval()
    return ref_model, cand_model, copied or not ref_model.state_dict()


# -- correctness ------------------------------------------------------------------------------
def _check_shape(job: EvalJob, reference: ModuleType, models: tuple, shape: Any, device: Any) -> tuple[list, list]:
    import torch

    from rooftop.check.compare import compare_outputs, error_figures, storage_overlaps
    from rooftop.check.inputs import clone, make_inputs, modified_inputs, tensors
    from rooftop.integrity.audit import audit_call

    ref_model, cand_model, _ = models
    checks, pool = [], []
    for seed in job.seeds[shape.name]:
        with _blame_reference("get_inputs"):
            inputs = make_inputs(reference, job.problem.spec, shape, seed, device)
        pool.append(inputs)
        with torch.no_grad():
            with _blame_reference("the reference forward"):
                expected = ref_model(*clone(inputs))
            cand_inputs = clone(inputs)
            try:
                got, findings = audit_call(lambda: cand_model(*cand_inputs),
                                           count_compute=not job.problem.spec.policy.allow_torch_ops)
                _synchronize(device)
            except Exception as exc:
                checks.append({"seed": seed, "ok": False, "status": _status_for_exception(exc, "correctness"),
                               "message": _describe(exc, job)})
                break
            if findings:
                checks.append({"seed": seed, "ok": False, "status": "rejected", "message": "; ".join(findings)})
                break
        check: dict[str, Any] = {"seed": seed, "ok": True, "message": ""}
        changed = modified_inputs(inputs, cand_inputs)
        aliased = [i for i, x in enumerate(cand_inputs) if isinstance(x, torch.Tensor)
                   and any(storage_overlaps(o, x) for o in tensors(got))]
        mismatches = compare_outputs(job.problem.spec, expected, got, cand_inputs)
        if changed:
            check.update(ok=False, message=f"the candidate modified input(s) {changed} in place")
        elif aliased:
            check.update(ok=False, message=f"an output shares storage with input(s) {aliased}")
        elif mismatches:
            first = mismatches[0]
            tol = first.tolerance
            check.update(ok=False, output=first.output, message=f"{first.output}: {first.message}",
                         max_abs_error=first.max_abs_error, max_rel_error=first.max_rel_error,
                         norm_rel_error=first.norm_rel_error,
                         atol=tol.atol if tol else None, rtol=tol.rtol if tol else None,
                         norm_bound=tol.norm_bound if tol else None)
        else:
            check.update(error_figures(expected, got))
        checks.append(check)
        if not check["ok"]:
            break
    return checks, pool


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- timing -----------------------------------------------------------------------------------
def _time_shape(job: EvalJob, ref_model: Any, cand_model: Any, pool: list, device: Any) -> dict[str, Any]:
    import torch

    from rooftop.measure.timer import CpuClock, CudaEventClock, measure

    clock = CudaEventClock(device) if device.type == "cuda" else CpuClock()
    out = {}
    with torch.no_grad():
        for label, model in (("reference", ref_model), ("candidate", cand_model)):
            calls = [(lambda m=model, x=x: m(*x)) for x in pool]
            try:
                out[label] = measure(calls, clock, job.timing).model_dump()  # type: ignore[arg-type]
            except Exception as exc:
                status = "internal_error" if label == "reference" else _status_for_exception(exc, "timing")
                raise GateFailure(status, f"while timing the {label}: " + _describe(exc, job))
    return out


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
