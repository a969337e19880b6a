"""argmax and argmin along a dim, and the max and min values along a dim they pick.

Note [Arg extrema]: `argmax(e, dim)` and `argmin(e, dim)` are torch.argmax and
torch.argmin along one dim (keepdim as torch's, False unless given): int64 positions,
the first one among ties, constant, so no gradient passes through them. They are
reductions (their value has the reduced shape, and the backward names them like one),
and an index: `gather`, `take_along_dim` and `segment_sum` read them where they read an
index input, written in the call or as a `where` name (Note [Index inputs]). A `where`
name of one takes an `IndexSymbol`, so the frontend refuses it in arithmetic, and the
backward reads the int64 positions the forward computed, never their floats.

`max(e, dim=d)` and `min(e, dim=d)` are the values of torch.max(e, d) and torch.min(e,
d): the gather of `e` at the argmax (argmin), kept, then summed over the size-1 dim
where keepdim is False (a squeeze). Their gradient is the gather's adjoint, a
scatter_add at those positions, so it goes to the one position torch's rule gives it
(unlike amax's, shared among ties); it is linear in the incoming gradient with the
positions constant, so the second order is exact too. `max(a, b)` with two positional
values stays the elementwise maximum: the `dim=` keyword tells the two apart, since
`max(x, 0)` is the elementwise maximum with zero.
"""

from __future__ import annotations

import sympy

from symgrad.language import indexing, piecewise, views
from symgrad.language.reductions import Reduction, reduce


class ArgExtremum(Reduction):
    """argmax or argmin: `Cls(argument, keepdim, dim)`, int64 positions (see the Note)."""

    @property
    def dim(self) -> int:
        return int(self.args[2])


class Argmax(ArgExtremum):
    name = "argmax"


class Argmin(ArgExtremum):
    name = "argmin"


ARG_EXTREMA: dict[str, type[ArgExtremum]] = {"argmax": Argmax, "argmin": Argmin}
# The values along a dim each arg extremum picks: `max(e, dim=d)`, `min(e, dim=d)`.
PICKED_BY = {"max": Argmax, "min": Argmin}


def arg_extremum(name: str, argument: sympy.Expr, dim: int, keepdim: bool) -> ArgExtremum:
    """Build `argmax` or `argmin(argument, dim, keepdim)`."""
    return ARG_EXTREMA[name](argument, sympy.Integer(int(keepdim)), sympy.Integer(dim))


def extremum_along(name: str, argument: sympy.Expr, dim: int, keepdim: bool) -> sympy.Expr:
    """`max` or `min(argument, dim=dim)`: the argument gathered at its arg extremum."""
    positions = PICKED_BY[name](argument, sympy.Integer(1), sympy.Integer(dim))
    picked = indexing.Gather(argument, sympy.Integer(dim), positions)
    return picked if keepdim else reduce("sum", picked, (dim,), False)


def is_index(expr: sympy.Basic) -> bool:
    """Whether `expr` is positions an index reads: an index symbol or an arg extremum."""
    return isinstance(expr, (indexing.IndexSymbol, ArgExtremum))


def is_positions(expr: sympy.Basic) -> bool:
    """Whether `expr` is positions as an index argument may compute them: an index, a
    reshape or unsqueeze of positions (`unsqueeze(target, -1)`, the gather of a class
    target), or a `where` choosing between positions and int numbers (a safe position
    for an ignored row, `where(target != -100, target, 0)`)."""
    if is_index(expr):
        return True
    if isinstance(expr, (views.Reshape, views.Unsqueezed)):
        return is_positions(expr.argument)
    if isinstance(expr, piecewise.Where):
        branches = expr.args[1:]
        return any(is_positions(b) for b in branches) and all(
            is_positions(b) or b.is_Integer for b in branches
        )
    return False
