"""How the Python backend spells each language function: torch for tensors, math for numbers.

The language's table (symgrad.language.functions) says what a function is; this table
says how generated Python calls it. A call with a tensor argument prints the `torch`
format; a call on Python numbers only prints the `math` one, or `safe_math` where the
arguments' assumptions do not prove the call in the domain of Python's math (Note
[Numbers outside the domain] in symgrad.backends.python.domains).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from symgrad.backends.python import domains


@dataclass(frozen=True)
class Spelling:
    """One function's Python spellings, as format strings over the printed arguments."""

    # A call on tensor arguments, e.g. "torch.sigmoid({0})".
    torch: str
    # A call on Python numbers, e.g. "math.exp({0})"; it must read as one operand (a call
    # or parenthesised). None where Python's math has no such function: a call on
    # numbers does not print (the input has to be declared a tensor).
    math: str | None
    # True when the torch function takes tensors only: a number argument beside a tensor
    # is then passed as a 0-d tensor of that tensor's dtype.
    tensor_arguments: bool = False
    # `math` with torch's values (nan, inf) where Python's math would raise.
    safe_math: str | None = None
    # Whether the arguments' assumptions prove the plain `math` spelling cannot raise.
    in_domain: Callable[..., bool] = lambda *args: False


# -ln 2 as a float literal (repr: the shortest that reads back exactly).
_MINUS_LN2 = repr(-math.log(2))
# log1mexp on numbers below 0 (the torch spelling's two forms).
_LOG1MEXP_MATH = (
    f"(math.log(-math.expm1({{0}})) if ({{0}}) > {_MINUS_LN2} else math.log1p(-math.exp({{0}})))"
)

SPELLINGS: dict[str, Spelling] = {
    "exp": Spelling(
        "torch.exp({0})",
        "math.exp({0})",
        safe_math=f"(math.inf if ({{0}}) > {domains.EXP_LIMIT} else math.exp({{0}}))",
        in_domain=domains.at_most(domains.EXP_LIMIT),
    ),
    "log": Spelling(
        "torch.log({0})",
        "math.log({0})",
        safe_math=domains.safe_log("{0}"),
        in_domain=domains.positive,
    ),
    "log1p": Spelling(
        "torch.log1p({0})",
        "math.log1p({0})",
        safe_math=domains.safe_log1p("{0}"),
        in_domain=lambda x: domains.positive(1 + x),
    ),
    "expm1": Spelling(
        "torch.expm1({0})",
        "math.expm1({0})",
        safe_math=f"(math.inf if ({{0}}) > {domains.EXP_LIMIT} else math.expm1({{0}}))",
        in_domain=domains.at_most(domains.EXP_LIMIT),
    ),
    "sqrt": Spelling(
        "torch.sqrt({0})",
        "math.sqrt({0})",
        safe_math="(math.sqrt({0}) if ({0}) >= 0 else math.nan)",
        in_domain=domains.nonnegative,
    ),
    "rsqrt": Spelling(
        "torch.rsqrt({0})",
        "(1 / math.sqrt({0}))",
        safe_math="(1 / math.sqrt({0}) if ({0}) > 0"
        " else math.copysign(math.inf, {0}) if ({0}) == 0 else math.nan)",
        in_domain=domains.positive,
    ),
    "sin": Spelling("torch.sin({0})", "math.sin({0})"),
    "cos": Spelling("torch.cos({0})", "math.cos({0})"),
    "tan": Spelling("torch.tan({0})", "math.tan({0})"),
    "tanh": Spelling("torch.tanh({0})", "math.tanh({0})"),
    "sinh": Spelling(
        "torch.sinh({0})",
        "math.sinh({0})",
        safe_math=f"(math.copysign(math.inf, {{0}}) if abs({{0}}) > {domains.HYPERBOLIC_LIMIT}"
        " else math.sinh({0}))",
        in_domain=domains.within(-domains.HYPERBOLIC_LIMIT, domains.HYPERBOLIC_LIMIT),
    ),
    "cosh": Spelling(
        "torch.cosh({0})",
        "math.cosh({0})",
        safe_math=f"(math.inf if abs({{0}}) > {domains.HYPERBOLIC_LIMIT} else math.cosh({{0}}))",
        in_domain=domains.within(-domains.HYPERBOLIC_LIMIT, domains.HYPERBOLIC_LIMIT),
    ),
    "asin": Spelling(
        "torch.asin({0})",
        "math.asin({0})",
        safe_math="(math.asin({0}) if abs({0}) <= 1 else math.nan)",
        in_domain=domains.within(-1, 1),
    ),
    "acos": Spelling(
        "torch.acos({0})",
        "math.acos({0})",
        safe_math="(math.acos({0}) if abs({0}) <= 1 else math.nan)",
        in_domain=domains.within(-1, 1),
    ),
    "atan": Spelling("torch.atan({0})", "math.atan({0})"),
    "asinh": Spelling("torch.asinh({0})", "math.asinh({0})"),
    "acosh": Spelling(
        "torch.acosh({0})",
        "math.acosh({0})",
        safe_math="(math.acosh({0}) if ({0}) >= 1 else math.nan)",
        in_domain=lambda x: domains.nonnegative(x - 1),
    ),
    "atanh": Spelling(
        "torch.atanh({0})",
        "math.atanh({0})",
        safe_math="(math.atanh({0}) if abs({0}) < 1"
        " else math.copysign(math.inf, {0}) if abs({0}) == 1 else math.nan)",
        in_domain=lambda x: domains.positive(1 - x) and domains.positive(1 + x),
    ),
    "sigmoid": Spelling("torch.sigmoid({0})", "(0.5 + 0.5 * math.tanh(0.5 * ({0})))"),
    "softplus": Spelling(
        "torch.nn.functional.softplus({0})", "(max({0}, 0.0) + math.log1p(math.exp(-abs({0}))))"
    ),
    "log_sigmoid": Spelling(
        "torch.nn.functional.logsigmoid({0})", "(min({0}, 0.0) - math.log1p(math.exp(-abs({0}))))"
    ),
    "abs": Spelling("torch.abs({0})", "abs({0})"),
    "sign": Spelling("torch.sign({0})", "float((({0}) > 0) - (({0}) < 0))"),
    "erf": Spelling("torch.erf({0})", "math.erf({0})"),
    "erfc": Spelling("torch.erfc({0})", "math.erfc({0})"),
    "erfinv": Spelling("torch.special.erfinv({0})", None),
    # Poles at 0, -1, -2, ... and overflow past 2.5e305 are inf in torch.
    # a positive input past 2.5e305 would still raise
    "lgamma": Spelling(
        "torch.special.gammaln({0})",
        "math.lgamma({0})",
        safe_math="(math.inf if ({0}) <= 0 and ({0}) % 1 == 0 or ({0}) > 2.5e305"
        " else math.lgamma({0}))",
        in_domain=domains.positive,
    ),
    "digamma": Spelling("torch.special.digamma({0})", None),
    "polygamma": Spelling("torch.special.polygamma({0}, {1})", None),
    # torch: nan where y is nan, else 0 where x == 0.
    "xlogy": Spelling(
        "torch.special.xlogy({0}, {1})",
        "(0.0 if ({0}) == 0 else ({0}) * math.log({1}))",
        safe_math="(math.nan if ({1}) != ({1}) else 0.0 if ({0}) == 0"
        f" else ({{0}}) * {domains.safe_log('{1}')})",
        in_domain=lambda x, y: domains.positive(y),
    ),
    "xlog1py": Spelling(
        "torch.special.xlog1py({0}, {1})",
        "(0.0 if ({0}) == 0 else ({0}) * math.log1p({1}))",
        safe_math="(math.nan if ({1}) != ({1}) else 0.0 if ({0}) == 0"
        f" else ({{0}}) * {domains.safe_log1p('{1}')})",
        in_domain=lambda x, y: domains.positive(1 + y),
    ),
    "logit": Spelling(
        "torch.special.logit({0})",
        "math.log(({0}) / (1 - ({0})))",
        safe_math="(math.log(({0}) / (1 - ({0}))) if 0 < ({0}) < 1 else -math.inf if ({0}) == 0"
        " else math.inf if ({0}) == 1 else math.nan)",
        in_domain=lambda x: domains.positive(x) and domains.positive(1 - x),
    ),
    "hypot": Spelling("torch.hypot({0}, {1})", "math.hypot({0}, {1})", tensor_arguments=True),
    "atan2": Spelling("torch.atan2({0}, {1})", "math.atan2({0}, {1})", tensor_arguments=True),
    # log(exp(a) + exp(b)) shifted by the larger argument; equal infinities give that
    # infinity, as torch (their difference is nan).
    "logaddexp": Spelling(
        "torch.logaddexp({0}, {1})",
        "(({0}) if ({0}) == ({1}) and math.isinf({0}) else max(({0}), ({1}))"
        " + math.log1p(math.exp(-abs(({0}) - ({1})))))",
        tensor_arguments=True,
    ),
    # torch has no log1mexp: symgrad.language.functions' definition, -ln 2 its switch.
    "log1mexp": Spelling(
        f"torch.where(({{0}}) > {_MINUS_LN2}, torch.log(-torch.expm1({{0}})),"
        " torch.log1p(-torch.exp({0})))",
        _LOG1MEXP_MATH,
        safe_math=f"(math.nan if ({{0}}) > 0 else -math.inf if ({{0}}) == 0 else {_LOG1MEXP_MATH})",
        in_domain=lambda x: domains.positive(-x),
    ),
    "sinc": Spelling(
        "torch.special.sinc({0})",
        "(math.sin(math.pi * ({0})) / (math.pi * ({0})) if ({0}) != 0 else 1.0)",
    ),
    "floor": Spelling("torch.floor({0})", "float(math.floor({0}))"),
    "ceil": Spelling("torch.ceil({0})", "float(math.ceil({0}))"),
    # Python's round, like torch.round, rounds halves to even.
    "round": Spelling("torch.round({0})", "float(round({0}))"),
}
