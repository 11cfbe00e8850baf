"""Named reward functions: a verdict in, a number out. Register one with `@reward_fn("name")`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rooftop.verdict import Verdict

RewardFn = Callable[["Verdict"], "float | None"]
REWARD_FNS: dict[str, RewardFn] = {}

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


def reward_fn(name: str) -> Callable[[RewardFn], RewardFn]:
    def register(fn: RewardFn) -> RewardFn:
        REWARD_FNS[name] = fn
        return fn
    return register


def headline_speedup(verdict: Verdict) -> float | None:
    """The speedup a verdict is judged by: over eager (paired, per call), or for a kernel-to-kernel
    task over its starter's stored baseline; None where it was not measured."""
    if verdict.baseline == "starter":
        return verdict.summary.geomean_speedups.get("starter")
    return verdict.summary.geomean_speedup


@reward_fn("default")
def speedup_minus_one(verdict: Verdict) -> float | None:
    """correct: geometric mean over shapes of (baseline median / candidate median) - 1, the baseline
    being eager (or a kernel-to-kernel task's starter).

    A correct verdict without timings (timing skipped) earns 0; `needs_gpu` is not graded (None).
    """
    status = verdict.status.value
    if status == "correct":
        speedup = headline_speedup(verdict)
        return 0.0 if speedup is None else speedup - 1.0
    return FAILURE_REWARD.get(status)


@reward_fn("kevin")
def correct_plus_speedup(verdict: Verdict) -> float | None:
    """0.3 for a correct kernel plus its speedup over eager, capped at 10 (0 when incorrect): the
    shaping of Kevin-style multi-turn RL, where a slow correct kernel still beats a broken one."""
    if verdict.status.value == "needs_gpu":
        return None
    if verdict.status.value != "correct":
        return 0.0
    speedup = headline_speedup(verdict)
    return 0.3 + min(speedup if speedup is not None else 0.0, 10.0)


def compute_reward(verdict: Verdict, name: str = "default") -> float | None:
    if name not in REWARD_FNS:
        raise KeyError(f"unknown reward function '{name}' (known: {', '.join(sorted(REWARD_FNS))})")
    return REWARD_FNS[name](verdict)
