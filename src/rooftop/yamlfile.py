"""Reading the YAML files rooftop ships and problems carry, through libyaml when PyYAML has it:
the pure-Python parser takes a fifth of a second over the hardware datasheet, in every process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the same safe subset, parsed in C


def read_yaml(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_LOADER)
