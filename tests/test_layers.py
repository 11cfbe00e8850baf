"""The package's layers point down: a module imports only from its own package and from layers
below it (lazy imports inside functions count too). Leaf modules, which import only other
leaves, may be used from any layer."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "rooftop"

# top to bottom; packages on one line are peers and do not import each other
LAYERS = [
    ["__main__"],  # `python -m rooftop`: the command
    ["cli"],
    ["viewer", "report"],  # read run folders and the store
    ["server", "agents"],
    ["env"],
    ["batch"],
    ["service"],
    ["api"],
    ["pipeline"],
    ["vocabulary"],  # the public words: Settings, the choice enums, the events
    ["store"],
    ["score"],
    ["measure"],
    ["check", "integrity"],
    ["environment"],
    ["solution"],  # a solution's languages are those its language backends (build/backends/) recognise
    ["build", "problem"],
    ["transcripts"],  # agent transcripts of any CLI as one event model
    ["verdict"],
    ["values", "errors", "bytecode", "yamlfile", "config", "plugins"],
]
# modules that import only other leaves: pure statistics, dtype names, datasheet facts, cache paths
LEAVES = {"rooftop.measure.measurement", "rooftop.problem.dtypes", "rooftop.score.hardware", "rooftop.build.cache",
          "rooftop.yamlfile", "rooftop.config", "rooftop.plugins"}


def _module(path: Path) -> str:
    return ".".join(("rooftop", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "rooftop":  # `from rooftop import config`
            found |= {f"rooftop.{a.name}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {m for m in found if m == "rooftop" or m.startswith("rooftop.")}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "rooftop"


LEVEL = {unit: i for i, units in enumerate(LAYERS) for unit in units}
MODULES = {_module(p): p for p in SRC.rglob("*.py")}


def test_every_package_has_a_layer():
    units = {_unit(m) for m in MODULES} - {"rooftop"}
    assert units <= set(LEVEL), f"no layer for {sorted(units - set(LEVEL))}: add it to LAYERS"


def test_leaves_import_only_leaves():
    for leaf in LEAVES:
        assert _imports(MODULES[leaf]) <= LEAVES, leaf


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _unit(m) != "rooftop"))
def test_imports_point_down(module):
    here = LEVEL[_unit(module)]
    upward = [target for target in _imports(MODULES[module])
              if target not in LEAVES and _unit(target) != _unit(module) and _unit(target) != "rooftop"
              and LEVEL.get(_unit(target), len(LAYERS)) <= here]
    assert not upward, f"{module} imports {upward}, which are not below its layer"


def _module_imports(path: Path) -> set[str]:
    """The modules a module imports (anywhere in it, TYPE_CHECKING blocks too): `from a import b`
    is `a.b` where that is a module, else `a`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                      for a in node.names}
    return {m for m in found if m in MODULES}


def test_no_module_imports_itself_through_others():
    """No import loop between modules, lazy or for type checking: two modules that need each other
    are one thing split in two, or share a third that belongs below both."""
    graph = {m: _module_imports(p) - {m} for m, p in MODULES.items()}
    loops = []
    for start in graph:  # a path back to `start` through modules that sort after it: each loop once
        stack, seen = [(start, (start,))], {start}
        while stack:
            module, path = stack.pop()
            for nxt in graph[module]:
                if nxt == start:
                    loops.append(" -> ".join((*path, start)))
                elif nxt > start and nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, (*path, nxt)))
    assert not loops, loops


def test_environment_variables_are_read_in_one_module():
    """Every ROOFTOP_ variable is named in rooftop/config.py, and only that module reads the
    environment for one: a literal `ROOFTOP_...` anywhere else in the package is an error."""
    from rooftop.config import VARIABLES

    stray = []
    for module, path in MODULES.items():
        if module == "rooftop.config":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.startswith("ROOFTOP_") and node.value.rstrip("_").isupper():
                stray.append(f"{module}: {node.value}")
    assert not stray, f"read these through rooftop.config (and list them there): {stray}"
    assert all(name.startswith("ROOFTOP_") and v.meaning for name, v in VARIABLES.items())


def test_the_trust_boundary_is_in_the_folders():
    """The evaluation child's code (pipeline/child/) imports nothing of the trusted side, and the
    trusted side (pipeline/trusted/ and what sits above it) nothing of the child's: they share only
    the wire (pipeline/wire.py, its messages; pipeline/channel.py, their transport) and the job
    (pipeline/job.py)."""
    child = {m for m in MODULES if m.startswith("rooftop.pipeline.child")}
    pipeline = {m for m in MODULES if m.startswith("rooftop.pipeline.")}
    shared = {"rooftop.pipeline.wire", "rooftop.pipeline.channel", "rooftop.pipeline.job", "rooftop.pipeline"}
    crossing = [f"{m} -> {t}" for m in child for t in _module_imports(MODULES[m])
                if t in pipeline and t not in child and t not in shared]
    crossing += [f"{m} -> {t}" for m in pipeline - child for t in _module_imports(MODULES[m]) if t in child]
    assert not crossing, crossing
