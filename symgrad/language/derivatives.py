"""Derivative rules of the language functions whose derivatives need more than one line.

Each follows torch's own backward formula, conventions at poles and zeros included.
A rule that builds calls of other language functions takes `call` (functions.py's
builder) first, so this module does not import the table that uses it.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from symgrad.language import piecewise

# Builds a call of a language function by name: `call("cos", x)`.
Call = Callable[..., sympy.Expr]


def zero(node: sympy.Expr, index: int) -> sympy.Expr:
    """The derivative of a piecewise-constant function, as torch defines it: 0 everywhere."""
    return sympy.Integer(0)


def polygamma(call: Call, node: sympy.Expr, index: int) -> sympy.Expr:
    """d polygamma(n, x) / dx = polygamma(n + 1, x).

    The order n is never differentiated (torch takes it as a Python int): it must be an
    integer constant or an int input, so its partial is 0.
    """
    n, x = node.args
    return sympy.Integer(0) if index == 0 else call("polygamma", n + 1, x)


def _log_weight(x: sympy.Expr, y: sympy.Expr, pole: int) -> sympy.Expr:
    """torch's mask for d/dx of xlogy: 0 where x == 0 and y <= pole (the log's pole), else 1.

    A nan x (nan != 0) keeps the weight 1, so d/dx is log(y) there, as torch has it.
    """
    vanishes = sympy.And(sympy.Eq(x, 0), y <= pole)
    return piecewise.where(vanishes, sympy.Integer(0), sympy.Integer(1))


def xlogy(call: Call, node: sympy.Expr, index: int) -> sympy.Expr:
    """torch's rule: d/dx = log(y), but 0 where x == 0 and y <= 0; d/dy = x / y."""
    x, y = node.args
    return call("xlogy", _log_weight(x, y, 0), y) if index == 0 else x / y


def xlog1py(call: Call, node: sympy.Expr, index: int) -> sympy.Expr:
    """torch's rule: d/dx = log1p(y), but 0 where x == 0 and y <= -1; d/dy = x / (1 + y)."""
    x, y = node.args
    return call("xlog1py", _log_weight(x, y, -1), y) if index == 0 else x / (1 + y)


def sinc(call: Call, node: sympy.Expr, index: int) -> sympy.Expr:
    """(cos(pi x) - sinc(x)) / x, and its limit 0 at x = 0, as torch.special.sinc has it.

    The division is evaluated at 1 where x == 0, so no NaN reaches double backward
    (Note [Untaken branches] in symgrad.ad.guards).
    """
    x = node.args[0]
    nonzero = piecewise.Ne(x, 0)
    safe = piecewise.where(nonzero, x, sympy.Integer(1))
    slope = (call("cos", sympy.pi * safe) - call("sinc", safe)) / safe
    return piecewise.where(nonzero, slope, sympy.Integer(0))


def atan2(call: Call, node: sympy.Expr, index: int) -> sympy.Expr:
    """d atan2(y, x) / dy = x / (x**2 + y**2); d / dx = -y / (x**2 + y**2).

    Where x**2 + y**2 is 0 (at the origin, or underflowing) torch's gradient is 0, not
    0 / 0: the denominator is 1 there, so the numerator (0, or a tiny number) is the
    gradient, and double backward stays finite too.
    """
    y, x = node.args
    squares = x**2 + y**2
    safe = piecewise.where(sympy.Ne(squares, 0), squares, sympy.Integer(1))
    return (x if index == 0 else -y) / safe
