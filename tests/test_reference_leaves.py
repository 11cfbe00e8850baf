"""A reference much slower than the candidate leaves the timed calls once its own samples stop it;
the calls after that are checked on a secret draw made after each reply, and on every call faster
than any the reference was paired with (pipeline/trusted/timing.py)."""

import textwrap

import pytest
from conftest import run

from rooftop.measure.stopping import TimingPolicy

pytestmark = pytest.mark.quiet  # every test here turns on when the reference's samples stop

# the reference (10 ms a call) stops after 5 samples; the candidate's short calls run on for 0.3 s
POLICY = TimingPolicy(warmup_calls=1, warmup_seconds=0.0, min_samples=3, min_seconds=0.05, min_wall_seconds=0.3,
                      target_rse=None, max_samples=80, max_seconds=10.0, max_wall_seconds=30.0)
HONEST_CALLS = 3 + 1 + 8  # correctness seeds, warm-up, and more than the reference's paired calls


def slow_wrong(honest: int = HONEST_CALLS) -> str:
    """Wrong once the reference has left (after `honest` calls), and slower than its honest calls,
    so that only the secret draw can find it."""
    return f"""\
    if self.calls > {honest}:
        time.sleep(0.003)
        return x * self.alpha + 1.0
    time.sleep(0.001)
    return x * self.alpha
    """


SLOW_WRONG = slow_wrong()
# the draw checks one call in four: the wrong calls must be many for it never to miss. Under POLICY
# the candidate's 3 ms wrong calls reach the measured-time minimum after about a dozen (0.75 ** 13,
# a miss in 40 runs); with 0.2 s of it (and a wall minimum that does not stop it first) they number
# about 55 (0.75 ** 55, one in six million). The reference (10 ms a call) then leaves after 20
# paired calls, so the wrong ones start later
LONG_POLICY = POLICY.model_copy(update={"min_seconds": 0.2, "min_wall_seconds": 2.0})
LONG_HONEST = 3 + 1 + 24


def _solution(tmp_path, body: str):
    path = tmp_path / "solution.py"
    path.write_text(textwrap.dedent("""\
        import time
        import torch.nn as nn


        class ModelNew(nn.Module):
            def __init__(self, alpha):
                super().__init__()
                self.alpha = alpha
                self.calls = 0

            def forward(self, x):
                self.calls += 1
        """) + textwrap.indent(textwrap.dedent(body), " " * 8))
    return path


def test_the_reference_leaves_once_timed_and_the_speedup_uses_the_pairs(tmp_path):
    v = run("slow_reference", _solution(tmp_path, "return x * self.alpha\n"), timing_policy=POLICY)
    assert v.status.value == "correct", v.messages
    [shape] = v.shapes
    assert shape.reference.n == 5 and shape.reference.stopped_by == "min_samples"
    assert shape.candidate.n > 2 * shape.reference.n
    assert shape.timed_calls >= shape.candidate.n and 0 < shape.timed_checks < shape.timed_calls
    assert shape.speedup > 10  # 10 ms of reference over a multiplication, over the five pairs
    assert shape.reference.median >= 0.01


def test_a_reference_as_fast_as_the_candidate_stays_on_every_call():
    v = run("scale", "good.py", timing_policy=POLICY)
    assert v.status.value == "correct", v.messages
    [shape] = v.shapes
    assert shape.timed_checks == shape.timed_calls


def test_wrong_outputs_after_the_reference_left_are_caught_by_the_draw(tmp_path):
    v = run("slow_reference", _solution(tmp_path, slow_wrong(LONG_HONEST)), timing_policy=LONG_POLICY)
    assert v.status.value == "incorrect" and v.failed_gate.value == "timing"
    assert "[timed-output]" in v.messages[0] and "after the correctness checks" in v.messages[0]


def test_a_call_faster_than_any_paired_one_is_always_checked(tmp_path, monkeypatch):
    import rooftop.pipeline.trusted.timing as timing

    monkeypatch.setattr(timing, "CHECK_SHARE", 10**9)  # no draw: only the fast-call rule is left
    body = f"""\
        if self.calls > {HONEST_CALLS}:
            return x.new_zeros(x.shape)  # skips the work: faster than every honest call
        time.sleep(0.002)
        return x * self.alpha
        """
    v = run("slow_reference", _solution(tmp_path, body), timing_policy=POLICY)
    assert v.status.value == "incorrect" and "[timed-output]" in v.messages[0]


def test_without_the_draw_a_slow_wrong_call_is_not_compared(tmp_path, monkeypatch):
    """The control of the two above: the draw, not some other check, is what catches slow wrong calls."""
    import rooftop.pipeline.trusted.timing as timing

    monkeypatch.setattr(timing, "CHECK_SHARE", 10**9)
    v = run("slow_reference", _solution(tmp_path, SLOW_WRONG), timing_policy=POLICY)
    assert v.status.value == "correct", v.messages
    [shape] = v.shapes
    assert shape.timed_checks < shape.timed_calls


@pytest.mark.gpu
def test_on_the_gpu_the_reference_leaves_and_late_wrong_outputs_are_caught(tmp_path):
    """The GPU's policy, but with 2 s of wall time for a short kernel (under the usual 0.5 s both
    sides stop together here): the 10 ms reference stops after its 0.5 s of measured time, the
    candidate's 10 us calls run on; wrong outputs from then on fail the gate."""
    policy = TimingPolicy(min_wall_seconds=2.0)
    v = run("slow_reference", _solution(tmp_path, "return x * self.alpha\n"), device="cuda", timing_policy=policy)
    assert v.status.value == "correct", v.messages
    [shape] = v.shapes
    assert shape.reference.n < shape.candidate.n and shape.timed_checks < shape.timed_calls
    assert shape.speedup_low <= shape.speedup <= shape.speedup_high
    body = """\
        if self.calls > 200:
            return x * self.alpha + 1.0
        return x * self.alpha
        """
    v = run("slow_reference", _solution(tmp_path, body), device="cuda", timing_policy=policy)
    assert v.status.value == "incorrect" and "[timed-output]" in v.messages[0], v.messages
