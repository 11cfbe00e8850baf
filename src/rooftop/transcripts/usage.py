"""Token usage: the one model of what a model call, a transcript or an agent run consumed.

It lives at the bottom, beside the transcript parsers that count it, so that every layer above
(the agent adapters, the run record, the store, the viewer) speaks of usage in the same terms and
no layer sums a transcript's usage again. Its field names are those `run.json`, the store's
`agent_runs` and rooftop's own agent transcript have always written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel

# the largest figures believed from an agent: a 45-minute session reads tens of millions of tokens
# (cached ones included) and costs tens of dollars; past these a figure is not a count but a forgery
LIMITS = {"input_tokens": 10**9, "output_tokens": 10**9, "cache_read_tokens": 10**9, "cache_write_tokens": 10**9,
          "reasoning_tokens": 10**9, "cost_usd": 10_000.0, "turns": 100_000}
FIGURES = tuple(LIMITS)  # the fields that are counts (or an amount), summed by `+`

Origin = Literal["reported", "counted"]


class Usage(BaseModel):
    """Tokens, cost and model calls of one model call, one transcript or one agent run (None: not
    reported). `input_tokens` counts the whole prompt, its cached part included (the OpenAI
    convention); `cache_read_tokens` and `cache_write_tokens` say how much was read from and written
    to the provider's cache. `output_tokens` counts all the model generated, its reasoning included
    (a format that counts thoughts apart, as Gemini's does, has them added); `reasoning_tokens` says
    how much of it was reasoning, where the format tells.

    On an agent run, `origin` says where the figures come from: `reported`, the CLI's own totals as
    it printed them; `counted`, summed by rooftop from the per-call records the CLI wrote. Either way
    they are the agent's word, checked (`checked`): a figure that is no count, or past `LIMITS`, is
    dropped and named in `rejected`."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None  # model calls (steps) where the transcript counts them
    origin: Origin | None = None
    rejected: list[str] = []  # figures dropped by `checked`: "cost_usd=-100.0"

    def __add__(self, other: Usage) -> Usage:
        """Figure-wise sum, keeping None only where neither side reported the figure."""
        def plus(a: float | None, b: float | None) -> float | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return Usage.model_validate({name: plus(getattr(self, name), getattr(other, name)) for name in FIGURES})

    def checked(self, origin: Origin) -> Usage:
        """This usage with every figure outside [0, its limit] dropped and named, and its origin."""
        kept = self.model_copy(update={"origin": origin if self.reported else None, "rejected": list(self.rejected)})
        for name, limit in LIMITS.items():
            value = getattr(kept, name)
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value)
                                          and 0 <= value < limit):
                kept.rejected.append(f"{name}={value!r}")
                setattr(kept, name, None)
        return kept

    @property
    def reported(self) -> bool:
        return any(getattr(self, name) is not None for name in FIGURES)


def usage_sum(usages: Iterable[Usage | None]) -> Usage:
    """The sum of the usages given (None ones skipped); an empty Usage where there are none."""
    out = Usage()
    for usage in usages:
        if usage is not None:
            out = out + usage
    return out
