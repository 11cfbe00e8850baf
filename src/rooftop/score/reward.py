"""Named reward functions: a verdict in, a number out. Register one with `@reward_fn("name")`.

A correct verdict's speedup is one of three things (`reward_speedup`):
- measured: every timed shape has a trusted paired speedup; the reward uses their geometric mean;
- not timed: no shape was timed (timing off), or a kernel-to-kernel task has no stored starter
  baseline on this platform. The same holds for every candidate judged with those settings on that
  platform, so the speedup term is neutral (None: `default` gives 0, `kevin` 0.3);
- unmeasured: timing ran, but some timed shape's times are not a measurement (flagged
  `contention`, or any other flag of `verdict.UNTRUSTED_TIMING`, or no paired speedup). This
  happens to one run and not the next, and a candidate can provoke it (a noisy kernel widens the
  spread of its own paired ratios), so it must never pay: the speedup counts as 0, the infimum of
  a measured one, and the verdict gets the lowest reward a correct kernel can approach (`default`
  -1, `kevin` 0.3), never more than the same kernel measured at its slowest.
Every reward function reads the speedup through `reward_speedup`, so the rule holds for each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rooftop.plugins import Registry

if TYPE_CHECKING:
    from rooftop.verdict import Verdict

RewardFn = Callable[["Verdict"], "float | None"]
REWARDS: Registry[RewardFn] = Registry("reward function")

# OpenReward-style penalties for each failing status.
FAILURE_REWARD = {
    "incorrect": -2.0,
    "rejected": -2.0,
    "runtime_error": -3.0,
    "init_error": -4.0,
    "compile_error": -5.0,
    "internal_error": -6.0,
    "timeout": -7.0,
}
UNMEASURED_SPEEDUP = 0.0  # what an unmeasured timing counts as: no measured speedup is lower


def reward_fn(name: str) -> Callable[[RewardFn], RewardFn]:
    return REWARDS.register(name)


def headline_speedup(verdict: Verdict) -> float | None:
    """The speedup a verdict is judged by: over eager (paired, per call), or for a kernel-to-kernel
    task over its starter's stored baseline; None where it was not measured."""
    if verdict.baseline == "starter":
        return verdict.summary.geomean_speedups.get("starter")
    return verdict.summary.geomean_speedup


def unmeasured(verdict: Verdict) -> dict[str, str]:
    """The timed shapes whose times the reward cannot use, each with why; empty when no shape was
    timed or every timed one was measured."""
    if not any(r.candidate is not None for r in verdict.shapes):
        return {}
    found = {}
    for r in verdict.shapes:
        why = r.untrusted or (None if r.candidate is not None and r.speedup is not None else "no paired speedup")
        if why:
            found[r.shape] = why
    return found


def unmeasured_note(verdict: Verdict) -> str | None:
    """`not measured on 1 of 2 shapes (machine shared)`, naming no shape; None when all were measured."""
    missed = unmeasured(verdict)
    if not missed:
        return None
    return f"not measured on {len(missed)} of {len(verdict.shapes)} shapes ({', '.join(sorted(set(missed.values())))})"


def reward_speedup(verdict: Verdict) -> float | None:
    """The speedup the reward counts: the headline one when measured, UNMEASURED_SPEEDUP when
    timing ran but some shape was not measured, None when it was not timed (see the module's doc)."""
    if unmeasured(verdict):
        return UNMEASURED_SPEEDUP
    return headline_speedup(verdict)


@reward_fn("default")
def speedup_minus_one(verdict: Verdict) -> float | None:
    """correct: geometric mean over shapes of (baseline median / candidate median) - 1, the baseline
    being eager (or a kernel-to-kernel task's starter).

    A correct verdict without timings (timing skipped) earns 0, one whose timing was not measured
    -1 (see the module's doc); `needs_gpu` is not graded (None).
    """
    status = verdict.status.value
    if status == "correct":
        speedup = reward_speedup(verdict)
        return 0.0 if speedup is None else speedup - 1.0
    return FAILURE_REWARD.get(status)


@reward_fn("kevin")
def correct_plus_speedup(verdict: Verdict) -> float | None:
    """0.3 for a correct kernel plus its speedup over eager, capped at 10 (0 when incorrect): the
    shaping of Kevin-style multi-turn RL, where a slow correct kernel still beats a broken one. Not
    timed or not measured, the speedup term is 0."""
    if verdict.status.value == "needs_gpu":
        return None
    if verdict.status.value != "correct":
        return 0.0
    speedup = reward_speedup(verdict)
    return 0.3 + min(speedup if speedup is not None else 0.0, 10.0)


def compute_reward(verdict: Verdict, name: str = "default") -> float | None:
    return REWARDS[name](verdict)
