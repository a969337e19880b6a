"""The elementwise functions of the spec language, each defined once.

Every function is its own sympy `Function` subclass that never evaluates on construction
and knows its derivative. sympy's built-in functions rewrite themselves whenever they are
built or differentiated, which makes large formulas slow to build and hard to predict;
ours stay exactly as written. Each entry also says how to print the function for a
tensor argument (torch) and for a Python-number argument (math).

Some functions have no `math` spelling (erfinv, digamma, polygamma): Python's math module
lacks them, so a call on number arguments refuses to print (the input has to be declared a
tensor).

Note [Derivatives in terms of the result]: where a derivative is cheap to express through
the function's own value (exp' = exp, sigmoid' = s (1 - s), tanh' = 1 - t**2), the rule
uses the node itself, so the backward reuses the forward value instead of recomputing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy

from symgrad.language import derivatives, domains


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
    """How one language function is built, differentiated and printed."""

    # The name in the spec language and in docstrings.
    name: str
    # Number of arguments.
    arity: int
    # Partial derivative: (node, 0-based argument index) -> expression.
    derivative: Derivative
    # Format string printing a call on tensor arguments, e.g. "torch.sigmoid({0})".
    torch: str
    # Format string printing a call on Python numbers, e.g. "math.exp({0})"; it must read
    # as one operand (a call or parenthesised), so it can stand inside any expression.
    # None where Python's math has no such function: a call on numbers does not print.
    math: str | None
    # Other accepted spellings, such as sympy's own names.
    aliases: tuple[str, ...] = ()
    # True when the torch function takes tensors only: a number argument beside a tensor
    # is then passed as a 0-d tensor of that tensor's dtype.
    tensor_arguments: bool = False
    # Note [Numbers outside the domain]: Python's math raises where torch returns nan or
    # inf (math.log(-1.5), math.exp(1000)). `safe_math` spells the call on numbers with
    # torch's values there; it is used unless `in_domain` proves, from the arguments'
    # assumptions, that the plain `math` spelling cannot raise (log of a positive input).
    safe_math: str | None = None
    in_domain: Callable[..., bool] = lambda *args: False

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


_HALF = sympy.Rational(1, 2)
_TWO_OVER_SQRT_PI = 2 / sympy.sqrt(sympy.pi)
_SQRT_PI_OVER_TWO = sympy.sqrt(sympy.pi) / 2

_TABLE: tuple[FunctionInfo, ...] = (
    FunctionInfo(
        "exp",
        1,
        lambda f, i: f,
        "torch.exp({0})",
        "math.exp({0})",
        safe_math=f"(math.inf if ({{0}}) > {domains.EXP_LIMIT} else math.exp({{0}}))",
        in_domain=domains.at_most(domains.EXP_LIMIT),
    ),
    FunctionInfo(
        "log",
        1,
        lambda f, i: 1 / _arg(f),
        "torch.log({0})",
        "math.log({0})",
        ("ln",),
        safe_math=domains.safe_log("{0}"),
        in_domain=domains.positive,
    ),
    FunctionInfo(
        "log1p",
        1,
        lambda f, i: 1 / (1 + _arg(f)),
        "torch.log1p({0})",
        "math.log1p({0})",
        safe_math=domains.safe_log1p("{0}"),
        in_domain=lambda x: domains.positive(1 + x),
    ),
    FunctionInfo(
        "expm1",
        1,
        lambda f, i: f + 1,
        "torch.expm1({0})",
        "math.expm1({0})",
        safe_math=f"(math.inf if ({{0}}) > {domains.EXP_LIMIT} else math.expm1({{0}}))",
        in_domain=domains.at_most(domains.EXP_LIMIT),
    ),
    FunctionInfo(
        "sqrt",
        1,
        lambda f, i: _HALF / f,
        "torch.sqrt({0})",
        "math.sqrt({0})",
        safe_math="(math.sqrt({0}) if ({0}) >= 0 else math.nan)",
        in_domain=domains.nonnegative,
    ),
    FunctionInfo(
        "rsqrt",
        1,
        lambda f, i: -_HALF * f**3,
        "torch.rsqrt({0})",
        "(1 / math.sqrt({0}))",
        safe_math=(
            "(1 / math.sqrt({0}) if ({0}) > 0"
            " else math.copysign(math.inf, {0}) if ({0}) == 0 else math.nan)"
        ),
        in_domain=domains.positive,
    ),
    FunctionInfo("sin", 1, lambda f, i: _call("cos", _arg(f)), "torch.sin({0})", "math.sin({0})"),
    FunctionInfo("cos", 1, lambda f, i: -_call("sin", _arg(f)), "torch.cos({0})", "math.cos({0})"),
    FunctionInfo("tan", 1, lambda f, i: 1 + f**2, "torch.tan({0})", "math.tan({0})"),
    FunctionInfo("tanh", 1, lambda f, i: 1 - f**2, "torch.tanh({0})", "math.tanh({0})"),
    FunctionInfo(
        "sinh",
        1,
        lambda f, i: _call("cosh", _arg(f)),
        "torch.sinh({0})",
        "math.sinh({0})",
        safe_math=(
            f"(math.copysign(math.inf, {{0}}) if abs({{0}}) > {domains.HYPERBOLIC_LIMIT}"
            " else math.sinh({0}))"
        ),
        in_domain=domains.within(-domains.HYPERBOLIC_LIMIT, domains.HYPERBOLIC_LIMIT),
    ),
    FunctionInfo(
        "cosh",
        1,
        lambda f, i: _call("sinh", _arg(f)),
        "torch.cosh({0})",
        "math.cosh({0})",
        safe_math=f"(math.inf if abs({{0}}) > {domains.HYPERBOLIC_LIMIT} else math.cosh({{0}}))",
        in_domain=domains.within(-domains.HYPERBOLIC_LIMIT, domains.HYPERBOLIC_LIMIT),
    ),
    FunctionInfo(
        "asin",
        1,
        lambda f, i: _call("rsqrt", 1 - _arg(f) ** 2),
        "torch.asin({0})",
        "math.asin({0})",
        ("arcsin",),
        safe_math="(math.asin({0}) if abs({0}) <= 1 else math.nan)",
        in_domain=domains.within(-1, 1),
    ),
    FunctionInfo(
        "acos",
        1,
        lambda f, i: -_call("rsqrt", 1 - _arg(f) ** 2),
        "torch.acos({0})",
        "math.acos({0})",
        ("arccos",),
        safe_math="(math.acos({0}) if abs({0}) <= 1 else math.nan)",
        in_domain=domains.within(-1, 1),
    ),
    FunctionInfo(
        "atan",
        1,
        lambda f, i: 1 / (1 + _arg(f) ** 2),
        "torch.atan({0})",
        "math.atan({0})",
        ("arctan",),
    ),
    FunctionInfo(
        "asinh",
        1,
        lambda f, i: _call("rsqrt", _arg(f) ** 2 + 1),
        "torch.asinh({0})",
        "math.asinh({0})",
    ),
    FunctionInfo(
        "acosh",
        1,
        lambda f, i: _call("rsqrt", _arg(f) ** 2 - 1),
        "torch.acosh({0})",
        "math.acosh({0})",
        safe_math="(math.acosh({0}) if ({0}) >= 1 else math.nan)",
        in_domain=lambda x: domains.nonnegative(x - 1),
    ),
    FunctionInfo(
        "atanh",
        1,
        lambda f, i: 1 / (1 - _arg(f) ** 2),
        "torch.atanh({0})",
        "math.atanh({0})",
        safe_math=(
            "(math.atanh({0}) if abs({0}) < 1"
            " else math.copysign(math.inf, {0}) if abs({0}) == 1 else math.nan)"
        ),
        in_domain=lambda x: domains.positive(1 - x) and domains.positive(1 + x),
    ),
    FunctionInfo(
        "sigmoid",
        1,
        lambda f, i: f * (1 - f),
        "torch.sigmoid({0})",
        "(0.5 + 0.5 * math.tanh(0.5 * ({0})))",
        ("expit",),
    ),
    FunctionInfo(
        "softplus",
        1,
        lambda f, i: _call("sigmoid", _arg(f)),
        "torch.nn.functional.softplus({0})",
        "(max({0}, 0.0) + math.log1p(math.exp(-abs({0}))))",
    ),
    FunctionInfo(
        "log_sigmoid",
        1,
        lambda f, i: _call("sigmoid", -_arg(f)),
        "torch.nn.functional.logsigmoid({0})",
        "(min({0}, 0.0) - math.log1p(math.exp(-abs({0}))))",
        ("logsigmoid",),
    ),
    FunctionInfo(
        "abs",
        1,
        lambda f, i: _call("sign", _arg(f)),
        "torch.abs({0})",
        "abs({0})",
        ("Abs",),
    ),
    FunctionInfo(
        "sign",
        1,
        lambda f, i: sympy.Integer(0),
        "torch.sign({0})",
        "float((({0}) > 0) - (({0}) < 0))",
    ),
    FunctionInfo(
        "erf",
        1,
        lambda f, i: _TWO_OVER_SQRT_PI * _call("exp", -_arg(f) ** 2),
        "torch.erf({0})",
        "math.erf({0})",
    ),
    FunctionInfo(
        "erfc",
        1,
        lambda f, i: -_TWO_OVER_SQRT_PI * _call("exp", -_arg(f) ** 2),
        "torch.erfc({0})",
        "math.erfc({0})",
    ),
    FunctionInfo(
        "erfinv",
        1,
        lambda f, i: _SQRT_PI_OVER_TWO * _call("exp", f**2),
        "torch.special.erfinv({0})",
        None,
    ),
    FunctionInfo(
        "lgamma",
        1,
        lambda f, i: _call("digamma", _arg(f)),
        "torch.special.gammaln({0})",
        "math.lgamma({0})",
        ("loggamma", "gammaln"),
        # Poles at 0, -1, -2, ... and overflow past 2.5e305 are inf in torch.
        safe_math=(
            "(math.inf if ({0}) <= 0 and ({0}) % 1 == 0 or ({0}) > 2.5e305"
            " else math.lgamma({0}))"
        ),
        in_domain=domains.positive,  # a positive input past 2.5e305 would still raise
    ),
    FunctionInfo(
        "digamma",
        1,
        lambda f, i: _call("polygamma", sympy.Integer(1), _arg(f)),
        "torch.special.digamma({0})",
        None,
        ("psi",),
    ),
    # polygamma(n, x): the order n must be a non-negative integer constant or int input.
    FunctionInfo(
        "polygamma", 2, _rule(derivatives.polygamma), "torch.special.polygamma({0}, {1})", None
    ),
    FunctionInfo(
        "xlogy",
        2,
        _rule(derivatives.xlogy),
        "torch.special.xlogy({0}, {1})",
        "(0.0 if ({0}) == 0 else ({0}) * math.log({1}))",
        # torch: nan where y is nan, else 0 where x == 0.
        safe_math=(
            "(math.nan if ({1}) != ({1}) else 0.0 if ({0}) == 0"
            f" else ({{0}}) * {domains.safe_log('{1}')})"
        ),
        in_domain=lambda x, y: domains.positive(y),
    ),
    FunctionInfo(
        "xlog1py",
        2,
        _rule(derivatives.xlog1py),
        "torch.special.xlog1py({0}, {1})",
        "(0.0 if ({0}) == 0 else ({0}) * math.log1p({1}))",
        safe_math=(
            "(math.nan if ({1}) != ({1}) else 0.0 if ({0}) == 0"
            f" else ({{0}}) * {domains.safe_log1p('{1}')})"
        ),
        in_domain=lambda x, y: domains.positive(1 + y),
    ),
    FunctionInfo(
        "logit",
        1,
        lambda f, i: 1 / (_arg(f) * (1 - _arg(f))),
        "torch.special.logit({0})",
        "math.log(({0}) / (1 - ({0})))",
        safe_math=(
            "(math.log(({0}) / (1 - ({0}))) if 0 < ({0}) < 1 else -math.inf if ({0}) == 0"
            " else math.inf if ({0}) == 1 else math.nan)"
        ),
        in_domain=lambda x: domains.positive(x) and domains.positive(1 - x),
    ),
    FunctionInfo(
        "hypot",
        2,
        lambda f, i: f.args[i] / f,
        "torch.hypot({0}, {1})",
        "math.hypot({0}, {1})",
        tensor_arguments=True,
    ),
    FunctionInfo(
        "atan2",
        2,
        _rule(derivatives.atan2),
        "torch.atan2({0}, {1})",
        "math.atan2({0}, {1})",
        ("arctan2",),
        tensor_arguments=True,
    ),
    FunctionInfo(
        "sinc",
        1,
        _rule(derivatives.sinc),
        "torch.special.sinc({0})",
        "(math.sin(math.pi * ({0})) / (math.pi * ({0})) if ({0}) != 0 else 1.0)",
    ),
    FunctionInfo("floor", 1, derivatives.zero, "torch.floor({0})", "float(math.floor({0}))"),
    FunctionInfo(
        "ceil", 1, derivatives.zero, "torch.ceil({0})", "float(math.ceil({0}))", ("ceiling",)
    ),
    # Python's round, like torch.round, rounds halves to even.
    FunctionInfo("round", 1, derivatives.zero, "torch.round({0})", "float(round({0}))"),
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
