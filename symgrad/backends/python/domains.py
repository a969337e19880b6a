"""When a call on Python numbers cannot raise, and how to spell it so that it never does.

Note [Numbers outside the domain]: Python's math raises where torch returns nan or inf
(math.log(-1.5), math.exp(1000)). The predicates prove from the arguments' assumptions
that a call is in the domain of Python's math (log of a positive input); the spellings
give torch's values outside it, and are used wherever no such proof exists.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy


def proven(fact: bool | None) -> bool:
    return fact is True


def positive(x: sympy.Expr) -> bool:
    return proven(x.is_positive)


def nonnegative(x: sympy.Expr) -> bool:
    return proven(x.is_nonnegative)


def at_most(bound: float) -> Callable[[sympy.Expr], bool]:
    """x <= bound, for overflow: exp(x) is finite in float64 up to x = 709.78."""
    return lambda x: proven((x - bound).is_nonpositive)


def within(low: float, high: float) -> Callable[[sympy.Expr], bool]:
    return lambda x: proven((x - low).is_nonnegative) and proven((x - high).is_nonpositive)


def safe_log(argument: str) -> str:
    """math.log with torch's values: -inf at 0, nan below 0 and at nan."""
    return (
        f"(math.log({argument}) if ({argument}) > 0"
        f" else -math.inf if ({argument}) == 0 else math.nan)"
    )


def safe_log1p(argument: str) -> str:
    return (
        f"(math.log1p({argument}) if ({argument}) > -1"
        f" else -math.inf if ({argument}) == -1 else math.nan)"
    )


# float64 overflows past exp(709.78) and sinh, cosh(710.47); torch gives inf there.
EXP_LIMIT = 709.78
HYPERBOLIC_LIMIT = 710.47
