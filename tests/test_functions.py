"""The function table and the printer: every function's spellings and derivative rule.

Each entry of `symgrad.functions.FUNCTIONS` is checked numerically, so a new function
is covered as soon as it is added to the table: its torch spelling against its math
spelling (and against sympy's function of the same name where sympy has one), and its
derivative rule against `torch.autograd` of its torch spelling. The printer is checked
with exact strings and by evaluating what it prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import sympy
import torch
from sympy.codegen import cfunctions

import symgrad
from symgrad import functions
from symgrad.derive import derive
from symgrad.functions import FUNCTIONS, SPELLINGS, ElementwiseFunction
from symgrad.printer import TorchPrinter, UnprintableError

# The tensor symbol `x` and the number symbol `lo` (a float input of a spec).
X = sympy.Symbol("x", real=True)
LO = sympy.Symbol("lo", real=True)

# Sample points by kind of domain. None of them is 0 or 1, where some functions or their
# derivatives vanish (sign, log) or are not differentiable (abs, sign).
_NONZERO = (-1.3, -0.6, 0.45, 1.1)
_POSITIVE = (0.3, 0.7, 1.6, 2.7)
_ABOVE_ONE = (1.2, 1.7, 2.5, 3.1)
_INSIDE_UNIT = (-0.83, -0.31, 0.27, 0.74)
# Functions defined (or differentiable) only on part of the real line.
_DOMAINS = {
    "log": _POSITIVE,
    "log1p": _POSITIVE,
    "sqrt": _POSITIVE,
    "rsqrt": _POSITIVE,
    "acosh": _ABOVE_ONE,
    "asin": _INSIDE_UNIT,
    "acos": _INSIDE_UNIT,
    "atanh": _INSIDE_UNIT,
}

ALL_FUNCTIONS = sorted(FUNCTIONS)


def samples(name: str) -> tuple[float, ...]:
    """Points inside the domain of the function `name`."""
    return _DOMAINS.get(name, _NONZERO)


# Argument k of a call on tensors is the symbol x (k = 0) or xk; on numbers lo or lok.
_MAX_ARITY = 4
TENSOR_ARGUMENTS = tuple(
    sympy.Symbol("x" if k == 0 else f"x{k}", real=True) for k in range(_MAX_ARITY)
)
NUMBER_ARGUMENTS = tuple(
    sympy.Symbol("lo" if k == 0 else f"lo{k}", real=True) for k in range(_MAX_ARITY)
)
assert TENSOR_ARGUMENTS[0] == X and NUMBER_ARGUMENTS[0] == LO


def printed(expr: sympy.Basic, tensors: frozenset[sympy.Basic] | None = None) -> str:
    return TorchPrinter(frozenset(TENSOR_ARGUMENTS) if tensors is None else tensors).doprint(expr)


def evaluate(code: str, **values: Any) -> Any:
    return eval(code, {"torch": torch, "math": math, **values})


def as_tensor(value: Any, like: torch.Tensor) -> torch.Tensor:
    """A printed constant (`0`) evaluates to a number; broadcast it like a tensor."""
    return torch.broadcast_to(torch.as_tensor(value, dtype=torch.float64), like.shape)


def call_on(name: str, tensors: bool) -> sympy.Expr:
    """A call of `name` on tensor symbols (x, x1, ...) or on number symbols (lo, lo1, ...)."""
    arity = FUNCTIONS[name].arity
    assert arity <= _MAX_ARITY, f"raise _MAX_ARITY to test {name}"
    symbols = TENSOR_ARGUMENTS if tensors else NUMBER_ARGUMENTS
    return FUNCTIONS[name].sympy_class(*symbols[:arity])


def argument_values(name: str) -> list[tuple[float, ...]]:
    """Per argument, the sample points (rotated, so arguments differ)."""
    points = samples(name)
    return [points[k:] + points[:k] for k in range(FUNCTIONS[name].arity)]


def tensor_values(name: str, requires_grad: bool = False) -> dict[str, torch.Tensor]:
    return {
        symbol.name: torch.tensor(values, dtype=torch.float64, requires_grad=requires_grad)
        for symbol, values in zip(TENSOR_ARGUMENTS, argument_values(name), strict=False)
    }


def number_values(name: str) -> list[dict[str, float]]:
    """For each sample point, the number arguments (lo, lo1, ...) by name."""
    columns = argument_values(name)
    return [
        {symbol.name: column[n] for symbol, column in zip(NUMBER_ARGUMENTS, columns, strict=False)}
        for n in range(len(samples(name)))
    ]


def like(name: str) -> torch.Tensor:
    return torch.tensor(samples(name), dtype=torch.float64)


# --- The table ----------------------------------------------------------------------


def test_table_is_consistent() -> None:
    assert ALL_FUNCTIONS, "the table is empty"
    for name, info in FUNCTIONS.items():
        assert info.name == name
        assert info.sympy_class.__name__ == name
        assert issubclass(info.sympy_class, ElementwiseFunction)
        assert info.torch.startswith("torch."), info.torch
        assert "torch" not in info.math, info.math
        assert SPELLINGS[name] == name
    assert set(_DOMAINS) <= set(FUNCTIONS), "a sample domain names no function"


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_calls_stay_as_written(name: str) -> None:
    """Our classes never evaluate, even on numbers where sympy's would (exp(0) = 1)."""
    info = FUNCTIONS[name]
    args = [sympy.Integer(0)] * info.arity
    node = functions.call(name, *args)
    assert type(node) is info.sympy_class
    assert node.args == tuple(args)


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_torch_spelling_matches_math_spelling(name: str) -> None:
    info = FUNCTIONS[name]
    torch_code = printed(call_on(name, tensors=True))
    math_code = printed(call_on(name, tensors=False))
    assert torch_code == info.torch.format(*(s.name for s in TENSOR_ARGUMENTS[: info.arity]))
    assert math_code == info.math.format(*(s.name for s in NUMBER_ARGUMENTS[: info.arity]))
    values = evaluate(torch_code, **tensor_values(name))
    assert isinstance(values, torch.Tensor) and values.dtype == torch.float64
    expected = [evaluate(math_code, **numbers) for numbers in number_values(name)]
    assert all(isinstance(v, float) for v in expected), expected
    torch.testing.assert_close(values, torch.tensor(expected, dtype=torch.float64))


def _sympy_function(name: str) -> Callable[..., sympy.Expr] | None:
    """sympy's own function spelled like `name` or one of its aliases, if any."""
    for namespace in (sympy, cfunctions):
        for spelling in (name, *FUNCTIONS[name].aliases):
            candidate = getattr(namespace, spelling, None)
            if callable(candidate):
                return candidate  # type: ignore[no-any-return]
    return None


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_torch_spelling_matches_sympy(name: str) -> None:
    """Where sympy has a function of the same name, the values agree with it."""
    reference = _sympy_function(name)
    if reference is None:
        pytest.skip(f"sympy has no function named {name}")
    values = evaluate(printed(call_on(name, tensors=True)), **tensor_values(name))
    expected = [
        float(reference(*(sympy.Float(v) for v in numbers.values())).evalf(30))
        for numbers in number_values(name)
    ]
    torch.testing.assert_close(values, torch.tensor(expected, dtype=torch.float64))


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_derivative_rule_matches_autograd(name: str) -> None:
    node = call_on(name, tensors=True)
    arguments = tensor_values(name, requires_grad=True)
    value = evaluate(printed(node), **arguments)
    expected = torch.autograd.grad(value.sum(), list(arguments.values()))
    detached = {k: v.detach() for k, v in arguments.items()}
    for index, want in enumerate(expected):
        actual = as_tensor(evaluate(printed(node.fdiff(index + 1)), **detached), want)
        torch.testing.assert_close(actual, want, msg=lambda m, i=index: f"argument {i}: {m}")


# Shifts b such that 0.5 * x + b stays in the domain for the sample points x.
_SHIFTS = {_POSITIVE: 0.1, _ABOVE_ONE: 0.6}


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_derivative_rule_of_a_composite_argument(name: str) -> None:
    """The chain rule through the arguments: d f(x / 2 + b) / dx by symgrad's reverse mode."""
    shift = _SHIFTS.get(samples(name), -0.1)
    argument_names = [s.name for s in TENSOR_ARGUMENTS[: FUNCTIONS[name].arity]]
    call = ", ".join(f"0.5 * {a} + {shift}" for a in argument_names)
    spec = symgrad.spec_from_dict(
        {
            "name": "Chain",
            "inputs": {a: "tensor" for a in argument_names},
            "outputs": {"y": f"{name}({call})"},
        }
    )
    derived = derive(spec)
    (part,) = derived.backward
    arguments = tensor_values(name, requires_grad=True)
    y = evaluate(printed(spec.outputs[0].expr), **arguments)
    grads = torch.autograd.grad(y.sum(), list(arguments.values()))
    expected = dict(zip(arguments, grads, strict=True))
    namespace = {k: v.detach() for k, v in arguments.items()}
    namespace.update({"y": y.detach(), part.grad.name: torch.ones_like(y)})
    shared = [s for block in derived.prelude for s in block.statements]
    shared += [s for block in part.shared for s in block.statements]
    for statement in shared:
        code = printed(statement.expr, derived.tensor_symbols)
        namespace[statement.target.name] = evaluate(code, **namespace)
    gradients = {g.input.name: g for g in part.gradients}
    for argument, want in expected.items():
        if argument not in gradients:  # a zero derivative emits no gradient (None)
            assert torch.count_nonzero(want) == 0
            continue
        gradient = gradients[argument]
        scope = dict(namespace)
        for statement in gradient.statements:
            code = printed(statement.expr, derived.tensor_symbols)
            scope[statement.target.name] = evaluate(code, **scope)
        actual = evaluate(printed(gradient.expr, derived.tensor_symbols), **scope)
        torch.testing.assert_close(as_tensor(actual, want), want)


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_derivative_rule_on_numbers(name: str) -> None:
    """The derivative printed for a number argument (math) equals the tensor one."""
    for index in range(FUNCTIONS[name].arity):
        tensor_code = printed(call_on(name, tensors=True).fdiff(index + 1))
        torch_values = as_tensor(evaluate(tensor_code, **tensor_values(name)), like(name))
        code = printed(call_on(name, tensors=False).fdiff(index + 1))
        assert "torch" not in code
        math_values = [float(evaluate(code, **numbers)) for numbers in number_values(name)]
        torch.testing.assert_close(torch_values, torch.tensor(math_values, dtype=torch.float64))


# Expressions around a call f(lo) on a number, where the printed call must behave as one
# operand however its math spelling looks (`1 / math.sqrt(lo)`, `-math.log1p(...)`).
_CONTEXTS: dict[str, Callable[[sympy.Expr], sympy.Expr]] = {
    "x*f": lambda f: X * f,
    "x/f": lambda f: X / f,
    "f**2": lambda f: f**2,
    "f**3": lambda f: f**3,
    "1/f": lambda f: sympy.Pow(f, -1),
    "f**-2": lambda f: f**-2,
    "2**f": lambda f: 2**f,
    "x**f": lambda f: X**f,
    "-f": lambda f: -f * X,
    "x-f": lambda f: X - f,
    "1/(1+f)": lambda f: 1 / (1 + f),
}


@pytest.mark.parametrize("context", sorted(_CONTEXTS))
@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_math_call_is_one_operand(name: str, context: str) -> None:
    """A call on a number evaluates like the same call on a tensor inside any expression."""
    call = call_on(name, tensors=False)
    expr = _CONTEXTS[context](call)
    x = torch.tensor([0.6, 1.4], dtype=torch.float64)
    code = printed(expr)
    # The same expression with the numbers as 0-d tensors prints every call with torch.
    reference = printed(expr, frozenset({X, *NUMBER_ARGUMENTS}))
    for numbers in number_values(name):
        if context == "1/(1+f)" and abs(1 + evaluate(printed(call), **numbers)) < 0.1:
            continue
        as_tensors = {k: torch.tensor(v, dtype=torch.float64) for k, v in numbers.items()}
        expected = evaluate(reference, x=x, **as_tensors)
        actual = evaluate(code, x=x, **numbers)
        torch.testing.assert_close(
            as_tensor(actual, x), as_tensor(expected, x), msg=lambda m, c=code: f"{c}: {m}"
        )


# --- Aliases ------------------------------------------------------------------------

_ALIASES = {
    "Abs": "abs",
    "ln": "log",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "expit": "sigmoid",
    "logsigmoid": "log_sigmoid",
}


def test_every_alias_is_known() -> None:
    table = {alias: info.name for info in FUNCTIONS.values() for alias in info.aliases}
    assert table == _ALIASES


@pytest.mark.parametrize(("alias", "name"), sorted(_ALIASES.items()))
def test_alias_maps_to_function(alias: str, name: str) -> None:
    assert SPELLINGS[alias] == name
    node = functions.call(alias, X)
    assert type(node) is FUNCTIONS[name].sympy_class
    spec = symgrad.spec_from_dict(
        {"name": "Alias", "inputs": {"x": "tensor"}, "outputs": {"y": f"{alias}(x)"}}
    )
    assert type(spec.outputs[0].expr) is FUNCTIONS[name].sympy_class


@pytest.mark.parametrize(
    ("sympy_expr", "name"),
    [
        (sympy.Abs(sympy.Symbol("x")), "abs"),
        (sympy.asin(sympy.Symbol("x")), "asin"),
        (sympy.log(sympy.Symbol("x")), "log"),
        (sympy.sign(sympy.Symbol("x")), "sign"),
        (sympy.erfc(sympy.Symbol("x")), "erfc"),
    ],
)
def test_sympy_functions_map_to_the_table(sympy_expr: sympy.Expr, name: str) -> None:
    spec = symgrad.spec_from_dict(
        {"name": "FromSympy", "inputs": {"x": "tensor"}, "outputs": {"y": sympy_expr}}
    )
    expr = spec.outputs[0].expr
    assert type(expr) is FUNCTIONS[name].sympy_class
    assert expr.args == (spec.inputs[0].symbol,)


def test_unknown_spelling_is_not_a_function() -> None:
    with pytest.raises(KeyError):
        functions.call("gamma", X)


# --- The printer --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (sympy.Integer(2), "2"),
        (sympy.Integer(-7), "-7"),
        (sympy.Float(0.5), "0.5"),
        (sympy.Float("1e-20"), "1e-20"),
        (sympy.Integer(2**31 - 1), "2147483647"),
        (sympy.Integer(2**31), "2147483648.0"),
        (sympy.Integer(2**53), "9007199254740992.0"),
        (sympy.Integer(2**60), "1.152921504606847e+18"),
        (sympy.Integer(-(2**60)), "-1.152921504606847e+18"),
        (sympy.Rational(1, 3), "1/3"),
        (sympy.Rational(-1, 2), "-1/2"),
        (X * sympy.Rational(1, 3), "x/3"),
        (X * 2**60, "1.152921504606847e+18*x"),
        (X + 1, "1 + x"),
        (2 * X, "2*x"),
        (-X, "-x"),
        (X**2, "x**2"),
        ((X + 1) ** 2, "(1 + x)**2"),
        (X ** (X + 1), "x**(1 + x)"),
        (X**-1, "1 / x"),
        (X**-2, "1 / x**2"),
        ((X + 1) ** -1, "1 / (1 + x)"),
        (X ** sympy.Rational(1, 2), "torch.sqrt(x)"),
        (X ** sympy.Rational(-1, 2), "torch.rsqrt(x)"),
        ((X + 1) ** sympy.Rational(1, 2), "torch.sqrt(1 + x)"),
        (X ** sympy.Rational(1, 3), "x**(1/3)"),
        (functions.call("exp", X), "torch.exp(x)"),
        (functions.call("softplus", X), "torch.nn.functional.softplus(x)"),
        (functions.call("exp", LO), "math.exp(lo)"),
        (functions.call("abs", LO), "abs(lo)"),
        (LO ** sympy.Rational(1, 2), "math.sqrt(lo)"),
        (functions.call("sigmoid", LO + 1), "(0.5 + 0.5 * math.tanh(0.5 * (1 + lo)))"),
        (functions.call("tanh", functions.call("exp", LO) * X), "torch.tanh(x*math.exp(lo))"),
    ],
    ids=repr,
)
def test_prints_exactly(expr: sympy.Expr, expected: str) -> None:
    assert printed(expr) == expected


def test_large_integers_print_as_floats_torch_accepts() -> None:
    code = printed(X * 2**70 + 3**45)
    assert "1180591620717411303424" not in code
    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    expected = x * float(2**70) + float(3**45)
    torch.testing.assert_close(evaluate(code, x=x), expected)


@pytest.mark.parametrize(
    ("expr", "uses_math"),
    [
        (sympy.pi * X, True),
        (sympy.E + X, True),
        (functions.call("exp", LO) * X, True),
        (functions.call("exp", X), False),
        (functions.call("abs", LO) * X, False),
        (X**2 + 1, False),
    ],
    ids=repr,
)
def test_uses_math(expr: sympy.Expr, uses_math: bool) -> None:
    printer = TorchPrinter(frozenset({X}))
    code = printer.doprint(expr)
    assert printer.uses_math is uses_math
    assert ("math." in code) is uses_math


def test_constants_print_as_math() -> None:
    assert printed(sympy.pi) == "math.pi"
    assert printed(sympy.E) == "math.e"
    assert printed(2 * sympy.pi * X) == "2*math.pi*x"


def test_sigmoid_of_a_number_sum_evaluates_correctly() -> None:
    expr = 3 * X * functions.call("sigmoid", LO - 2) - functions.call("sigmoid", -LO)
    code = printed(expr)
    assert "torch.sigmoid" not in code
    x = torch.tensor([0.5, -1.0], dtype=torch.float64)
    lo = 0.8
    expected = 3 * x * torch.sigmoid(torch.tensor(lo - 2)) - torch.sigmoid(torch.tensor(-lo))
    torch.testing.assert_close(evaluate(code, x=x, lo=lo), expected.double())


def test_printed_pow_evaluates_correctly() -> None:
    y = sympy.Symbol("y", real=True)
    expr = X**-1 + (X + y) ** -2 - X ** sympy.Rational(-1, 2) * y ** sympy.Rational(1, 2) + X**y
    code = printed(expr, frozenset({X, y}))
    x = torch.tensor([0.5, 1.5], dtype=torch.float64)
    yv = torch.tensor([2.0, 0.25], dtype=torch.float64)
    expected = 1 / x + 1 / (x + yv) ** 2 - torch.sqrt(yv / x) + x**yv
    torch.testing.assert_close(evaluate(code, x=x, y=yv), expected)


_UNPRINTABLE = {
    "undefined function": sympy.Function("f")(X),
    "gamma": sympy.gamma(X),
    "Piecewise": sympy.Piecewise((X, X > 0), (0, True)),
    "Derivative": sympy.Derivative(sympy.Function("f")(X), X),
    "Float 1e400": sympy.Float("1e400"),
    "x * Float 1e400": X * sympy.Float("1e400"),
    "zoo": sympy.zoo,
    "oo": sympy.oo,
    "Float inf": sympy.Float("inf"),
    "x * oo": X * sympy.oo,
    "nan": sympy.nan,
    "I * x": sympy.I * X,
    "Max(x, 0)": sympy.Max(X, 0),
    "x > 0": X > 0,
    "Integer 10**400": sympy.Integer(10**400),
    "x / 10**400": X / 10**400,
}


@pytest.mark.parametrize("what", sorted(_UNPRINTABLE))
def test_unprintable_raises(what: str) -> None:
    """Anything without a torch spelling raises instead of printing broken code."""
    with pytest.raises(UnprintableError):
        printed(_UNPRINTABLE[what])
