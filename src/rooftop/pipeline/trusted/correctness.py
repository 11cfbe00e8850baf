"""The correctness gate's judgement of one shape: several seeds, every output compared whole."""

from __future__ import annotations

from typing import Any

import torch

from rooftop.check.compare import Mismatch, compare_outputs, error_figures, fingerprint
from rooftop.check.inputs import release_cached
from rooftop.check.probe import check_probes
from rooftop.pipeline.trusted.calls import call
from rooftop.pipeline.trusted.context import Evaluation
from rooftop.pipeline.trusted.outcomes import ShapeChecked
from rooftop.pipeline.wire import CallReply
from rooftop.problem.spec import Shape
from rooftop.verdict import GateFailed, SeedCheck, Status


def check_shape(ev: Evaluation, shape: Shape, result: ShapeChecked) -> None:
    previous: list[tuple[Any, Any]] = []
    for _ in range(ev.settings.seeds_per_shape):
        seed = ev.calls.seeds.next()
        ev.calls.checked_seeds.setdefault(shape.name, []).append(seed)
        called = call(ev, shape, full=True, audit=True, seed=seed)
        check = judge(ev, seed, called.reply, called.expected, called.inputs, previous)
        del called  # before the next seed's inputs and outputs are made (the memory plan counts one set)
        if ev.setup.reference is not None:
            release_cached(ev.setup.reference.device)
        result.checks.append(check)
        if not check.ok:
            result.correct = False
            raise GateFailed(Status.incorrect, f"shape '{shape.name}' ({_params(shape.params)}), seed {seed}: "
                             f"{check.message}")
    result.correct = True


def judge(ev: Evaluation, seed: int, reply: CallReply, expected: Any, inputs: list,
          previous: list[tuple[Any, Any]]) -> SeedCheck:
    """One seed's outputs against the expected ones: whole outputs when they landed, else the probes.
    `previous` holds fingerprints of earlier seeds' outputs, not the outputs (they may be gigabytes)."""
    check = SeedCheck(seed=seed, ok=True)
    got = _landed_outputs(ev, reply, expected)
    if reply.changed_inputs:
        check.ok, check.message = False, f"the candidate modified input(s) {reply.changed_inputs} in place"
    elif reply.aliased_inputs:
        check.ok, check.message = False, f"an output shares storage with input(s) {reply.aliased_inputs}"
    else:
        spec = ev.problem.spec
        figures: dict[str, float | None] = {}
        mismatches = compare_outputs(spec, expected, got, inputs, figures) if got is not None \
            else check_probes(spec, expected, reply.outputs)
        if mismatches:
            _fill(check, mismatches[0])
            stale = _repeats(got, expected, previous) if got is not None else ""
            if stale:
                check.message = f"[dependence] {stale}; {check.message}"
        elif got is not None:
            for key, value in (figures or error_figures(expected, got)).items():
                setattr(check, key, value)
    if got is not None:
        previous.append(_fingerprints(got, expected))
    return check


def _landed_outputs(ev: Evaluation, reply: CallReply, expected: Any) -> Any:
    if reply.landed is None or ev.setup.landing is None:
        return None
    try:
        got = ev.setup.landing.read(reply.landed)
    except ValueError as exc:
        raise GateFailed(Status.rejected, f"[protocol] the outputs are not what the reply describes: {exc}")
    except (RuntimeError, OSError) as exc:
        raise GateFailed(Status.internal_error, f"[harness] copying the outputs out of shared memory failed: {exc}")
    return got[0] if len(got) == 1 and not isinstance(expected, (list, tuple)) else got


def _fingerprints(got: Any, expected: Any) -> tuple[Any, Any]:
    meta = any(isinstance(t, torch.Tensor) and t.is_meta for t in (got if isinstance(got, list) else [got]))
    return (None if meta else fingerprint(got)), fingerprint(expected)


def _fill(check: SeedCheck, mismatch: Mismatch) -> None:
    tol = mismatch.tolerance
    check.ok = False
    check.output = mismatch.output
    check.message = f"{mismatch.output}: {mismatch.message}"
    check.max_abs_error, check.max_rel_error = mismatch.max_abs_error, mismatch.max_rel_error
    check.norm_rel_error = mismatch.norm_rel_error
    if tol is not None:
        check.atol, check.rtol, check.norm_bound = tol.atol, tol.rtol, tol.norm_bound


def _repeats(got: Any, expected: Any, previous: list[tuple[Any, Any]]) -> str:
    """When a wrong output is bit for bit an earlier one although the expected outputs differ."""
    got_print, expected_print = _fingerprints(got, expected)
    if got_print is None:
        return ""
    for old_got, old_expected in previous:
        if old_got == got_print and old_expected != expected_print:
            return "the output repeated an earlier call's output although the inputs changed (replayed, not computed)"
    return ""


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())
