"""The agent CLIs rooftop can run: one module each, found here by name.

A module is an adapter when it defines `ADAPTER`, an instance of `base.Adapter`; adding an agent
CLI is adding one module. `adapter(name)` is the registry's one entry point.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from rooftop.agents.adapters.base import Adapter, Launch, Usage
from rooftop.errors import UserError

__all__ = ["Adapter", "Launch", "Usage", "adapter", "adapter_names"]


@cache
def _registry() -> dict[str, Adapter]:
    found: dict[str, Adapter] = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name == "base":
            continue
        instance = getattr(importlib.import_module(f"{__name__}.{module.name}"), "ADAPTER", None)
        if isinstance(instance, Adapter):
            found[instance.name] = instance
    return found


def adapter_names() -> list[str]:
    return sorted(_registry())


def adapter(name: str) -> Adapter:
    try:
        return _registry()[name]
    except KeyError:
        raise UserError(f"adapter: unknown agent adapter '{name}' (known: {', '.join(adapter_names())})") from None
