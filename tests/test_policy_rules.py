"""The policy's rule registry: every reported rule is registered, a new rule is one decorated function,
and the rules share a single traversal of the file."""

import ast

import pytest

from rooftop.integrity.policy import RULES, Context, check_source, rule
from rooftop.problem.spec import Policy

REPORTED = {"forbidden-op", "torch-compute", "import", "stream", "thread", "patch", "tensor-subclass", "fallback",
            "dynamic-code", "introspection"}
STRICT = Policy(forbidden=["torch.softmax", "@"], allow_torch_ops=False)
# a file that trips every rule at least once
EVERYTHING = '''import torch, threading, sys
y = torch.softmax(x, -1) @ w
s = torch.cuda.Stream()
threading.Thread(target=f).start()
torch.allclose = lambda *a, **k: True
class Lazy(torch.Tensor):
    pass
try:
    y = kernel(x)
except RuntimeError:
    y = torch.exp(x)
exec("y = 1")
frame = sys._getframe()
'''


@pytest.fixture
def registered():
    """Register rules for one test and take them out again, whatever the test does."""
    names: list[str] = []

    def register(*rule_names: str, nodes: tuple[type[ast.AST], ...]):
        def decorate(check):
            rule(*rule_names, nodes=nodes)(check)
            names.extend(rule_names)  # only once registered: a refused name stays the real rule's
            return check
        return decorate
    try:
        yield register
    finally:
        for name in names:
            RULES.remove(name)


def test_the_registry_holds_every_rule_the_policy_reports():
    assert REPORTED <= set(RULES)
    for name, entry in RULES.items():
        assert name in entry.names and entry.nodes and callable(entry.check)
    assert {v.rule for v in check_source(EVERYTHING, STRICT)} == REPORTED


def test_a_registered_rule_is_applied_and_then_gone(registered):
    source = "x = 1\nnote = 'TODO: tile this'\n"

    @registered("todo", nodes=(ast.Constant,))
    def todo(node: ast.Constant, context: Context):
        if isinstance(node.value, str) and "TODO" in node.value:
            yield node, "todo", "a TODO is left in the solution"

    [v] = check_source(source, Policy())
    assert (v.rule, v.line, v.message) == ("todo", 2, "a TODO is left in the solution")
    RULES.remove("todo")
    assert check_source(source, Policy()) == []


def test_a_rule_name_is_registered_once(registered):
    with pytest.raises(ValueError, match="import"):
        registered("import", nodes=(ast.Import,))(lambda node, context: ())
    assert RULES["import"].check.__name__ == "_imports"


def test_a_rule_reports_only_the_names_it_registered(registered):
    @registered("quiet", nodes=(ast.Name,))
    def loud(node: ast.Name, context: Context):
        yield node, "import", "not this rule's to report"

    with pytest.raises(ValueError, match="loud"):
        check_source("x = y", Policy())


def test_each_rule_sees_each_node_once(registered):
    seen: dict[str, list[ast.AST]] = {"module": [], "name": []}

    @registered("count-module", nodes=(ast.Module,))
    def module(node: ast.Module, context: Context):
        seen["module"].append(node)
        return ()

    @registered("count-name", nodes=(ast.Name,))
    def name(node: ast.Name, context: Context):
        seen["name"].append(node)
        return ()

    check_source(EVERYTHING, STRICT)
    names = [n for n in ast.walk(ast.parse(EVERYTHING)) if isinstance(n, ast.Name)]
    assert len(seen["module"]) == 1
    assert sorted((n.lineno, n.col_offset) for n in seen["name"]) == sorted((n.lineno, n.col_offset) for n in names)


def test_the_tree_is_traversed_once(monkeypatch):
    """Every node's children are listed exactly once: a rule that walked the tree again would list them twice."""
    nodes = sum(1 for _ in ast.walk(ast.parse(EVERYTHING)))
    expansions = []
    real = ast.iter_child_nodes

    def counting(node):
        expansions.append(node)
        return real(node)
    monkeypatch.setattr(ast, "iter_child_nodes", counting)
    assert check_source(EVERYTHING, STRICT)
    assert len(expansions) == nodes


def test_the_visitor_knows_which_nodes_are_in_an_except_handler():
    source = """import torch
try:
    y = torch.exp(x)
except (torch.relu(x),):
    try:
        pass
    except Exception:
        y = torch.tanh(x)
else:
    y = torch.exp(x)
finally:
    z = torch.exp(x)
"""
    fallbacks = [(v.line, v.message.split("'")[1]) for v in check_source(source, Policy()) if v.rule == "fallback"]
    assert fallbacks == [(4, "torch.relu"), (8, "torch.tanh")]


def test_violations_on_one_line_keep_the_rule_order():
    source = "import torch, threading\nthreading.Thread(target=f, args=(torch.cuda.Stream(),))\ny = torch.softmax(x)\n"
    assert [(v.line, v.rule) for v in check_source(source, STRICT)] == [
        (1, "import"), (2, "thread"), (2, "stream"), (3, "forbidden-op"), (3, "torch-compute")]
