"""The evaluation's events as a person sees them: a live line on a terminal, one line per gate
when the output is piped (so a log shows what ran and what it was waiting on), and for a run of
many evaluations (demo, batch, selfcheck, batch-kb) one line per finished one on a piped stdout."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import TaskID

from rooftop.cli.common import err, progress_bar
from rooftop.errors import on_one_line
from rooftop.vocabulary import DeviceWait, Event, EventSink, GateFinished, GateStarted, Samples, ShapeDone


class EventDisplay:
    """One sink for the events of a run of one or more evaluations."""

    def __init__(self, console: Console, live: bool, total: int | None = None, silent: bool = False) -> None:
        self.console, self.live = console, live
        self.silent = silent  # shows nothing: with --json the output is the document alone
        self.label = ""
        self._started = time.monotonic()
        self._bar = progress_bar(live)
        self._task: TaskID = self._bar.add_task("rooftop", total=total)

    def start(self, label: str) -> EventSink:
        """The sink for the next evaluation, named `label` in what is shown."""
        self.label, self._started = label, time.monotonic()
        self._bar.update(self._task, description=label)
        return self.show

    def elapsed(self) -> float:
        """Seconds since the current evaluation started."""
        return time.monotonic() - self._started

    def advance(self) -> None:
        self._bar.advance(self._task)

    def show(self, event: Event) -> None:
        if self.silent:
            return
        if isinstance(event, GateStarted):
            self._now(f"{event.gate.value}", self._limit(event))
        elif isinstance(event, ShapeDone) and self.live:
            self._now(f"{event.gate.value} {event.shape} done ({event.index}/{event.of})")
        elif isinstance(event, Samples) and self.live:
            count = "warming up" if event.warming else f"{event.kept} samples"
            self._now(f"{event.gate.value} {event.shape}: {count}")
        elif isinstance(event, DeviceWait):
            self._now(f"waiting for {event.device}, held by another evaluation" +
                      (f" ({event.holder})" if event.holder else ""))
        elif isinstance(event, GateFinished) and not event.ok and not self.live:
            status = event.status.value if event.status else "failed"
            self.console.print(f"{self.label}: {event.gate.value} failed after {event.seconds:.1f} s ({status})",
                               highlight=False, markup=False, soft_wrap=True)

    def _now(self, what: str, extra: str = "") -> None:
        if self.live:
            self._bar.update(self._task, description=f"{self.label}: {what}")
        else:
            self.console.print(f"{self.label}: {what}{extra}", highlight=False, markup=False, soft_wrap=True)

    def _limit(self, event: GateStarted) -> str:
        parts = [f"{event.shapes} shape{'s' if event.shapes != 1 else ''}"] if event.shapes else []
        if event.timeout:
            parts.append(f"limit {event.timeout:.3g} s{' each' if event.shapes else ''}")
        return f" ({', '.join(parts)})" if parts else ""


@contextmanager
def event_display(enabled: bool, total: int | None = None) -> Iterator[EventDisplay]:
    """A live display on a terminal's stderr, plain lines when stderr is piped, nothing when off."""
    live = enabled and sys.stderr.isatty()
    display = EventDisplay(err, live, total, silent=not enabled)
    with display._bar:
        yield display


NOTE_LIMIT = 120  # characters of a reason on a job's line


class VerdictLines:
    """One line per finished evaluation (or batch job), for a log (CI, `| tee`, `> file`) that
    would otherwise show nothing of a long run until its final table. Writes to the stream it was
    given, not to `sys.stdout` at the time of writing: a live display on a terminal's stderr
    redirects that to itself."""

    def __init__(self, stream: TextIO | None, total: int) -> None:
        self._stream, self._done = stream, 0
        self.total = total  # what the lines count up to (a caller may set it once it knows)

    @property
    def shown(self) -> bool:
        return self._stream is not None

    def finished(self, name: str, status: str, note: str = "", seconds: float | None = None) -> None:
        """`[done/total] name: status (note) in S s`; the note says what the status alone does not."""
        self._done += 1
        if self._stream is None:
            return
        self._stream.write(f"[{self._done}/{self.total}] {name}: {status}" + (f" ({note})" if note else "")
                           + (f" in {seconds:.1f} s" if seconds is not None else "") + "\n")
        self._stream.flush()


def verdict_lines(enabled: bool, total: int) -> VerdictLines:
    """Lines on stdout when it is not a terminal (a terminal gets the live display and the table
    alone); none when off (--json: stdout is the document alone). Call it before the live display
    starts."""
    stream = sys.stdout if enabled and not sys.stdout.isatty() else None
    return VerdictLines(stream, total)


def expected_note(status: str, expected: str | None) -> str:
    """How a status compares with the one a deck expects (the demo's note)."""
    if expected is None:
        return "no expected status"
    return "as expected" if expected == status else f"expected {expected}"


def outcome_note(speedup: float | None, reason: str = "") -> str:
    """The speedup where there is one, else the reason, cut to one short line."""
    return f"speedup {speedup:.3f}x" if speedup is not None else on_one_line(reason, NOTE_LIMIT)
