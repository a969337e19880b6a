"""Segment maxima by an index input: `segment_amax(x, index, dim, size)`, in scatter_reduce.

Note [Segment maxima]: `segment_amax(x, index, dim, size)` is the largest of the slices of
`x` along `dim` that go to each of `size` segments, slice `k` to segment `index[k]`:
torch's `scatter_reduce(dim, index, x, "amax", include_self=False)` on zeros, the index
viewed along `dim` and expanded to the shape of `x` (`index_reduce` with the 1-d index).
A segment no slice goes to keeps the base value, zero, as torch leaves it. The index and
the size are read as for a segment sum (Note [Segment sums] in symgrad.language.segments),
so the node is a `SegmentSum` in all but its reduction: its shape, checks and zeros.

Its adjoint follows amax's tie rule (Note [Ties of amax and amin]): each segment's
gradient is shared evenly among the slices equal to its maximum, `ties` the mask
`where(x == index_select(m, dim, index), 1, 0)` with `m` the maximum taken again
(`SegmentAmaxAgain`), and `count` the segment sum of `ties`, read back at each slice:
`ties * index_select(grad, dim, index) / index_select(count, dim, index)`. The count is
read at slices, never at empty segments, so no 0 / 0 reaches a gradient, not even at
second order; a segment holding NaN has no ties, and its gradient is NaN, as torch's.
The tangent is the mean of the tangent over the ties, zero in an empty segment.
"""

from __future__ import annotations

import sympy

from symgrad.language import piecewise
from symgrad.language.indexing import IndexSymbol
from symgrad.language.segments import IndexSelect, SegmentSum, index_select, segment_sum

# The spelling in the language.
SEGMENT_AMAX = "segment_amax"


class SegmentAmax(SegmentSum):
    """`SegmentAmax(source, dim, index, size, like)`: the maximum of each segment."""

    name = SEGMENT_AMAX

    # The reduction torch's scatter_reduce takes.
    reduction = "amax"


class SegmentAmaxAgain(SegmentAmax):
    """The maximum taken again from the source as the backward has it, for the tie mask
    (Note [Ties of amax and amin]: never the forward's saved value)."""


def segment_amax(source: sympy.Expr, dim: int, index: IndexSymbol, size: sympy.Expr) -> sympy.Expr:
    """Build `segment_amax(source, index, dim, size)`."""
    return SegmentAmax(source, sympy.Integer(dim), index, size, source)


def is_tie(node: SegmentAmax) -> piecewise.Eq:
    """`source == its segment's maximum`, taken again: where `node` took its value."""
    again = SegmentAmaxAgain(*node.args)
    result: piecewise.Eq = piecewise.Eq(node.source, index_select(again, node.dim, node.index))
    return result


def _ties(node: SegmentAmax) -> sympy.Expr:
    """1 at the slices where `node` took its value, 0 elsewhere."""
    return piecewise.where(is_tie(node), sympy.Integer(1), sympy.Integer(0))


def _tie_count(node: SegmentAmax) -> sympy.Expr:
    """How many slices each segment took its maximum from, in the node's shape."""
    return segment_sum(_ties(node), node.dim, node.index, node.size)


def source_adjoint(node: SegmentAmax, adjoint: sympy.Expr) -> sympy.Expr:
    """The adjoint `node` passes to its source, given its own (in its exact shape)."""
    count = IndexSelect(_tie_count(node), node.args[1], node.index)
    return _ties(node) * IndexSelect(adjoint, node.args[1], node.index) / count


def tangent(node: SegmentAmax, source_tangent: sympy.Expr) -> sympy.Expr:
    """The tangent of `node`: the mean of its source's tangent over each segment's ties."""
    if source_tangent == 0:
        return sympy.Integer(0)
    picked = piecewise.where(is_tie(node), source_tangent, sympy.Integer(0))
    count = _tie_count(node)
    nonempty = piecewise.where(sympy.Gt(count, 0), count, sympy.Integer(1))
    return segment_sum(picked, node.dim, node.index, node.size) / nonempty
