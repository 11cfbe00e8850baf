"""Decks of problems, addressed by name: `<deck>/<problem>`, where a deck may be nested
(`kernelbench/level1/19_ReLU` is problem `19_ReLU` of deck `kernelbench/level1`).

Two roots hold decks: the bundled one (the repository's `problems/`) and the user's, where
`rooftop import` writes. A problem is any folder with a problem.yaml at least two levels below a
root; a name in both roots is the bundled one.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from rooftop import config
from rooftop.errors import UserError
from rooftop.problem.formats.kernelbench import natural_key
from rooftop.problem.loader import load_problem
from rooftop.problem.spec import Problem
from rooftop.yamlfile import read_yaml


def problems_root() -> Path:
    """The folder holding the bundled decks: $ROOFTOP_PROBLEMS, else the repository's `problems/`."""
    env = config.read(config.PROBLEMS)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "problems"


def user_decks_root() -> Path:
    """The folder holding imported decks: $ROOFTOP_DECKS, else ~/.local/share/rooftop/decks."""
    env = config.read(config.DECKS)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".local" / "share" / "rooftop" / "decks"


def deck_roots() -> list[Path]:
    return [problems_root(), user_decks_root()]


def bundled_names(deck: str | None = None) -> list[str]:
    """Names of the problems in a deck (and the decks nested in it), or in every deck: the bundled
    ones first, then the user's."""
    if deck is not None and not _valid_name(deck):
        return []
    names: list[str] = []
    for root in deck_roots():
        base = root / deck if deck else root
        if not base.is_dir() or (deck and (base / "problem.yaml").is_file()):
            continue  # a problem is not a deck
        names += [folder.relative_to(root).as_posix() for folder in _problem_folders(base)
                  if len(folder.relative_to(root).parts) >= 2]
    return list(dict.fromkeys(names))


def deck_names() -> list[str]:
    """Every deck that directly holds a problem."""
    return list(dict.fromkeys(name.rsplit("/", 1)[0] for name in bundled_names()))


def _problem_folders(base: Path) -> list[Path]:
    """Problem folders under `base`, in natural order; a problem's own subfolders are not searched."""
    found = []
    for child in sorted(base.iterdir(), key=lambda p: natural_key(p.name)):
        if not child.is_dir() or child.name.startswith((".", "_")):
            continue
        if (child / "problem.yaml").is_file():
            found.append(child)
        else:
            found += _problem_folders(child)
    return found


def _valid_name(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def deck_name_of(folder: Path) -> str | None:
    """'<deck>/<problem>' when `folder` is a problem folder inside one of the deck roots."""
    folder = folder.resolve()
    if not (folder / "problem.yaml").is_file():
        return None
    for root in deck_roots():
        try:
            relative = folder.relative_to(root.resolve())
        except ValueError:
            continue
        if len(relative.parts) >= 2:
            return relative.as_posix()
    return None


def resolve(name_or_path: str) -> Problem:
    """A path that exists wins; otherwise a deck problem's name, or its trailing components when
    they name one problem of the decks ('softmax' for 'examples/softmax', as `results --problem`
    reads stored names); several such problems are an error that lists them."""
    path = Path(name_or_path)
    if path.exists():
        # a deck's problem reached by its path keeps its name (and so its stored baselines)
        folder = path if path.is_dir() else path.parent
        return load_problem(path, bundled_name=deck_name_of(folder))
    if "/" in name_or_path and _valid_name(name_or_path):
        for root in deck_roots():
            candidate = root / name_or_path
            if (candidate / "problem.yaml").is_file():
                return load_problem(candidate, bundled_name=name_or_path)
    short = name_or_path.strip("/")
    ending = [n for n in bundled_names() if short and n.endswith("/" + short)] if _valid_name(short) else []
    if len(ending) == 1:
        return resolve(ending[0])
    if ending:
        raise UserError(f"problem '{name_or_path}': names {len(ending)} problems of the decks "
                        f"({', '.join(ending[:6])}{', ...' if len(ending) > 6 else ''}); give the whole name")
    raise UserError(f"problem '{name_or_path}': no such file or folder, and not a problem of a deck"
                    + _hint(name_or_path))


def resolve_many(target: str) -> list[Problem]:
    """A deck's problems (by name, or a folder of problem folders such as `rooftop import --into`
    writes), or the one problem a path or name gives."""
    path = Path(target)
    if path.is_dir() and not (path / "problem.yaml").is_file():
        folders = _problem_folders(path)
        if not folders:
            raise UserError(f"{target}: no problem folders (with problem.yaml) under this folder")
        return [load_problem(f, bundled_name=deck_name_of(f)) for f in folders]
    names = bundled_names(target) if not path.exists() else []
    return [resolve(n) for n in names] if names else [resolve(target)]


def _hint(name: str) -> str:
    known = bundled_names()
    close = difflib.get_close_matches(name, known, n=3)
    if close:
        return f" (did you mean {', '.join(repr(c) for c in close)}?)"
    where = ""
    if "/" in name and name.split("/", 1)[0] not in deck_names():
        where = (f"; imported decks are looked up in {user_decks_root()} (ROOFTOP_DECKS"
                 f"{'' if config.read(config.DECKS) else ', unset'}): after `rooftop import ... --into DIR`, "
                 "set ROOFTOP_DECKS=DIR, or give the problem's path")
    if len(known) <= 12:
        return (f"; problems: {', '.join(known)}" if known else "") + where
    return f"; decks: {', '.join(deck_names())} (`rooftop problems` lists their problems){where}"


def expected_statuses(problem: Problem) -> dict[str, dict[str, str]]:
    """What each bundled solution must get: solutions/expected.yaml, {entry: {cpu: STATUS, cuda: STATUS}}."""
    path = problem.root / "solutions" / "expected.yaml"
    if not path.is_file():
        return {}
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of solution name -> {{cpu: STATUS, cuda: STATUS}}")
    return data
