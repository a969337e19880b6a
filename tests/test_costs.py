"""The cost model (symgrad.ad.costs): the package's table, its format, and what it prices."""

from __future__ import annotations

import pytest
import sympy

from symgrad.ad import cheapen, costs
from symgrad.backends.python import kernels
from symgrad.language import functions, piecewise

x, y = sympy.symbols("x y", real=True)
UNIT = {key: 1.0 for key in costs.ARITHMETIC}


def test_the_package_table_prices_every_function_and_says_where_it_was_measured() -> None:
    table = costs.table()
    assert table.of("mul") == 1.0
    assert table.command.startswith("python -m bench --calibrate")
    assert "thread" in table.machine
    assert set(functions.FUNCTIONS) - {"polygamma"} <= set(table.relative)
    assert {"mish.cpu_form", "mish_backward.cpu_form"} <= set(table.relative)


def test_dump_and_parse_round_trip_and_refuse_a_table_without_arithmetic() -> None:
    table = costs.CostTable("here", "python -m bench --calibrate", {**UNIT, "exp": 2.345})
    again = costs.parse(costs.dump(table))
    assert again.relative["exp"] == 2.35 and again.machine == "here"
    with pytest.raises(ValueError, match="lacks mul"):
        costs.parse('{"machine": "m", "command": "c", "relative": {"add": 1}}')


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (x * y * 3, 2.0),  # a product of three factors: two multiplies
        (1 - x * y, 2.0),  # a multiply and a subtraction: the -1 is not multiplied
        (x**2, 7.0),
        (x**3, 11.0),
        (x**6, 5.0),  # printed as (x**2) ** 3: multiplies, not pow
        (x**2.5, 13.0),
        (1 / x, 17.0),
        (sympy.sqrt(x), 19.0),
        (functions.call("exp", x) + 1, 23.0 + 1.0),
        (functions.call("erfinv", x), 26.0),  # not measured: the median call (19, 23, 29, 35)
        (piecewise.where(x > 0, x, 0), 31.0),
    ],
)
def test_expression_cost_prices_each_operation_as_printed(
    expr: sympy.Expr, expected: float
) -> None:
    relative = {**UNIT, "square": 7.0, "cube": 11.0, "pow": 13.0, "div": 17.0, "where": 31.0}
    relative |= {"sqrt": 19.0, "exp": 23.0, "log": 29.0, "tanh": 35.0}
    table = costs.CostTable("m", "c", relative)
    assert table.expression(expr) == pytest.approx(expected)


def test_a_rewrite_is_kept_only_where_the_table_prices_it_lower(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    formula = 1 + functions.call("tanh", x)
    sigmoid = 2 * functions.call("sigmoid", 2 * x)
    cheap_sigmoid = costs.CostTable("m", "c", {**UNIT, "tanh": 5.0, "sigmoid": 1.5})
    monkeypatch.setattr(costs, "table", lambda: cheap_sigmoid)
    assert cheapen.cheapen(formula) == sigmoid
    dear_sigmoid = costs.CostTable("m", "c", {**UNIT, "tanh": 1.0, "sigmoid": 5.0})
    monkeypatch.setattr(costs, "table", lambda: dear_sigmoid)
    assert cheapen.cheapen(formula) == formula


def test_a_cpu_form_replaces_the_kernel_only_where_measured_cheaper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow_form = {**UNIT, "mish_backward": 10.0, "mish_backward.cpu_form": 12.0}
    monkeypatch.setattr(costs, "table", lambda: costs.CostTable("m", "c", slow_form))
    assert kernels._if_cheaper("mish_backward") is None
    fast_form = {**UNIT, "mish_backward": 10.0, "mish_backward.cpu_form": 8.0}
    monkeypatch.setattr(costs, "table", lambda: costs.CostTable("m", "c", fast_form))
    assert kernels._if_cheaper("mish_backward") is kernels.CPU_FORMS["mish_backward"]
    unmeasured = costs.CostTable("m", "c", {**UNIT, "mish_backward": 10.0})
    monkeypatch.setattr(costs, "table", lambda: unmeasured)
    assert kernels._if_cheaper("mish_backward") is None
