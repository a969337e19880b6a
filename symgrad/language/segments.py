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

Note [Index selects]: `index_select(e, dim, index)` is torch.index_select, the slices of
`e` along `dim` at a 1-d index input's positions, also written by a spec. Its adjoint is
`IndexAdd`, the segment sum of the gradient into zeros of `e`'s own shape (a ShapeOf
fact, so no size needs naming), by torch's index_add; its tangent is the index_select of
the tangent. Both are linear torch operations, so the backward differentiates again
exactly.
"""

from __future__ import annotations

from typing import Any

import sympy

# The spellings in the language.
SEGMENT_SUM = "segment_sum"
INDEX_SELECT = "index_select"


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


class IndexAdd(sympy.Function):
    """`IndexAdd(source, shape, dim, index)`: zeros of `shape` (the ShapeOf fact of an
    index_select's argument) with the slices of `source` added at `index` along `dim`,
    the adjoint of an index_select (Note [Index selects])."""

    name = "index_add"

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def source(self) -> sympy.Expr:
        result: sympy.Expr = self.args[0]
        return result

    @property
    def shape(self) -> sympy.Basic:
        """The ShapeOf fact of the selected value, whose shape the result takes."""
        return self.args[1]

    @property
    def dim(self) -> int:
        return int(self.args[2])

    @property
    def index(self) -> sympy.Expr:
        result: sympy.Expr = self.args[3]
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


def index_select(argument: sympy.Expr, dim: int, index: sympy.Expr) -> sympy.Expr:
    """Build `index_select(argument, dim, index)`; of a zero, zero."""
    if argument == 0:
        return sympy.Integer(0)
    return IndexSelect(argument, sympy.Integer(dim), index)


def index_select_adjoint(node: IndexSelect, adjoint: sympy.Expr, shape: sympy.Basic) -> IndexAdd:
    """The adjoint an index_select passes to its argument: its own, added back at the
    index into zeros of the argument's shape (`shape`, a ShapeOf fact)."""
    return IndexAdd(adjoint, shape, node.args[1], node.index)


def index_select_tangent(node: IndexSelect, tangent: sympy.Expr) -> sympy.Expr:
    """The tangent of an index_select: the same index_select of its argument's tangent."""
    return index_select(tangent, node.dim, node.index)


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
