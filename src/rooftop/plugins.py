"""Named implementations of one kind, registered and found one way: agent adapters, transcript
parsers, rewards, static rules, service backends.

A kind is a `Registry`. An implementation registers itself with `add(name, item)` or the
`register(name)` decorator. A registry given a package imports that package's modules (those not
starting with `_`) the first time it is asked, so a new adapter or transcript format is one new
module in its package and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

T = TypeVar("T")


class UnknownName(KeyError):
    """A name no implementation of the kind was registered under; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T]):
    """A read-only mapping of name to implementation (loading its package's modules on first use),
    with `add`, `register` and `remove` to change it."""

    def __init__(self, kind: str, package: str | None = None) -> None:
        self.kind, self.package = kind, package
        self._items: dict[str, T] = {}
        self._loaded = package is None
        self._lock = threading.RLock()

    def add(self, name: str, item: T) -> T:
        if self._items.get(name, item) is not item:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        self._items[name] = item
        return item

    def register(self, name: str) -> Callable[[T], T]:
        """`add` as a decorator."""
        def decorate(item: T) -> T:
            return self.add(name, item)
        return decorate

    def remove(self, name: str) -> None:
        """Withdraw an implementation (one a test registered)."""
        self._items.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._all())

    def __getitem__(self, name: str) -> T:
        """The implementation of `name`; `UnknownName` (a KeyError), which lists the known names, if none."""
        items = self._all()
        if name not in items:
            raise UnknownName(f"unknown {self.kind} '{name}' (known: {', '.join(sorted(items)) or 'none'})")
        return items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._all()))

    def __len__(self) -> int:
        return len(self._all())

    def _all(self) -> dict[str, T]:
        """Every implementation by name, in the order registered: the package's modules are all
        imported first, once, while other threads asking wait (a thread that saw a half-loaded
        registry would be told a format or an adapter does not exist)."""
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    assert self.package is not None
                    for info in pkgutil.iter_modules(importlib.import_module(self.package).__path__):
                        if not info.name.startswith("_"):
                            importlib.import_module(f"{self.package}.{info.name}")
                    self._loaded = True
        return self._items
