"""The tie rule of amax and amin: gradients and tangents shared evenly among tied extrema.

Note [Ties of amax and amin]: the adjoint of `amax` (and `amin`) is shared evenly among
the elements equal to the result: `grad / count * ties` with `ties` the mask
`where(x == amax, 1, 0)` and `count` its sum over the reduced dims; the tangent is the
mean of the tangents at the ties. A row holding NaN has no ties, so its gradient is NaN
(0 / 0), also as torch gives it. The mask compares x with its extremum taken again, with
keepdim, from x as the backward has it (`AmaxAgain`), not with the forward's saved
value: a recomputed x (double backward, the jvp) may differ from the forward's in its
last bits (a CPU kernel in one, torch's in the other), and then no element would equal
the saved extremum.
"""

from __future__ import annotations

import sympy

from symgrad.language import piecewise
from symgrad.language.reductions import (
    AmaxAgain,
    AminAgain,
    ReduceAmax,
    ReduceAmin,
    ReduceExtremum,
    Reduction,
    broadcast_back,
    reduce,
)

# The extremum taken again, for each one a spec writes.
_AGAIN: dict[type[Reduction], type[ReduceExtremum]] = {ReduceAmax: AmaxAgain, ReduceAmin: AminAgain}


def is_tie(node: ReduceExtremum) -> piecewise.Eq:
    """`argument == extremum`, the extremum taken again, kept: where `node` took its value."""
    again = _AGAIN[type(node)](node.argument, sympy.Integer(1), *node.args[2:])
    result: piecewise.Eq = piecewise.Eq(node.argument, again)
    return result


def ties(node: ReduceExtremum) -> sympy.Expr:
    """1 where `node` took its value, 0 elsewhere."""
    return piecewise.where(is_tie(node), sympy.Integer(1), sympy.Integer(0))


def tie_count(node: ReduceExtremum) -> Reduction:
    """How many elements `node` took its value from, in its own shape."""
    return reduce("sum", ties(node), node.dims, node.keepdim)


def argument_adjoint(node: ReduceExtremum, adjoint: sympy.Expr) -> sympy.Expr:
    """The adjoint `node` passes to its argument, given its own (in its shape)."""
    return broadcast_back(node, adjoint / tie_count(node)) * ties(node)


def tangent(node: ReduceExtremum, argument_tangent: sympy.Expr) -> sympy.Expr:
    """The tangent of `node`: the mean of its argument's tangent over the ties."""
    picked = piecewise.where(is_tie(node), argument_tangent, sympy.Integer(0))
    return reduce("sum", picked, node.dims, node.keepdim) / tie_count(node)
