"""Recognise Huber's loss and smooth-L1 written as a `where`, so torch's kernels compute them.

| written (`<` or `<=`, either branch order)                    | emitted           |
| ------------------------------------------------------------- | ----------------- |
| where(abs(d) < delta, 0.5 * d**2, delta * (abs(d) - 0.5 * delta)) | huber(d, delta)   |
| where(abs(d) < beta, 0.5 * d**2 / beta, abs(d) - 0.5 * beta)  | smooth_l1(d, beta) |

Each is an identity: a number input outside torch's domain (delta <= 0, beta < 0) gets
the definition, chosen in Python per call (symgrad.language.losses); a constant outside
it keeps the `where`. At |d| = delta both
branches and their slopes agree, so `<=` is the same function. The branches are compared
after expansion, so any spelling sympy expands alike matches (0.5 * delta * abs(d) ...).
A `where` name d stays the loss's argument: the forward computes d, and the backward
reads it saved (one tensor where a and b are two: Note [Residuals] in symgrad.ad.residuals)
rather than a and b; a difference written inside the call goes to torch's kernel as its
two tensors (Note [Losses of a difference]).
"""

from __future__ import annotations

import sympy

from symgrad.ad.idioms import View
from symgrad.language import losses, piecewise


def pointwise_loss(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """huber(d, delta) or smooth_l1(d, beta) for the `where` that computes it."""
    if not isinstance(node, piecewise.Where):
        return None
    split = _split(node, view)
    if split is None:
        return None
    d, bound, inside, outside = split
    for loss in (losses.Huber, losses.SmoothL1):
        candidate = loss(d, bound)
        if candidate.domain() == sympy.false:
            continue
        expected = candidate.expanded()
        assert isinstance(expected, piecewise.Where)
        _, quadratic, linear = expected.args
        if _same(inside, quadratic, view) and _same(outside, linear, view):
            return candidate
    return None


def _split(
    node: piecewise.Where, view: View
) -> tuple[sympy.Expr, sympy.Expr, sympy.Expr, sympy.Expr] | None:
    """(d, bound, value where |d| < bound, value where not) of where(abs(d) < bound, ...)."""
    cond, a, b = node.args
    if isinstance(cond, (piecewise.Gt, piecewise.Ge)):
        small, large, inside, outside = cond.rhs, cond.lhs, a, b
    elif isinstance(cond, (piecewise.Lt, piecewise.Le)):
        small, large, inside, outside = cond.lhs, cond.rhs, a, b
    else:
        return None
    d = view.argument(small, "abs")
    if d is None:
        d = view.argument(large, "abs")
        if d is None:
            return None
        small, large, inside, outside = large, small, outside, inside
    return d, large, inside, outside


def _same(written: sympy.Expr, expected: sympy.Expr, view: View) -> bool:
    """Whether two branches expand alike, `where` names read as their definitions."""
    difference = sympy.expand(_inline(written, view) - _inline(expected, view))
    return bool(difference == 0 or difference.is_zero)


def _inline(expr: sympy.Expr, view: View) -> sympy.Expr:
    """`expr` with every `where` name replaced by its definition."""
    while names := {s: view(s) for s in expr.free_symbols if view(s) is not s}:
        expr = expr.xreplace(names)
    return expr
