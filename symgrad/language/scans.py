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

from symgrad.language import indexing, piecewise


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


class Cumprod(AlongDim):
    """`Cumprod(argument, dim)`: torch.cumprod (Note [Cumprod's exact derivatives])."""

    name = "cumprod"


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
SCANS: dict[str, type[AlongDim]] = {
    "cumsum": Cumsum,
    "cumprod": Cumprod,
    "flip": Flip,
    "sort": Sort,
}
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
    if isinstance(node, Cumprod):
        return cumprod_adjoint(node, adjoint)
    if isinstance(node, Sort):
        return indexing.ScatterAdd(adjoint, shape, dim, indices_of(node))
    raise TypeError(f"{type(node).__name__} has no adjoint")


def tangent(node: AlongDim, argument_tangent: sympy.Expr) -> sympy.Expr:
    """The tangent of `node` given its argument's, in the argument's shape."""
    if argument_tangent == 0 or isinstance(node, CONSTANT_NODES):
        return sympy.Integer(0)
    if isinstance(node, Sort):
        return indexing.Gather(argument_tangent, node.args[1], indices_of(node))
    if isinstance(node, Cumprod):
        return cumprod_tangent(node, argument_tangent)
    return type(node)(argument_tangent, node.args[1])


# --- Note [Cumprod's exact derivatives] ------------------------------------------------
#
# out_j = x_1 ... x_j along the dim, so d out_j / d x_k = prod_{i <= j, i != k} x_i for
# k <= j. Where x_k != 0 the adjoint is torch's no-zero form, the reversed cumsum of
# g * out divided by x_k: an analytic formula wherever x_k != 0, whatever the other
# values, so its own derivative (through this rule again) is exact. A zero cannot be
# divided by, and the products that skip it are read without division instead:
#
# - at the first zero z1 of a line, sum_{j >= z1} g_j prod_{i <= j, i != z1} x_i is the
#   reversed cumsum of g * cumprod(x with x_z1 set to 1) (torch's own zero case);
# - at the second zero z2 the gradient is 0, but its derivative in x_z1 is not: it is
#   written x_z1 * (reversed cumsum of g * cumprod(x with x_z1, x_z2 set to 1)), x_z1
#   read by a cumsum up to z2 of x at z1, so the Hessian is exact and symmetric;
# - after that every product holds two zeros, and the gradient and its first derivatives
#   are 0.
#
# The zeros are counted by a cumsum of (x == 0), every branch is a torch kernel over the
# whole tensor (cumsum, cumprod, flip, where), no loop and no n x n product; the
# derivative is exact at first and second order with any zeros. The tangent is the same
# split, forward: out * cumsum(t / x) before the first zero, t_z1 * cumprod(x with x_z1
# set to 1) from it to the second, 0 after. Like torch's, the nonzero branch divides by
# x, so where out underflows to 0 before x_k does the quotient reads 0.


def _zero_count(argument: sympy.Expr, dim: sympy.Basic) -> tuple[sympy.Basic, sympy.Expr]:
    """The test x == 0, and the count of zeros along dim up to each position."""
    zero = piecewise.compare(sympy.Eq, argument, sympy.Integer(0))
    return zero, Cumsum(piecewise.where(zero, sympy.Integer(1), sympy.Integer(0)), dim)


def _nth_zero(argument: sympy.Expr, dim: sympy.Basic, n: int) -> sympy.Basic:
    """The test: this position holds the n-th zero of its line (n = 1 or 2)."""
    zero, count = _zero_count(argument, dim)
    return sympy.And(zero, piecewise.compare(sympy.Eq, count, sympy.Integer(n)))


def _reversed_cumsum(value: sympy.Expr, dim: sympy.Basic) -> sympy.Expr:
    """sum_{j >= k} value_j along dim, by flips around a cumsum."""
    return Flip(Cumsum(Flip(value, dim), dim), dim)


def _ones_at(argument: sympy.Expr, test: sympy.Basic) -> sympy.Expr:
    """`argument` with 1 where `test` holds."""
    return piecewise.where(test, sympy.Integer(1), argument)


def cumprod_adjoint(node: Cumprod, adjoint: sympy.Expr) -> sympy.Expr:
    """The gradient of cumprod's argument, exact with zeros (Note [Cumprod's exact
    derivatives])."""
    x, dim = node.argument, node.args[1]
    nonzero = piecewise.compare(sympy.Ne, x, sympy.Integer(0))
    zero = piecewise.compare(sympy.Eq, x, sympy.Integer(0))
    first, second = _nth_zero(x, dim, 1), _nth_zero(x, dim, 2)
    divided = _reversed_cumsum(adjoint * node, dim) / _ones_at(x, zero)
    at_first = _reversed_cumsum(adjoint * Cumprod(_ones_at(x, first), dim), dim)
    both = _ones_at(x, sympy.Or(first, second))
    first_value = Cumsum(piecewise.where(first, x, sympy.Integer(0)), dim)
    at_second = first_value * _reversed_cumsum(adjoint * Cumprod(both, dim), dim)
    rest = piecewise.where(second, at_second, sympy.Integer(0))
    return piecewise.where(nonzero, divided, piecewise.where(first, at_first, rest))


def cumprod_tangent(node: Cumprod, argument_tangent: sympy.Expr) -> sympy.Expr:
    """The tangent of cumprod, exact with zeros (Note [Cumprod's exact derivatives])."""
    x, dim = node.argument, node.args[1]
    zero, count = _zero_count(x, dim)
    nonzero = piecewise.compare(sympy.Ne, x, sympy.Integer(0))
    ratios = piecewise.where(nonzero, argument_tangent / _ones_at(x, zero), sympy.Integer(0))
    first = _nth_zero(x, dim, 1)
    at_first = Cumsum(piecewise.where(first, argument_tangent, sympy.Integer(0)), dim)
    none = piecewise.compare(sympy.Eq, count, sympy.Integer(0))
    one = piecewise.compare(sympy.Eq, count, sympy.Integer(1))
    after = piecewise.where(one, at_first * Cumprod(_ones_at(x, first), dim), sympy.Integer(0))
    return piecewise.where(none, node * Cumsum(ratios, dim), after)
