import pytest

from rooftop.problem import expr


def test_arithmetic_over_params():
    assert expr.evaluate("2 * M * N * K", {"M": 3, "N": 4, "K": 5}) == 120
    assert expr.evaluate("cdiv(N, 128) * max(M, 2) + N ** 2 // 3", {"N": 300, "M": 1}) == 3 * 2 + 30000
    assert expr.names("2 * M * cdiv(N, K)") == {"M", "N", "K"}


@pytest.mark.parametrize("source", [
    "__import__('os').system('true')", "M.__class__", "open('x')", "[M for M in range(3)]",
    "lambda: 1", "M if N else K", "'abc'", "M and N",
])
def test_rejects_anything_but_arithmetic(source):
    with pytest.raises(expr.ExprError):
        expr.evaluate(source, {"M": 1, "N": 2, "K": 3})


def test_unknown_name_is_named():
    with pytest.raises(expr.ExprError, match="unknown name 'Q'"):
        expr.evaluate("Q * 2", {"M": 1})
