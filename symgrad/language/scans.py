"""Scans and sort along a dim: `cumsum`, `flip`, `sort` values and `position`.

Note [Scans and sort]: each node keeps its argument's shape and works along one `dim`,
with torch's meaning. Their derivatives go through torch's kernels, never a loop:

- `cumsum(x, dim)`: the adjoint is the reversed cumulative sum of the gradient,
  `flip(cumsum(flip(g, dim), dim), dim)`; the tangent is the cumsum of the tangent.
- `flip(x, dim)`: its own adjoint; the tangent is the flip of the tangent.
- `sort(x, dim, descending)` (the values): the adjoint scatters the gradient back to the
  positions the values came from, `scatter_add` at `argsort(x)` into zeros of x's shape;
  the tangent is the tangent gathered at `argsort(x)`. The indices are recomputed where
  the backward needs them (torch.argsort runs the same sort, so ties resolve the same
  way) rather than saved: int64 indices take twice a float32 value's memory.
- `position(x, dim)`: 0, 1, ... along `dim`, broadcast like x, in x's dtype (torch.arange
  along a dim); like `argsort`, it has no derivative.

Each adjoint is linear in the incoming gradient and built of the same nodes, so the
backward differentiates again exactly (double backward runs through the same kernels).
"""

from __future__ import annotations

from typing import Any

import sympy

from symgrad.language import indexing


class AlongDim(sympy.Function):
    """A node over `argument` along one `dim`; its value has the argument's shape."""

    # The name in the spec language.
    name = ""

    @classmethod
    def eval(cls, *args: Any) -> None:
        """Keep the call as written."""
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


class Cumsum(AlongDim):
    """`Cumsum(argument, dim)`: torch.cumsum."""

    name = "cumsum"


class Flip(AlongDim):
    """`Flip(argument, dim)`: torch.flip along one dim."""

    name = "flip"

    @classmethod
    def eval(cls, *args: Any) -> sympy.Expr | None:
        """A flip of a flip along the same dim is the value itself."""
        argument, dim = args
        if isinstance(argument, Flip) and argument.args[1] == dim:
            result: sympy.Expr = argument.argument
            return result
        return None


class Sorted(AlongDim):
    """A node of torch.sort's order: `(argument, dim, descending)`, descending 0 or 1."""

    @property
    def descending(self) -> bool:
        return bool(self.args[2])


class Sort(Sorted):
    """`Sort(argument, dim, descending)`: the values of torch.sort."""

    name = "sort"


class SortIndices(Sorted):
    """`SortIndices(argument, dim, descending)`: torch.argsort, the positions `Sort` reads
    (int64, no derivative)."""

    name = "argsort"


class Position(AlongDim):
    """`Position(argument, dim)`: 0, 1, ... along dim, broadcast like the argument."""

    name = "position"


# The spellings of the language: the name of each call, and its node.
SCANS: dict[str, type[AlongDim]] = {"cumsum": Cumsum, "flip": Flip, "sort": Sort}
POSITION_SPELLINGS = ("position",)
# Nodes whose value is constant in their argument: the sweeps pass nothing through them.
CONSTANT_NODES = (SortIndices, Position)


def along(name: str, argument: sympy.Expr, dim: int, descending: bool = False) -> sympy.Expr:
    """Build the node `name` (a SCANS spelling or `position`) of `argument` along `dim`."""
    if name == "sort":
        return Sort(argument, sympy.Integer(dim), sympy.Integer(int(descending)))
    cls = Position if name == "position" else SCANS[name]
    return cls(argument, sympy.Integer(dim))


def indices_of(node: Sort) -> SortIndices:
    """The positions the values of `node` came from."""
    return SortIndices(*node.args)


def argument_adjoint(node: AlongDim, adjoint: sympy.Expr, shape: sympy.Basic) -> sympy.Expr:
    """What `node` passes to its argument, given its own adjoint in its exact shape (the
    argument's); `shape` is the ShapeOf fact of the argument, for the scatter."""
    dim = node.args[1]
    if isinstance(node, Cumsum):
        return Flip(Cumsum(Flip(adjoint, dim), dim), dim)
    if isinstance(node, Flip):
        return Flip(adjoint, dim)
    if isinstance(node, Sort):
        return indexing.ScatterAdd(adjoint, shape, dim, indices_of(node))
    raise TypeError(f"{type(node).__name__} has no adjoint")


def tangent(node: AlongDim, argument_tangent: sympy.Expr) -> sympy.Expr:
    """The tangent of `node` given its argument's, in the argument's shape."""
    if argument_tangent == 0 or isinstance(node, CONSTANT_NODES):
        return sympy.Integer(0)
    if isinstance(node, Sort):
        return indexing.Gather(argument_tangent, node.args[1], indices_of(node))
    return type(node)(argument_tangent, node.args[1])
