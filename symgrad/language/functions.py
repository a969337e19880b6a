"""The elementwise functions of the spec language, each defined once.

Every function is its own sympy `Function` subclass that never evaluates on construction
and knows its derivative. sympy's built-in functions rewrite themselves whenever they are
built or differentiated, which makes large formulas slow to build and hard to predict;
ours stay exactly as written. How a backend prints each function is the backend's own
table (the Python backend's is symgrad.backends.python.spellings).

Note [Derivatives in terms of the result]: where a derivative is cheap to express through
the function's own value (exp' = exp, sigmoid' = s (1 - s), tanh' = 1 - t**2), the rule
uses the node itself, so the backward reuses the forward value instead of recomputing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy

from symgrad.language import derivatives, piecewise


class ElementwiseFunction(sympy.Function):
    """A symgrad function applied elementwise; it is never evaluated symbolically."""

    @classmethod
    def eval(cls, *args: Any) -> None:
        """Keep the call as written: no automatic rewriting."""
        return None

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        """Return the partial derivative with respect to argument `argindex` (1-based)."""
        return FUNCTIONS[type(self).__name__].derivative(self, argindex - 1)

    def _eval_is_extended_real(self) -> bool:
        return True

    def _eval_evalf(self, prec: int) -> sympy.Expr | None:
        """Fold a call on float constants with mpmath, as sympy does (erfinv(0.5)).

        Outside its domain mpmath raises (erfinv(1.5), digamma(0.0)) where torch returns
        nan or inf: the call then stays as written instead of failing to build.
        """
        try:
            value: sympy.Expr | None = super()._eval_evalf(prec)
        except (ValueError, ZeroDivisionError):
            return None
        return value


Derivative = Callable[[sympy.Expr, int], sympy.Expr]


@dataclass(frozen=True)
class FunctionInfo:
    """What one language function is: its name, arity and derivative.

    How a backend spells it is the backend's (symgrad.backends.python.spellings).
    """

    # The name in the spec language and in docstrings.
    name: str
    # Number of arguments.
    arity: int
    # The torch function that defines its values, whose conventions (at poles, kinks, NaN)
    # the derivative follows; the generator evaluates it to find safe points. None where
    # torch has no function of its own: `definition` defines the values then.
    torch_function: str | None
    # Partial derivative: (node, 0-based argument index) -> expression.
    derivative: Derivative
    # Other accepted spellings, such as sympy's own names.
    aliases: tuple[str, ...] = ()
    # For a function torch lacks: its value in terms of other language functions, as the
    # backends spell it out with torch's own (the arguments -> expression).
    definition: Callable[..., sympy.Expr] | None = None

    def __post_init__(self) -> None:
        """A function is torch's or defined by others (log1mexp), never both or neither."""
        if (self.torch_function is None) == (self.definition is None):
            raise ValueError(f"{self.name}: give a torch function or a definition, not both")

    @property
    def sympy_class(self) -> type[ElementwiseFunction]:
        """The sympy class whose instances are calls of this function."""
        return _CLASSES[self.name]


def _call(name: str, *args: sympy.Expr) -> sympy.Expr:
    """Build a call of a language function by name."""
    return _CLASSES[name](*args)


def _rule(rule: Callable[..., sympy.Expr]) -> Derivative:
    """A rule of symgrad.language.derivatives, given the builder of calls it needs."""
    return functools.partial(rule, _call)


def _arg(node: sympy.Expr) -> sympy.Expr:
    return node.args[0]


# -ln 2, where log1mexp switches forms, as the float the backends print.
_MINUS_LN2 = sympy.Float(-math.log(2))


def _log1mexp(u: sympy.Expr) -> sympy.Expr:
    """log(1 - exp(u)) for u <= 0 as Maechler (2012) computes it, accurate over the range.

    log(-expm1(u)) loses u's last bits below -ln 2 (-expm1(-30) rounds to 1: 0 instead of
    -9.4e-14), log1p(-exp(u)) above it (exp(-1e-4) rounds). NaN for u > 0, as both.
    """
    return piecewise.where(
        piecewise.Gt(u, _MINUS_LN2),
        _call("log", -_call("expm1", u)),
        _call("log1p", -_call("exp", u)),
    )


_HALF = sympy.Rational(1, 2)
_TWO_OVER_SQRT_PI = 2 / sympy.sqrt(sympy.pi)
_SQRT_PI_OVER_TWO = sympy.sqrt(sympy.pi) / 2

_TABLE: tuple[FunctionInfo, ...] = (
    FunctionInfo("exp", 1, "torch.exp", lambda f, i: f),
    FunctionInfo("log", 1, "torch.log", lambda f, i: 1 / _arg(f), ("ln",)),
    FunctionInfo("log1p", 1, "torch.log1p", lambda f, i: 1 / (1 + _arg(f))),
    # exp(x), not expm1(x) + 1: near x = -30 the sum rounds to 0 (the cancellation the
    # spec avoided by writing expm1).
    FunctionInfo("expm1", 1, "torch.expm1", lambda f, i: _call("exp", _arg(f))),
    FunctionInfo("sqrt", 1, "torch.sqrt", lambda f, i: _HALF / f),
    FunctionInfo("rsqrt", 1, "torch.rsqrt", lambda f, i: -_HALF * f**3),
    FunctionInfo("sin", 1, "torch.sin", lambda f, i: _call("cos", _arg(f))),
    FunctionInfo("cos", 1, "torch.cos", lambda f, i: -_call("sin", _arg(f))),
    FunctionInfo("tan", 1, "torch.tan", lambda f, i: 1 + f**2),
    FunctionInfo("tanh", 1, "torch.tanh", lambda f, i: 1 - f**2),
    FunctionInfo("sinh", 1, "torch.sinh", lambda f, i: _call("cosh", _arg(f))),
    FunctionInfo("cosh", 1, "torch.cosh", lambda f, i: _call("sinh", _arg(f))),
    FunctionInfo(
        "asin", 1, "torch.asin", lambda f, i: _call("rsqrt", 1 - _arg(f) ** 2), ("arcsin",)
    ),
    FunctionInfo(
        "acos", 1, "torch.acos", lambda f, i: -_call("rsqrt", 1 - _arg(f) ** 2), ("arccos",)
    ),
    FunctionInfo("atan", 1, "torch.atan", lambda f, i: 1 / (1 + _arg(f) ** 2), ("arctan",)),
    FunctionInfo("asinh", 1, "torch.asinh", lambda f, i: _call("rsqrt", _arg(f) ** 2 + 1)),
    FunctionInfo("acosh", 1, "torch.acosh", lambda f, i: _call("rsqrt", _arg(f) ** 2 - 1)),
    FunctionInfo("atanh", 1, "torch.atanh", lambda f, i: 1 / (1 - _arg(f) ** 2)),
    FunctionInfo("sigmoid", 1, "torch.sigmoid", lambda f, i: f * (1 - f), ("expit",)),
    FunctionInfo(
        "softplus", 1, "torch.nn.functional.softplus", lambda f, i: _call("sigmoid", _arg(f))
    ),
    FunctionInfo(
        "log_sigmoid",
        1,
        "torch.nn.functional.logsigmoid",
        # sigmoid(-x) = 1 - exp(log_sigmoid(x)): exact where sigmoid(-x) underflows to 0
        # (x = 100 in float32; torch's kernel gives 3.8e-44 there).
        lambda f, i: -_call("expm1", f),
        ("logsigmoid",),
    ),
    FunctionInfo("abs", 1, "torch.abs", lambda f, i: _call("sign", _arg(f)), ("Abs",)),
    FunctionInfo("sign", 1, "torch.sign", lambda f, i: sympy.Integer(0)),
    FunctionInfo(
        "erf", 1, "torch.erf", lambda f, i: _TWO_OVER_SQRT_PI * _call("exp", -_arg(f) ** 2)
    ),
    FunctionInfo(
        "erfc", 1, "torch.erfc", lambda f, i: -_TWO_OVER_SQRT_PI * _call("exp", -_arg(f) ** 2)
    ),
    FunctionInfo(
        "erfinv", 1, "torch.special.erfinv", lambda f, i: _SQRT_PI_OVER_TWO * _call("exp", f**2)
    ),
    FunctionInfo(
        "lgamma",
        1,
        "torch.special.gammaln",
        lambda f, i: _call("digamma", _arg(f)),
        ("loggamma", "gammaln"),
    ),
    FunctionInfo(
        "digamma",
        1,
        "torch.special.digamma",
        lambda f, i: _call("polygamma", sympy.Integer(1), _arg(f)),
        ("psi",),
    ),
    # polygamma(n, x): the order n must be a non-negative integer constant or int input.
    FunctionInfo("polygamma", 2, "torch.special.polygamma", _rule(derivatives.polygamma)),
    FunctionInfo("xlogy", 2, "torch.special.xlogy", _rule(derivatives.xlogy)),
    FunctionInfo("xlog1py", 2, "torch.special.xlog1py", _rule(derivatives.xlog1py)),
    FunctionInfo("logit", 1, "torch.special.logit", lambda f, i: 1 / (_arg(f) * (1 - _arg(f)))),
    FunctionInfo("hypot", 2, "torch.hypot", lambda f, i: f.args[i] / f),
    # d logaddexp(a, b) / da = exp(a) / (exp(a) + exp(b)) = sigmoid(a - b), finite anywhere.
    FunctionInfo(
        "logaddexp",
        2,
        "torch.logaddexp",
        lambda f, i: _call("sigmoid", f.args[i] - f.args[1 - i]),
    ),
    # d log(1 - exp(u)) / du = exp(u) / expm1(u): accurate where 1 - exp(u) cancels (-1e4
    # at u = -1e-4) and where it rounds to 1 (-9.4e-14 at u = -30). Not -1 / expm1(-u):
    # expm1(100) overflows float32, giving -0 at u = -100 for -3.7e-44.
    FunctionInfo(
        "log1mexp",
        1,
        None,
        lambda f, i: _call("exp", _arg(f)) / _call("expm1", _arg(f)),
        definition=_log1mexp,
    ),
    FunctionInfo("atan2", 2, "torch.atan2", _rule(derivatives.atan2), ("arctan2",)),
    FunctionInfo("sinc", 1, "torch.special.sinc", _rule(derivatives.sinc)),
    FunctionInfo("floor", 1, "torch.floor", derivatives.zero),
    FunctionInfo("ceil", 1, "torch.ceil", derivatives.zero, ("ceiling",)),
    FunctionInfo("round", 1, "torch.round", derivatives.zero),
)

_CLASSES: dict[str, type[ElementwiseFunction]] = {
    info.name: type(info.name, (ElementwiseFunction,), {"nargs": info.arity}) for info in _TABLE
}

# Every function by its language name.
FUNCTIONS: dict[str, FunctionInfo] = {info.name: info for info in _TABLE}

# Every accepted spelling (names and aliases) -> the function's language name.
SPELLINGS: dict[str, str] = {
    **{alias: info.name for info in _TABLE for alias in info.aliases},
    **{info.name: info.name for info in _TABLE},
}


def call(name: str, *args: sympy.Expr) -> sympy.Expr:
    """Build a call of the function spelled `name` (a language name or an alias)."""
    return _call(SPELLINGS[name], *args)
