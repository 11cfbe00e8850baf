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


def test_threads_that_ask_at_once_all_see_every_implementation(tmp_path, monkeypatch):
    """The agent runner's threads looked up transcript formats at once, and one was told that
    codex_rollout did not exist while another thread was still importing the parsers."""
    import threading

    package = tmp_path / "slow_kinds"
    package.mkdir()
    (package / "__init__.py").write_text("from rooftop.plugins import Registry\nKINDS = Registry('kind', __name__)\n")
    for name in ("a", "b", "c"):
        (package / f"{name}.py").write_text(f"import time\nfrom slow_kinds import KINDS\ntime.sleep(0.2)\n"
                                            f"KINDS.add('{name}', '{name}')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        from slow_kinds import KINDS  # type: ignore[import-not-found]

        seen: list[list[str]] = []
        threads = [threading.Thread(target=lambda: seen.append(KINDS.names())) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == [["a", "b", "c"]] * 4
    finally:
        for name in [m for m in sys.modules if m == "slow_kinds" or m.startswith("slow_kinds.")]:
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
