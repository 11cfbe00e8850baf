"""The agent CLIs rooftop can run: one module each, found here by name.

An adapter module registers its `base.Adapter` with `ADAPTERS.add` (rooftop/plugins.py); adding
an agent CLI is adding one module. `adapter(name)` is the registry's one entry point.
"""

from __future__ import annotations

from rooftop.agents.adapters.base import Adapter, Launch
from rooftop.errors import UserError
from rooftop.plugins import Registry, UnknownName

__all__ = ["ADAPTERS", "Adapter", "Launch", "adapter", "adapter_names"]


ADAPTERS: Registry[Adapter] = Registry("agent adapter", __name__)


def adapter_names() -> list[str]:
    return ADAPTERS.names()


def adapter(name: str) -> Adapter:
    try:
        return ADAPTERS[name]
    except UnknownName as exc:
        raise UserError(f"adapter: {exc}") from None
