"""Segment sums by an index input: `segment_sum(x, index, dim, size)`, torch's index_add.

Note [Segment sums]: `segment_sum(x, index, dim, size)` adds the slices of `x` along
`dim` into `size` segments, slice `k` into segment `index[k]`: zeros whose `dim` has
`size` elements, then torch's `index_add(dim, index, x)`. The index is a 1-d index input
(Note [Index inputs] in symgrad.language.indexing) with one position per slice of `x`;
`size` is a positive integer or an `int` input, so the result's shape is known from the
spec and the call, never from the index's values. Segments no slice goes to are zero.

The adjoint is the gather of the gradient: `index_select(grad, dim, index)` (torch's
kernel, no one-hot); the tangent is the segment sum of the tangent. Both are linear, so
the backward differentiates again exactly (torch differentiates index_select).

The node carries its source twice: once as the values it adds, once as the value whose
shape, dtype and device the zeros take. Both spellings read it, and the duplicate makes
common-subexpression elimination name an expression source, so it is computed once.
"""

from __future__ import annotations

from typing import Any

import sympy

# The spelling in the language.
SEGMENT_SUM = "segment_sum"


class SegmentSum(sympy.Function):
    """`SegmentSum(source, dim, index, size, like)`: `like` is `source` (see the Note)."""

    name = SEGMENT_SUM

    @classmethod
    def eval(cls, *args: Any) -> None:
        """Keep the call as written."""
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def source(self) -> sympy.Expr:
        result: sympy.Expr = self.args[0]
        return result

    @property
    def argument(self) -> sympy.Expr:
        """The source: the value the shape rules and `show` read, as for a reduction."""
        return self.source

    @property
    def dim(self) -> int:
        return int(self.args[1])

    @property
    def index(self) -> sympy.Expr:
        result: sympy.Expr = self.args[2]
        return result

    @property
    def size(self) -> sympy.Expr:
        """The number of segments: a positive integer or an int input's symbol."""
        result: sympy.Expr = self.args[3]
        return result


class IndexSelect(sympy.Function):
    """`IndexSelect(value, dim, index)`: torch.index_select, a segment sum's adjoint."""

    name = "index_select"

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def argument(self) -> sympy.Expr:
        result: sympy.Expr = self.args[0]
        return result

    @property
    def dim(self) -> int:
        return int(self.args[1])

    @property
    def index(self) -> sympy.Expr:
        result: sympy.Expr = self.args[2]
        return result


def segment_sum(source: sympy.Expr, dim: int, index: sympy.Expr, size: sympy.Expr) -> sympy.Expr:
    """Build `segment_sum(source, index, dim, size)`; of a zero, zero."""
    if source == 0:
        return sympy.Integer(0)
    return SegmentSum(source, sympy.Integer(dim), index, size, source)


def segment_sum_adjoint(node: SegmentSum, adjoint: sympy.Expr) -> sympy.Expr:
    """The adjoint a segment sum passes to its source: its own, read back at the index."""
    return IndexSelect(adjoint, node.args[1], node.index)


def segment_sum_tangent(node: SegmentSum, tangent: sympy.Expr) -> sympy.Expr:
    """The tangent of a segment sum: the segment sum of its source's tangent."""
    return segment_sum(tangent, node.dim, node.index, node.size)


def shape_of(node: SegmentSum | IndexSelect, inner: Any) -> Any:
    """The canonical shape of `node` (symgrad.language.reductions.Shapes), given its
    argument's: a segment sum's is its own; reading one back at its index gives the
    shape of the value it summed."""
    if inner is None:
        return None
    if isinstance(node, SegmentSum):
        return ("segment", inner, node.dim, str(node.index), str(node.size))
    if inner[0] == "segment" and inner[2:4] == (node.dim, str(node.index)):
        return inner[1]
    return ("index_select", inner, node.dim, str(node.index))
