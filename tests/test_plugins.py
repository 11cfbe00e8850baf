"""One way to register and find implementations of a kind (rooftop/plugins.py): adapters,
transcript parsers, rewards, static rules and service backends all use it."""

from __future__ import annotations

import sys

import pytest

from rooftop.plugins import Registry, UnknownName


def test_a_package_registry_loads_its_modules_once_and_names_what_it_knows(tmp_path, monkeypatch):
    package = tmp_path / "kinds"
    package.mkdir()
    (package / "__init__.py").write_text("from rooftop.plugins import Registry\nKINDS = Registry('kind', __name__)\n")
    (package / "one.py").write_text("from kinds import KINDS\nKINDS.add('one', 1)\n")
    (package / "two.py").write_text("from kinds import KINDS\n\n@KINDS.register('two')\ndef two():\n    return 2\n")
    (package / "_private.py").write_text("raise RuntimeError('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        from kinds import KINDS  # type: ignore[import-not-found]

        assert KINDS.names() == ["one", "two"] and KINDS["one"] == 1 and KINDS["two"]() == 2
        assert "one" in KINDS and len(KINDS) == 2 and dict(KINDS)["one"] == 1
        with pytest.raises(UnknownName, match=r"unknown kind 'three' \(known: one, two\)") as missing:
            KINDS["three"]
        assert isinstance(missing.value, KeyError)
        with pytest.raises(ValueError, match="registered twice"):
            KINDS.add("one", 3)
        KINDS.add("one", KINDS["one"])  # the same item again is no second registration
        KINDS.remove("one")
        assert KINDS.names() == ["two"]
    finally:
        for name in [m for m in sys.modules if m == "kinds" or m.startswith("kinds.")]:
            sys.modules.pop(name)


def test_every_kind_uses_it():
    from rooftop.agents.adapters import ADAPTERS
    from rooftop.integrity.policy import RULES
    from rooftop.score.reward import REWARDS
    from rooftop.service.batch import BACKENDS
    from rooftop.transcripts.parsers import PARSERS

    for registry in (ADAPTERS, RULES, REWARDS, BACKENDS, PARSERS):
        assert isinstance(registry, Registry) and registry.names()
    assert {"claude", "command"} <= set(ADAPTERS) and {"local", "ray"} <= set(BACKENDS)
    assert {"default", "kevin"} <= set(REWARDS) and {"claude", "text"} <= set(PARSERS)
