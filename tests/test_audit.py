"""Runtime audits catch what the static rules cannot read."""

import threading

import torch
from conftest import run

from rooftop.integrity.audit import audit_call


def test_dispatch_counter_sees_compute_and_ignores_allocation():
    x = torch.randn(8)
    _, findings = audit_call(lambda: torch.empty_like(x).copy_(x).view(2, 4), count_compute=True)
    assert findings == []
    _, findings = audit_call(lambda: torch.mm(x.view(2, 4), x.view(4, 2)), count_compute=True)
    assert findings and "mm x1" in findings[0]


def test_lingering_threads_are_found():
    gate = threading.Event()
    _, findings = audit_call(lambda: threading.Thread(target=gate.wait, daemon=True).start(), count_compute=False)
    gate.set()
    assert findings and findings[0].startswith("[thread]")


def test_torch_compute_through_an_alias_is_rejected_at_run_time():
    v = run("scale_kernels_only", "hidden_torch_op.py")
    assert v.status.value == "rejected" and "[torch-compute]" in v.messages[0] and "mul" in v.messages[0]


def test_triton_kernels_pass_the_compute_audit():
    v = run("scale_kernels_only", "triton_scale.py")
    assert v.status.value == "correct", v.messages


def test_background_thread_is_rejected():
    v = run("scale", "background_thread.py")
    assert v.status.value == "rejected" and "[thread]" in v.messages[0]
