"""Many evaluations in one go, each through `rooftop.api.run_evaluation`: a deck's references
checked against themselves (selfcheck), a run of KernelBench generations scored (kernelbench)."""

from __future__ import annotations

from typing import Protocol

from rooftop.vocabulary import EventSink, ignore


class Progress(Protocol):
    """What a caller watching a batch gets told: each evaluation as it starts, and when it is done."""

    def start(self, label: str) -> EventSink: ...

    def advance(self) -> None: ...


class Quiet:
    """The progress of a batch nobody watches."""

    def start(self, label: str) -> EventSink:
        return ignore

    def advance(self) -> None:
        pass
