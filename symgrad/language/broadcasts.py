"""Shapes that cancelled terms carried: `Broadcast` keeps them, `ZerosLike` is their gradient.

Note [Cancelled shapes]: sympy cancels terms as the frontend builds an expression, and
the broadcast shape a cancelled term carried goes with it: `(tanh(a) + x) - tanh(a)`
becomes `x`, `a * x / a` becomes `x`, `x - x` and `0 * x` become 0. torch computes
the expression as written, so its value has the broadcast shape of every operand.
Where building a node loses a leaf (a symbol, a reduction or a condition) that its
operands had, the frontend wraps the result in `Broadcast(result, *lost)`: the value of
`result`, expanded to the broadcast shape of itself and the lost leaves. Only then, so
an expression that cancels nothing is built exactly as before.

An input whose terms cancelled still takes part in the computation for autograd, which
gives it a gradient of zeros (not None); `differentiable_reach` finds such inputs, and
the backward gives them `ZerosLike(grad, ShapeOf(input))`, zeros of their shape.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import sympy
from sympy.core.relational import Relational

from symgrad.language import (
    contractions,
    dtypes,
    indexing,
    piecewise,
    reductions,
    segments,
    views,
)


class Broadcast(sympy.Function):
    """`Broadcast(value, *witnesses)`: `value` expanded to the broadcast shape of all args.

    The witnesses only lend their shapes: their derivative is zero.
    """

    # How formulas for people (docstrings, `symgrad show`) spell it.
    name = "broadcast"

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def value(self) -> sympy.Expr:
        result: sympy.Expr = self.args[0]
        return result

    @property
    def witnesses(self) -> tuple[sympy.Basic, ...]:
        return tuple(self.args[1:])


class ZerosLike(sympy.Function):
    """`ZerosLike(grad, ShapeOf(input))`: zeros of the input's shape, in grad's dtype and
    device; the gradient of an input whose terms cancelled."""

    name = "zeros_like"

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True


# Nodes whose shape is their own, not their arguments' broadcast: a reduction's is
# reduced, a gather's is its index's, a segment sum's and an index_select's their index's
# along their dim, a contraction's its output letters', a view's and a cat's their own
# (Note [Views]).
_SHAPED = (
    reductions.Reduction,
    indexing.Gather,
    segments.SegmentSum,
    segments.IndexSelect,
    contractions.Einsum,
    *views.SHAPED,
)


def leaves(expr: sympy.Basic) -> set[sympy.Basic]:
    """The parts whose shapes make up the shape of `expr`: symbols, reductions, gathers,
    conditions."""
    found: set[sympy.Basic] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if node.is_Symbol or isinstance(node, (*_SHAPED, Relational)):
            found.add(node)
        elif not isinstance(node, dtypes.FinfoEps):  # 0-d: it lends no shape
            stack.extend(node.args)
    return found


def keep_shape(result: sympy.Basic, operands: Iterable[sympy.Basic]) -> sympy.Basic:
    """`result`, wrapped in a `Broadcast` where building it lost leaves of its operands."""
    operands = list(operands)
    if isinstance(result, _SHAPED) and all(
        leaves(operand) <= _read_leaves(result) for operand in operands
    ):
        return result  # the reduction call itself consumes its argument's shape
    if piecewise.is_condition(result):
        return result  # conditions are never folded
    written: set[sympy.Basic] = set()
    for operand in operands:
        written |= leaves(operand)
    lost = written - leaves(result)
    if not lost:
        return result
    return Broadcast(result, *sorted(lost, key=sympy.default_sort_key))


def _read_leaves(node: sympy.Basic) -> set[sympy.Basic]:
    """The leaves of the values a shaped node reads: a cat's pieces, a contraction's operands
    (and what they were summed from), else its arguments (and what a gather in a reduction
    reads: `max(x, dim=d)` sums a gather of x, Note [Arg extrema])."""
    if isinstance(node, reductions.Reduction) and isinstance(node.argument, indexing.Gather):
        return leaves(node.argument) | _read_leaves(node.argument)
    if isinstance(node, views.Cat):
        return set().union(*(leaves(piece) for piece in node.pieces))
    if isinstance(node, contractions.Einsum):  # and what a letter summed out was summed from
        inner = (o.argument for o in node.operands if isinstance(o, reductions.ReduceSum))
        return leaves(sympy.Tuple(*node.operands, *inner))
    return leaves(sympy.Tuple(*node.args))  # a gather's or segment sum's index too


def shape_sources(node: Broadcast) -> list[sympy.Basic]:
    """The symbols and reductions whose shapes the witnesses of `node` lend, in a fixed order."""
    found: set[sympy.Basic] = set()
    stack = list(node.witnesses)
    while stack:
        node = stack.pop()
        if node.is_Symbol or isinstance(node, _SHAPED):
            found.add(node)
        else:
            stack.extend(node.args)
    return sorted(found, key=sympy.default_sort_key)


def differentiable_reach(
    expr: sympy.Basic, definitions: Mapping[sympy.Basic, sympy.Basic]
) -> set[sympy.Basic]:
    """The symbols `expr` reads where autograd would differentiate them.

    That is everywhere but inside conditions (torch.where's condition has no gradient);
    named values are followed through `definitions`.
    """
    reached: set[sympy.Basic] = set()
    stack = [expr]
    seen: set[sympy.Basic] = set()
    while stack:
        node = stack.pop()
        if node in seen or isinstance(node, Relational) or piecewise.is_condition(node):
            continue
        seen.add(node)
        if node.is_Symbol:
            reached.add(node)
            if node in definitions:
                stack.append(definitions[node])
        else:
            stack.extend(node.args)
    return reached


def drop_number_witnesses(expr: sympy.Expr, tensors: Collection[sympy.Basic]) -> sympy.Expr:
    """`expr` without the witnesses that hold no tensor: numbers add no dimension.

    (`k * x / k` with a number k keeps nothing, so the forward is built as before.) A
    node that dropping them folds (`0 * Broadcast(0, k) * Broadcast(1, x)` is 0) keeps
    the shapes of the tensors it lost, as the frontend's `keep_shape` does.
    """
    tensor_set = set(tensors)

    def holds_tensor(node: sympy.Basic) -> bool:
        return bool(node.free_symbols & tensor_set)

    def visit(node: sympy.Basic) -> sympy.Basic:
        if not node.has(Broadcast):
            return node
        args = [visit(a) for a in node.args]
        if isinstance(node, Broadcast):
            kept = [w for w in args[1:] if holds_tensor(w)]
            return Broadcast(args[0], *kept) if kept else args[0]
        rebuilt = node.func(*args)
        wrapped = keep_shape(rebuilt, args)
        if not isinstance(wrapped, Broadcast) or wrapped is rebuilt:
            return wrapped
        kept = [w for w in wrapped.witnesses if holds_tensor(w)]
        return Broadcast(rebuilt, *kept) if kept else rebuilt

    result: sympy.Expr = visit(expr)
    return result
