"""Integer index inputs and `gather`: values read at positions an int64 tensor gives.

Note [Index inputs]: an input declared `type: index` is an int64 tensor with a declared
shape. It takes no gradient, and the language reads it only as an index (of `gather(x,
dim, index)`, `take_along_dim` the same call, with torch.gather's meaning, so the value
has the index's shape; of `index_select`, `segment_sum` and `segment_amax`) and in a
comparison, a condition without gradient: `target != ignore_index` marks the rows a
class loss counts, and `position(x, -1) == unsqueeze(target, -1)` is a one-hot mask of
the classes (a boolean, never a float one-hot). Its symbol is an `IndexSymbol`, so the
frontend can refuse it anywhere else (arithmetic on positions means nothing here). A
value of index inputs only, as the count `sum(where(target != -100, 1, 0))`, is an int64
tensor: it has no tangent and is recomputed in the backward, never returned for it.

The adjoint of `gather` is `ScatterAdd`: zeros of the gathered value's shape into which
the incoming gradient is added at the same positions (torch's scatter_add kernel, no
one-hot). It is linear in the gradient, so the backward differentiates again exactly;
the tangent of a gather is the gather of the tangent.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import sympy


class IndexSymbol(sympy.Symbol):
    """The symbol of an index input (Note [Index inputs])."""


def index_symbol(name: str) -> IndexSymbol:
    """The symbol of the index input `name`: an integer that is never negative."""
    return IndexSymbol(name, integer=True, nonnegative=True)


class Gather(sympy.Function):
    """`Gather(argument, dim, index)`: torch.gather(argument, dim, index)."""

    # The name in the spec language, and torch's function of the same name.
    name = "gather"

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

    @property
    def index(self) -> sympy.Expr:
        """An index input's symbol, or an argmax/argmin (Note [Arg extrema])."""
        result: sympy.Expr = self.args[2]
        return result


class ScatterAdd(sympy.Function):
    """`ScatterAdd(source, shape, dim, index)`: zeros of `shape` (a ShapeOf fact) in the
    source's dtype, with `source` added at `index` along `dim` (the adjoint of a gather)."""

    # How formulas for people (docstrings, `symgrad show`) spell it.
    name = "scatter_add"

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
        """The ShapeOf fact of the gathered value, whose shape the result takes."""
        return self.args[1]

    @property
    def dim(self) -> int:
        return int(self.args[2])

    @property
    def index(self) -> sympy.Expr:
        result: sympy.Expr = self.args[3]
        return result


def of_positions_only(expr: sympy.Basic, positional: Collection[sympy.Basic]) -> bool:
    """Whether `expr` reads index inputs (or `positional` names), int numbers and no value,
    as a count of valid rows `sum(where(target != -100, 1, 0))` does: an int64 tensor, without
    gradient or tangent (Note [Index inputs])."""
    read = expr.free_symbols
    tensors = {s for s in read if isinstance(s, IndexSymbol) or s in positional}
    # An int number beside them (ignore_index) keeps the value an integer.
    return bool(tensors) and all(s in tensors or s.is_integer for s in read)


def positional_values(
    definitions: Iterable[tuple[sympy.Basic, sympy.Basic]],
) -> set[sympy.Basic]:
    """The names, of (name, value) in order, whose values read index inputs only."""
    found: set[sympy.Basic] = set()
    for target, expr in definitions:
        if of_positions_only(expr, found):
            found.add(target)
    return found


# The spellings of gather in the language: torch's name and its alias.
GATHER_SPELLINGS = ("gather", "take_along_dim")


def gather(argument: sympy.Expr, dim: int, index: sympy.Expr) -> Gather:
    """Build `gather(argument, dim, index)`."""
    return Gather(argument, sympy.Integer(dim), index)


def gather_adjoint(node: Gather, adjoint: sympy.Expr, shape: sympy.Basic) -> ScatterAdd:
    """The adjoint `node` passes to its argument, given its own (in the index's shape)."""
    return ScatterAdd(adjoint, shape, node.args[1], node.index)


def gather_tangent(node: Gather, tangent: sympy.Expr) -> sympy.Expr:
    """The tangent of a gather: the same gather of its argument's tangent."""
    if tangent == 0:
        return sympy.Integer(0)
    return Gather(tangent, node.args[1], node.index)
