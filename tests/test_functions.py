"""The function table and the printer: every function's spellings and derivative rule.

Each entry of `symgrad.language.functions.FUNCTIONS` is checked numerically, so a new function
is covered as soon as it is added to the table: its torch spelling against its math
spelling (and against sympy's function of the same name where sympy has one), and its
derivative rule against `torch.autograd` of its torch spelling. The printer is checked
with exact strings and by evaluating what it prints.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import sympy
import torch
from sympy.codegen import cfunctions

import symgrad
from symgrad.ad.derive import derive
from symgrad.backends.base import UnprintableError
from symgrad.backends.python.printer import TorchPrinter
from symgrad.backends.python.spellings import SPELLINGS as PYTHON
from symgrad.frontend.model import Spec
from symgrad.language import functions, reductions
from symgrad.language.functions import FUNCTIONS, SPELLINGS, ElementwiseFunction

# The tensor symbol `x` and the number symbol `lo` (a float input of a spec).
X = sympy.Symbol("x", real=True)
LO = sympy.Symbol("lo", real=True)
# A number input assumed positive: math calls in their domain print plainly.
POSITIVE = sympy.Symbol("lo", positive=True)

# Sample points by kind of domain. None of them is 0 or 1, where some functions or their
# derivatives vanish (sign, log) or are not differentiable (abs, sign).
_NONZERO = (-1.3, -0.6, 0.45, 1.1)
_POSITIVE = (0.3, 0.7, 1.6, 2.7)
_ABOVE_ONE = (1.2, 1.7, 2.5, 3.1)
_INSIDE_UNIT = (-0.83, -0.31, 0.27, 0.74)
# Inside (0, 1) and away from its ends (logit).
_PROBABILITY = (0.15, 0.35, 0.62, 0.85)
# Inside (0.5, 3): away from the poles of the gamma function and the zeros of lgamma.
_GAMMA = (0.6, 1.3, 2.2, 2.9)
# Below 0, on both sides of -ln 2 where log1mexp switches forms (log1mexp(x) = log(1 - e^x)).
_NEGATIVE = (-3.1, -0.9, -0.5, -0.05)
# Where floor, ceil and round are not 0 (so 1 / f is defined), with two ties (-2.5, 1.5).
_ROUNDING = (-2.5, -1.3, 1.5, 2.7)
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
    "erfinv": _INSIDE_UNIT,
    "lgamma": _GAMMA,
    "digamma": _GAMMA,
    "polygamma": _GAMMA,
    "logit": _PROBABILITY,
    "log1mexp": _NEGATIVE,
    "floor": _ROUNDING,
    "ceil": _ROUNDING,
    "round": _ROUNDING,
}
# Functions whose arguments have different domains: the domain of each argument.
_ARGUMENT_DOMAINS = {
    "xlogy": (_NONZERO, _POSITIVE),
    "xlog1py": (_NONZERO, _INSIDE_UNIT),
}
# Arguments that are integer constants, not sample points: torch.special.polygamma takes
# its order n as a Python int, so each order is a case of its own.
_CONSTANT_ARGUMENTS: dict[str, dict[int, tuple[int, ...]]] = {"polygamma": {0: (0, 1, 2)}}

ALL_FUNCTIONS = sorted(FUNCTIONS)


@dataclass(frozen=True)
class Case:
    """A function to check, with its integer-constant arguments: (index, value) pairs."""

    name: str
    constants: tuple[tuple[int, int], ...] = ()

    def __str__(self) -> str:
        fixed = ",".join(f"{index}={value}" for index, value in self.constants)
        return f"{self.name}[{fixed}]" if fixed else self.name

    @property
    def arity(self) -> int:
        return FUNCTIONS[self.name].arity

    @property
    def variables(self) -> list[int]:
        """The indices of the arguments that take sample points."""
        fixed = dict(self.constants)
        return [k for k in range(self.arity) if k not in fixed]


def _cases(name: str) -> list[Case]:
    constants = _CONSTANT_ARGUMENTS.get(name, {})
    indices = sorted(constants)
    return [
        Case(name, tuple(zip(indices, values, strict=True)))
        for values in itertools.product(*(constants[k] for k in indices))
    ]


ALL_CASES = [case for name in ALL_FUNCTIONS for case in _cases(name)]
# The cases whose function has a math spelling (prints on number arguments).
MATH_CASES = [case for case in ALL_CASES if PYTHON[case.name].math is not None]
NO_MATH_CASES = [case for case in ALL_CASES if PYTHON[case.name].math is None]


def samples(name: str) -> tuple[float, ...]:
    """Points inside the domain of the function `name`."""
    return _DOMAINS.get(name, _NONZERO)


def argument_domains(name: str) -> tuple[tuple[float, ...], ...]:
    """The domain of each argument of the function `name`."""
    return _ARGUMENT_DOMAINS.get(name, (samples(name),) * FUNCTIONS[name].arity)


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


def call_arguments(case: Case, tensors: bool) -> list[sympy.Expr]:
    """The arguments of a call: tensor symbols (x, x1, ...) or number symbols (lo, lo1, ...),
    and the case's integer constants."""
    assert case.arity <= _MAX_ARITY, f"raise _MAX_ARITY to test {case.name}"
    symbols = TENSOR_ARGUMENTS if tensors else NUMBER_ARGUMENTS
    fixed = dict(case.constants)
    return [sympy.Integer(fixed[k]) if k in fixed else symbols[k] for k in range(case.arity)]


def call_on(case: Case, tensors: bool) -> sympy.Expr:
    """A call of the case's function on tensor symbols or on number symbols."""
    return FUNCTIONS[case.name].sympy_class(*call_arguments(case, tensors))


def argument_values(case: Case) -> dict[int, tuple[float, ...]]:
    """Per variable argument (by index), the sample points (rotated, so arguments differ)."""
    domains = argument_domains(case.name)
    return {k: domains[k][k:] + domains[k][:k] for k in case.variables}


def tensor_values(case: Case, requires_grad: bool = False) -> dict[str, torch.Tensor]:
    return {
        TENSOR_ARGUMENTS[k].name: torch.tensor(
            values, dtype=torch.float64, requires_grad=requires_grad
        )
        for k, values in argument_values(case).items()
    }


def number_values(case: Case) -> list[dict[str, float]]:
    """For each sample point, the number arguments (lo, lo1, ...) by name."""
    columns = argument_values(case)
    return [
        {NUMBER_ARGUMENTS[k].name: column[n] for k, column in columns.items()}
        for n in range(len(samples(case.name)))
    ]


def like(case: Case) -> torch.Tensor:
    return torch.tensor(samples(case.name), dtype=torch.float64)


def needs_tensors(expr: sympy.Expr) -> bool:
    """True when `expr` calls a function that has no math spelling."""
    return any(PYTHON[type(call).__name__].math is None for call in expr.atoms(ElementwiseFunction))


# --- The table ----------------------------------------------------------------------


def test_table_is_consistent() -> None:
    assert ALL_FUNCTIONS, "the table is empty"
    for name, info in FUNCTIONS.items():
        assert info.name == name
        assert info.sympy_class.__name__ == name
        assert issubclass(info.sympy_class, ElementwiseFunction)
        assert SPELLINGS[name] == name
    # The Python backend spells every function, and no other.
    assert set(PYTHON) == set(FUNCTIONS)
    for name, spelling in PYTHON.items():
        torch_function = FUNCTIONS[name].torch_function
        if torch_function is not None:  # else the definition's values (test below)
            assert spelling.torch.startswith(torch_function + "("), name
        assert spelling.math is None or "torch" not in spelling.math, spelling.math
    assert set(_DOMAINS) <= set(FUNCTIONS), "a sample domain names no function"
    assert set(_ARGUMENT_DOMAINS) <= set(FUNCTIONS), "an argument domain names no function"
    for name, domains in _ARGUMENT_DOMAINS.items():
        assert len(domains) == FUNCTIONS[name].arity, name
        assert {len(points) for points in domains} == {len(samples(name))}, name


def test_functions_without_math_spelling() -> None:
    """Python's math module has no erfinv, digamma or polygamma."""
    assert sorted({case.name for case in NO_MATH_CASES}) == ["digamma", "erfinv", "polygamma"]


# The functions torch lacks, defined by other language functions.
DEFINED = sorted(name for name, info in FUNCTIONS.items() if info.torch_function is None)
# Both signs, both sides of log1mexp's switch at -ln 2, the ends of float32, 0 and NaN.
_EXTREMES = (-100.0, -30.0, -10.0, -1.0, -0.5, -1e-4, -1e-30, 0.0, 1e-30, 1.0, math.nan)


def test_functions_torch_lacks() -> None:
    assert DEFINED == ["log1mexp"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", DEFINED)
def test_torch_spelling_is_the_definition(name: str, dtype: torch.dtype) -> None:
    """A function torch lacks prints as its definition does, to the bit (nan and inf too)."""
    info = FUNCTIONS[name]
    assert info.definition is not None
    x = torch.tensor(_EXTREMES, dtype=dtype)
    spelled = evaluate(printed(info.sympy_class(X)), x=x)
    defined = evaluate(printed(info.definition(X)), x=x)
    torch.testing.assert_close(spelled, defined, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", ALL_FUNCTIONS)
def test_calls_stay_as_written(name: str) -> None:
    """Our classes never evaluate, even on numbers where sympy's would (exp(0) = 1)."""
    info = FUNCTIONS[name]
    args = [sympy.Integer(0)] * info.arity
    node = functions.call(name, *args)
    assert type(node) is info.sympy_class
    assert node.args == tuple(args)


@pytest.mark.parametrize("case", MATH_CASES, ids=str)
def test_torch_spelling_matches_math_spelling(case: Case) -> None:
    info = PYTHON[case.name]
    assert info.math is not None
    torch_code = printed(call_on(case, tensors=True))
    math_code = printed(call_on(case, tensors=False))
    assert torch_code == info.torch.format(*map(str, call_arguments(case, tensors=True)))
    numbers = call_arguments(case, tensors=False)
    # Note [Numbers outside the domain]: a number of unknown sign takes the safe spelling.
    spelling = info.math if info.safe_math is None or info.in_domain(*numbers) else info.safe_math
    assert math_code == spelling.format(*map(str, numbers))
    values = evaluate(torch_code, **tensor_values(case))
    assert isinstance(values, torch.Tensor) and values.dtype == torch.float64
    expected = [evaluate(math_code, **numbers) for numbers in number_values(case)]
    assert all(isinstance(v, float) for v in expected), expected
    torch.testing.assert_close(values, torch.tensor(expected, dtype=torch.float64))


@pytest.mark.parametrize("case", NO_MATH_CASES, ids=str)
def test_call_on_numbers_without_math_spelling_raises(case: Case) -> None:
    """A function Python's math lacks refuses to print on numbers, even inside a formula."""
    message = f"^{case.name} of a number input is not supported; declare the input as a tensor$"
    call = call_on(case, tensors=False)
    for expr in (call, X * call + 1, functions.call("exp", call)):
        with pytest.raises(UnprintableError, match=message):
            printed(expr)
    # The same call on a tensor prints with torch.
    assert printed(call_on(case, tensors=True)).startswith("torch.")


def _sympy_function(name: str) -> Callable[..., sympy.Expr] | None:
    """sympy's own function spelled like `name` or one of its aliases, if any."""
    if name == "sinc":  # torch's sinc is normalised: sin(pi x) / (pi x)
        return lambda a: sympy.sinc(sympy.pi * a)
    for namespace in (sympy, cfunctions):
        for spelling in (name, *FUNCTIONS[name].aliases):
            candidate = getattr(namespace, spelling, None)
            if callable(candidate):
                return candidate  # type: ignore[no-any-return]
    return None


@pytest.mark.parametrize("case", ALL_CASES, ids=str)
def test_torch_spelling_matches_sympy(case: Case) -> None:
    """Where sympy has a function of the same name, the values agree with it."""
    reference = _sympy_function(case.name)
    if reference is None:
        pytest.skip(f"sympy has no function named {case.name}")
    values = evaluate(printed(call_on(case, tensors=True)), **tensor_values(case))
    expected = []
    for numbers in number_values(case):
        arguments = [
            sympy.Float(numbers[a.name]) if isinstance(a, sympy.Symbol) else a
            for a in call_arguments(case, tensors=False)
        ]
        expected.append(float(reference(*arguments).evalf(30)))
    torch.testing.assert_close(values, torch.tensor(expected, dtype=torch.float64))


@pytest.mark.parametrize("case", ALL_CASES, ids=str)
def test_derivative_rule_matches_autograd(case: Case) -> None:
    node = call_on(case, tensors=True)
    arguments = tensor_values(case, requires_grad=True)
    value = evaluate(printed(node), **arguments)
    expected = torch.autograd.grad(value.sum(), list(arguments.values()))
    detached = {k: v.detach() for k, v in arguments.items()}
    for index, want in zip(case.variables, expected, strict=True):
        actual = as_tensor(evaluate(printed(node.fdiff(index + 1)), **detached), want)
        torch.testing.assert_close(actual, want, msg=lambda m, i=index: f"argument {i}: {m}")


# Shifts b such that 0.5 * x + b stays in the domain for the sample points x.
_SHIFTS: dict[tuple[float, ...], float] = {
    _POSITIVE: 0.1,
    _ABOVE_ONE: 0.6,
    _PROBABILITY: 0.1,
    _GAMMA: 0.2,
}


def symgrad_gradients(spec: Spec, values: dict[str, Any]) -> dict[str, Any]:
    """Evaluate symgrad's backward of the one output of `spec` (incoming gradient 1).

    Returns the gradient of each input that gets one; an input whose derivative is zero
    gets zeros of its shape, as autograd gives (Note [Cancelled shapes]).
    """
    derived = derive(spec)
    (part,) = derived.backward
    y = evaluate(printed(spec.outputs[0].expr, derived.tensor_symbols), **values)
    namespace = dict(values)
    namespace.update({"y": y, part.grad.name: torch.ones_like(y)})
    for fact in derived.shape_facts:  # an input's shape, for the zeros of a zero derivative
        assert isinstance(fact.expr, reductions.ShapeOf), fact
        namespace[fact.target.name] = values[str(fact.expr.argument)].shape
    shared = [s for block in derived.prelude for s in block.statements]
    shared += [s for block in part.shared for s in block.statements]
    for statement in shared:
        code = printed(statement.expr, derived.tensor_symbols)
        namespace[statement.target.name] = evaluate(code, **namespace)
    gradients = {}
    for gradient in part.gradients:
        scope = dict(namespace)
        for statement in gradient.statements:
            code = printed(statement.expr, derived.tensor_symbols)
            scope[statement.target.name] = evaluate(code, **scope)
        code = printed(gradient.expr, derived.tensor_symbols)
        gradients[gradient.input.name] = evaluate(code, **scope)
    return gradients


@pytest.mark.parametrize("case", ALL_CASES, ids=str)
def test_derivative_rule_of_a_composite_argument(case: Case) -> None:
    """The chain rule through the arguments: d f(x / 2 + b) / dx by symgrad's reverse mode."""
    domains = argument_domains(case.name)
    texts = [str(a) for a in call_arguments(case, tensors=True)]
    for k in case.variables:
        texts[k] = f"0.5 * {texts[k]} + {_SHIFTS.get(domains[k], -0.1)}"
    spec = symgrad.spec_from_dict(
        {
            "name": "Chain",
            "inputs": {TENSOR_ARGUMENTS[k].name: "tensor" for k in case.variables},
            "outputs": {"y": f"{case.name}({', '.join(texts)})"},
        }
    )
    arguments = tensor_values(case, requires_grad=True)
    y = evaluate(printed(spec.outputs[0].expr), **arguments)
    grads = torch.autograd.grad(y.sum(), list(arguments.values()))
    gradients = symgrad_gradients(spec, {k: v.detach() for k, v in arguments.items()})
    for argument, want in zip(arguments, grads, strict=True):
        if argument not in gradients:  # a zero derivative emits no gradient (None)
            assert torch.count_nonzero(want) == 0
            continue
        torch.testing.assert_close(as_tensor(gradients[argument], want), want)


@pytest.mark.parametrize("case", ALL_CASES, ids=str)
def test_derivative_rule_on_numbers(case: Case) -> None:
    """The derivative printed for a number argument (math) equals the tensor one.

    A derivative that calls a function with no math spelling (erfinv' = ... erfinv,
    lgamma' = digamma) refuses to print on numbers instead.
    """
    for index in case.variables:
        tensor_code = printed(call_on(case, tensors=True).fdiff(index + 1))
        torch_values = as_tensor(evaluate(tensor_code, **tensor_values(case)), like(case))
        derivative = call_on(case, tensors=False).fdiff(index + 1)
        if needs_tensors(derivative):
            with pytest.raises(UnprintableError, match="declare the input as a tensor"):
                printed(derivative)
            continue
        code = printed(derivative)
        assert "torch" not in code
        math_values = [float(evaluate(code, **numbers)) for numbers in number_values(case)]
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
@pytest.mark.parametrize("case", MATH_CASES, ids=str)
def test_math_call_is_one_operand(case: Case, context: str) -> None:
    """A call on a number evaluates like the same call on a tensor inside any expression."""
    call = call_on(case, tensors=False)
    expr = _CONTEXTS[context](call)
    x = torch.tensor([0.6, 1.4], dtype=torch.float64)
    code = printed(expr)
    # The same expression with the numbers as 0-d tensors prints every call with torch.
    reference = printed(expr, frozenset({X, *NUMBER_ARGUMENTS}))
    for numbers in number_values(case):
        if context == "1/(1+f)" and abs(1 + evaluate(printed(call), **numbers)) < 0.1:
            continue
        as_tensors = {k: torch.tensor(v, dtype=torch.float64) for k, v in numbers.items()}
        expected = evaluate(reference, x=x, **as_tensors)
        actual = evaluate(code, x=x, **numbers)
        torch.testing.assert_close(
            as_tensor(actual, x), as_tensor(expected, x), msg=lambda m, c=code: f"{c}: {m}"
        )


# Compound arguments p - q and -p + q (p, q numbers) of a call, to check that a math
# spelling parenthesises its operands (`x * log(y)` of x = p - q).
_P = tuple(sympy.Symbol(f"p{k}", real=True) for k in range(_MAX_ARITY))
_Q = tuple(sympy.Symbol(f"q{k}", real=True) for k in range(_MAX_ARITY))


@pytest.mark.parametrize("negated", [False, True])
@pytest.mark.parametrize("case", MATH_CASES, ids=str)
def test_math_spelling_of_compound_arguments(case: Case, negated: bool) -> None:
    """A call on differences of numbers equals the call on their values."""
    compound = [-_P[k] + _Q[k] if negated else _P[k] - _Q[k] for k in range(case.arity)]
    code = printed(FUNCTIONS[case.name].sympy_class(*compound))
    assert "+" in code or " - " in code, code
    plain = printed(call_on(case, tensors=False))
    for numbers in number_values(case):
        values = {}
        for k in range(case.arity):
            value = numbers[NUMBER_ARGUMENTS[k].name]
            values[_P[k].name] = 0.5 - value if negated else value + 0.5
            values[_Q[k].name] = 0.5
        actual = evaluate(code, **values)
        torch.testing.assert_close(actual, evaluate(plain, **numbers), msg=code)


# --- Functions with special cases ----------------------------------------------------

# Halves (ties), integers and in-between points, negative and positive.
_ROUNDING_POINTS = (-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -2.0, 0.0, 3.0, -1.7, -0.2, 0.2, 2.7)


@pytest.mark.parametrize("name", ["floor", "ceil", "round"])
def test_rounding_matches_torch(name: str) -> None:
    """floor, ceil and round (half to even) agree with torch at ties; their derivative is 0."""
    torch_function = getattr(torch, name)
    x = torch.tensor(_ROUNDING_POINTS, dtype=torch.float64, requires_grad=True)
    want = torch_function(x)
    values = evaluate(printed(functions.call(name, X)), x=x.detach())
    torch.testing.assert_close(values, want.detach(), rtol=0, atol=0)
    math_code = printed(functions.call(name, LO))
    math_values = [evaluate(math_code, lo=v) for v in _ROUNDING_POINTS]
    assert all(isinstance(v, float) for v in math_values), math_values
    torch.testing.assert_close(torch.tensor(math_values, dtype=torch.float64), want.detach())
    (grad,) = torch.autograd.grad(want.sum(), x)
    assert torch.count_nonzero(grad) == 0
    assert functions.call(name, X).fdiff(1) == 0
    assert sympy.diff(functions.call(name, X**2), X) == 0


_INF = float("inf")


@pytest.mark.parametrize(("name", "pole"), [("xlogy", 0.0), ("xlog1py", -1.0)])
def test_xlogy_where_x_is_zero(name: str, pole: float) -> None:
    """torch's rules at x == 0: the value is 0, d/dx is log(y) (log1p) where y is above the
    log's pole and 0 at or below it, even where the log is not finite."""
    finite_y = (0.5, 2.0, pole, pole - 0.5, 1.3, pole + 0.4)
    finite_x = (0.0, 0.0, 0.0, 0.0, -1.2, 0.8)
    ys = (*finite_y, _INF, -_INF, math.nan, pole - 0.5, math.nan)
    xs = (*finite_x, 0.0, 0.0, 0.0, 0.7, 0.7)
    x = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
    y = torch.tensor(ys, dtype=torch.float64, requires_grad=True)
    node = functions.call(name, X, TENSOR_ARGUMENTS[1])
    value = evaluate(printed(node), x=x, x1=y)
    want_value = getattr(torch.special, name)(x, y)
    torch.testing.assert_close(value, want_value, equal_nan=True)
    wants = torch.autograd.grad(want_value.sum(), [x, y])
    assert wants[0][0] == (math.log(0.5) if name == "xlogy" else math.log1p(0.5))
    assert wants[0][2] == wants[0][3] == 0
    for index, want in enumerate(wants):
        actual = evaluate(printed(node.fdiff(index + 1)), x=x.detach(), x1=y.detach())
        torch.testing.assert_close(actual, want, equal_nan=True, msg=f"argument {index}")
    # On finite numbers: the same value and d/dx (d/dy = 0 / 0 at the pole raises).
    number_node = functions.call(name, LO, NUMBER_ARGUMENTS[1])
    n = len(finite_x)
    for expr, want in ((number_node, want_value), (number_node.fdiff(1), wants[0])):
        code = printed(expr)
        values = [evaluate(code, lo=a, lo1=b) for a, b in zip(finite_x, finite_y, strict=True)]
        torch.testing.assert_close(torch.tensor(values, dtype=torch.float64), want.detach()[:n])


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("erfinv", (0.5,)),
        ("erfinv", (-0.9,)),
        ("digamma", (0.5,)),
        ("lgamma", (-0.5,)),
        ("floor", (-0.5,)),
        ("ceil", (-0.5,)),
        ("round", (2.5,)),
        ("round", (-0.5,)),
        ("atan2", (1.0, -1.0)),
        ("hypot", (3.0, 4.0)),
        ("logit", (0.3,)),
        ("xlogy", (0.0, 0.0)),
        ("xlog1py", (2.0, 0.5)),
    ],
    ids=repr,
)
def test_call_on_float_constants(name: str, arguments: tuple[float, ...]) -> None:
    """sympy folds some calls on float constants with mpmath: folded or printed with math,
    the value is torch's."""
    node = functions.call(name, *map(sympy.Float, arguments))
    tensors = [torch.tensor(a, dtype=torch.float64) for a in arguments]
    code = PYTHON[name].torch.format(*(f"a{k}" for k in range(len(arguments))))
    want = evaluate(code, **{f"a{k}": t for k, t in enumerate(tensors)})
    value = float(node) if node.is_Number else evaluate(printed(node))
    torch.testing.assert_close(torch.tensor(value, dtype=torch.float64), want)


@pytest.mark.parametrize(
    ("name", "argument"), [("erfinv", 1.5), ("digamma", 0.0), ("digamma", -2.0)], ids=repr
)
def test_call_on_a_constant_outside_the_domain_stays_a_call(name: str, argument: float) -> None:
    """mpmath raises where torch gives nan or inf: the call is kept (it does not fold)."""
    node = functions.call(name, sympy.Float(argument))
    assert type(node) is FUNCTIONS[name].sympy_class
    assert node.args == (sympy.Float(argument),)


def test_polygamma_order_may_be_an_int_input() -> None:
    """polygamma(n, x) with n an int input: the gradient of x is polygamma(n + 1, x)."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Polygamma",
            "inputs": {"n": "int", "x": "tensor"},
            "outputs": {"y": "polygamma(n, x)"},
        }
    )
    n = spec.inputs[0].symbol
    assert printed(spec.outputs[0].expr.fdiff(2), frozenset({X})) == (
        "torch.special.polygamma(1 + n, x)"
    )
    assert spec.outputs[0].expr.fdiff(1) == 0
    assert n not in X.free_symbols
    for order in (0, 1, 2):
        x = torch.tensor(_GAMMA, dtype=torch.float64, requires_grad=True)
        (want,) = torch.autograd.grad(torch.special.polygamma(order, x).sum(), x)
        gradients = symgrad_gradients(spec, {"n": order, "x": x.detach()})
        assert set(gradients) == {"x"}
        torch.testing.assert_close(gradients["x"], want)


def test_polygamma_of_a_float_order_fails_in_torch() -> None:
    """torch takes only an int order: the spec must pass an integer constant or int input."""
    code = printed(functions.call("polygamma", sympy.Float(1.0), X))
    assert code == "torch.special.polygamma(1.0, x)"
    with pytest.raises(TypeError, match="must be int"):
        evaluate(code, x=torch.tensor(_GAMMA, dtype=torch.float64))


@pytest.mark.parametrize(
    "name",
    [name for name in ALL_FUNCTIONS if FUNCTIONS[name].arity == 2 and name != "polygamma"],
)
@pytest.mark.parametrize("number_first", [False, True])
def test_call_on_a_tensor_and_a_number(name: str, number_first: bool) -> None:
    """f(x, lo) and f(lo, x) evaluate like f of two tensors."""
    points = argument_domains(name)
    arguments = [X, LO] if not number_first else [LO, X]
    node = functions.call(name, *arguments)
    x = torch.tensor(points[1 if number_first else 0], dtype=torch.float64)
    lo = points[0 if number_first else 1][0]
    code = printed(node, frozenset({X}))
    reference = printed(node, frozenset({X, LO}))
    want = evaluate(reference, x=x, lo=torch.tensor(lo, dtype=torch.float64))
    torch.testing.assert_close(evaluate(code, x=x, lo=lo), want)


# --- Aliases ------------------------------------------------------------------------

_ALIASES = {
    "Abs": "abs",
    "ln": "log",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "expit": "sigmoid",
    "logsigmoid": "log_sigmoid",
    "loggamma": "lgamma",
    "gammaln": "lgamma",
    "psi": "digamma",
    "arctan2": "atan2",
    "ceiling": "ceil",
}


def test_every_alias_is_known() -> None:
    table = {alias: info.name for info in FUNCTIONS.values() for alias in info.aliases}
    assert table == _ALIASES


@pytest.mark.parametrize(("alias", "name"), sorted(_ALIASES.items()))
def test_alias_maps_to_function(alias: str, name: str) -> None:
    assert SPELLINGS[alias] == name
    arguments = TENSOR_ARGUMENTS[: FUNCTIONS[name].arity]
    node = functions.call(alias, *arguments)
    assert type(node) is FUNCTIONS[name].sympy_class
    assert node.args == arguments
    names = [a.name for a in arguments]
    spec = symgrad.spec_from_dict(
        {
            "name": "Alias",
            "inputs": {a: "tensor" for a in names},
            "outputs": {"y": f"{alias}({', '.join(names)})"},
        }
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
        (sympy.erfinv(sympy.Symbol("x")), "erfinv"),
        (sympy.loggamma(sympy.Symbol("x")), "lgamma"),
        (sympy.floor(sympy.Symbol("x")), "floor"),
        (sympy.ceiling(sympy.Symbol("x")), "ceil"),
        (cfunctions.hypot(sympy.Symbol("x"), sympy.Symbol("x")), "hypot"),
    ],
)
def test_sympy_functions_map_to_the_table(sympy_expr: sympy.Expr, name: str) -> None:
    spec = symgrad.spec_from_dict(
        {"name": "FromSympy", "inputs": {"x": "tensor"}, "outputs": {"y": sympy_expr}}
    )
    expr = spec.outputs[0].expr
    assert type(expr) is FUNCTIONS[name].sympy_class
    assert set(expr.args) == {spec.inputs[0].symbol}


@pytest.mark.parametrize(
    ("sympy_expr", "name", "order"),
    [
        (sympy.atan2(sympy.Symbol("y"), sympy.Symbol("x")), "atan2", ("y", "x")),
        # sympy writes digamma(x) as polygamma(0, x).
        (sympy.digamma(sympy.Symbol("x")), "polygamma", (0, "x")),
        (sympy.polygamma(2, sympy.Symbol("x")), "polygamma", (2, "x")),
    ],
    ids=repr,
)
def test_sympy_functions_of_two_arguments_map_to_the_table(
    sympy_expr: sympy.Expr, name: str, order: tuple[str | int, ...]
) -> None:
    spec = symgrad.spec_from_dict(
        {
            "name": "FromSympy",
            "inputs": {"x": "tensor", "y": "tensor"},
            "outputs": {"y_out": sympy_expr},
        }
    )
    symbols = {i.name: i.symbol for i in spec.inputs}
    expr = spec.outputs[0].expr
    assert type(expr) is FUNCTIONS[name].sympy_class
    assert expr.args == tuple(symbols[a] if isinstance(a, str) else a for a in order)


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
        (functions.call("exp", LO), "(math.inf if (lo) > 709.78 else math.exp(lo))"),
        (functions.call("exp", -POSITIVE), "math.exp(-lo)"),
        (functions.call("log", POSITIVE), "math.log(lo)"),
        (
            functions.call("log", LO),
            "(math.log(lo) if (lo) > 0 else -math.inf if (lo) == 0 else math.nan)",
        ),
        (functions.call("abs", LO), "abs(lo)"),
        (LO ** sympy.Rational(1, 2), "(math.sqrt(lo) if (lo) >= 0 else math.nan)"),
        (POSITIVE ** sympy.Rational(1, 2), "math.sqrt(lo)"),
        (1 / LO, "(1 / lo if lo else math.copysign(math.inf, lo))"),
        (2 / (LO * POSITIVE), "(2 / (lo*lo) if lo*lo else 2 * math.copysign(math.inf, lo*lo))"),
        (2 / POSITIVE, "2/lo"),
        (X / (2 * LO), "(1/2 / lo if lo else 1/2 * math.copysign(math.inf, lo))*x"),
        (X / LO, "x/lo"),
        (functions.call("sigmoid", LO + 1), "(0.5 + 0.5 * math.tanh(0.5 * (1 + lo)))"),
        (
            functions.call("tanh", functions.call("exp", -POSITIVE) * X),
            "torch.tanh(x*math.exp(-lo))",
        ),
        (functions.call("polygamma", 1, X), "torch.special.polygamma(1, x)"),
        (functions.call("polygamma", 1, X).fdiff(2), "torch.special.polygamma(2, x)"),
        (functions.call("digamma", X).fdiff(1), "torch.special.polygamma(1, x)"),
        (functions.call("lgamma", X).fdiff(1), "torch.special.digamma(x)"),
        (functions.call("gammaln", POSITIVE), "math.lgamma(lo)"),
        (
            functions.call("gammaln", LO),
            "(math.inf if (lo) <= 0 and (lo) % 1 == 0 or (lo) > 2.5e305 else math.lgamma(lo))",
        ),
        (
            functions.call("erfinv", X).fdiff(1),
            "math.sqrt(math.pi)/2*torch.exp(torch.special.erfinv(x)**2)",
        ),
        (functions.call("xlogy", X, LO), "torch.special.xlogy(x, lo)"),
        (
            functions.call("xlogy", NUMBER_ARGUMENTS[1], POSITIVE),
            "(0.0 if (lo1) == 0 else (lo1) * math.log(lo))",
        ),
        (
            functions.call("logit", LO + 1),
            "(math.log((1 + lo) / (1 - (1 + lo))) if 0 < (1 + lo) < 1 else -math.inf"
            " if (1 + lo) == 0 else math.inf if (1 + lo) == 1 else math.nan)",
        ),
        (
            functions.call("hypot", X, LO).fdiff(1),
            "x/torch.hypot(x, torch.tensor(lo, dtype=x.dtype))",
        ),
        (functions.call("arctan2", LO, NUMBER_ARGUMENTS[1]), "math.atan2(lo, lo1)"),
        (functions.call("round", LO), "float(round(lo))"),
        (functions.call("ceil", LO - 1), "float(math.ceil(-1 + lo))"),
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
        (functions.call("floor", LO) * X, True),
        (functions.call("round", LO) * X, False),
        (functions.call("xlogy", LO, X), False),
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
    "Integer 10**400": sympy.Integer(10**400),
    "x / 10**400": X / 10**400,
}


@pytest.mark.parametrize("what", sorted(_UNPRINTABLE))
def test_unprintable_raises(what: str) -> None:
    """Anything without a torch spelling raises instead of printing broken code."""
    with pytest.raises(UnprintableError):
        printed(_UNPRINTABLE[what])
