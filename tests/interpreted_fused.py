"""The fused comparison kernels (check/fused.py) against the torch passes, under Triton's
interpreter on CPU tensors. Not collected on its own: test_compare.py runs it in a process that
has TRITON_INTERPRET=1 before Triton is imported."""

import os

import pytest
import torch
from test_compare import _decides_as_the_float64_pass, _screen_cases


@pytest.fixture
def fused_interpreted(monkeypatch):
    """The fused kernels run by Triton's interpreter on CPU tensors, and used for every tensor."""
    from rooftop.check import fused

    assert os.environ.get("TRITON_INTERPRET") == "1", "run by test_compare.py with Triton's interpreter on"
    monkeypatch.setattr(fused, "wanted", lambda *tensors: True)
    return fused


def test_fused_screen_decides_exactly_as_the_float64_pass(monkeypatch, fused_interpreted):
    """The one-pass kernel that screens gigabyte outputs on the GPU, over the same cases (one in
    four, under Triton's interpreter), and it settles the passing ones itself."""
    calls = []
    screen = fused_interpreted.screen
    monkeypatch.setattr(fused_interpreted, "screen", lambda *a, **k: calls.append(1) or screen(*a, **k))
    _decides_as_the_float64_pass(monkeypatch, _screen_cases()[::4])
    assert len(calls) == 64


def test_fused_figures_are_the_float64_figures(fused_interpreted):
    """Figures over several programs and a ragged last tile, with outliers, NaN and Inf counted apart."""
    import rooftop.check.compare as compare

    gen = torch.Generator().manual_seed(3)
    ref = torch.randn(5 * fused_interpreted.BLOCK + 77, generator=gen)
    got = ref + 1e-4 * torch.randn(ref.numel(), generator=gen)
    got[5] += 0.5
    exact = compare._measure(ref, got, None)
    max_abs, max_rel, diff_sq, ref_sq, over, unfinite = fused_interpreted.screen(ref, got, 1e-3, 1e-3, 1.0,
                                                                                 programs=3)
    assert (max_abs, max_rel) == (exact.max_abs, exact.max_rel)
    assert abs(diff_sq - exact.diff_sq) <= 1e-12 * exact.diff_sq and abs(ref_sq - exact.ref_sq) <= 1e-12 * exact.ref_sq
    assert (over, unfinite) == (int(((got - ref).abs() > 1e-3 + 1e-3 * ref.abs()).sum()), 0)
    got[7], got[9] = float("nan"), float("inf")
    assert fused_interpreted.screen(ref, got, 1e-3, 1e-3, 1.0, programs=2)[5] == 2


def test_fused_digest_is_the_fingerprint_bit_for_bit(monkeypatch, fused_interpreted):
    """The one-pass digest of gigabyte outputs gives the torch fingerprint's very numbers, across
    chunk boundaries (made small here) and whatever the words' signs."""
    import rooftop.check.compare as compare

    gen = torch.Generator().manual_seed(5)
    words = torch.randint(-2**31, 2**31 - 1, (3 * fused_interpreted.BLOCK + 5,), dtype=torch.int32, generator=gen)
    monkeypatch.setattr(compare, "CHUNK", 1000)
    for value in (words, words.view(torch.float32), words[:-1].view(torch.float16).reshape(2, -1)):
        fast = compare.fingerprint(value)
        with monkeypatch.context() as m:
            m.setattr(fused_interpreted, "wanted", lambda *tensors: False)
            assert compare.fingerprint(value) == fast
