"""Conditions the backward reads, computed once in the forward and saved as bool masks.

Note [Saved masks]: under `save: memory` (Note [Save choices] in symgrad.ad.saving) the
backward would recompute a `where`'s condition from the float values it compares, so
those values would be saved at four bytes an element (a fake quantiser's `x`, a sign's
`x`). A condition has zero derivative, so its value is all any order of the backward
needs: the forward computes it once and returns it as a non-differentiable output, saved
as a `torch.bool` tensor of one byte an element, as a hand-written Function saves its
mask. A mask is not recomputed for double backward (it carries no graph to recompute),
so the values it compares are saved only where something else reads them.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence

import sympy

from symgrad.ad.ir import Assignment, Namer, OutputGradients
from symgrad.language import piecewise


def name_masks(
    parts: Sequence[OutputGradients],
    definitions: Mapping[sympy.Basic, sympy.Expr],
    values: Collection[sympy.Basic],
    tensors: Collection[sympy.Basic],
    namer: Namer,
) -> tuple[list[OutputGradients], tuple[Assignment, ...]]:
    """`parts` reading each `where` condition on forward `values` through a mask, and the
    forward statements that compute the masks (Note [Saved masks])."""
    # Tensors in the backward: forward values, incoming gradients and adjoints.
    held = {*tensors, *(p.grad for p in parts), *(s.target for p in parts for s in p.statements)}
    spread = [_replaced(part, lambda e: _distributed(e, held)) for part in parts]
    # A condition is masked only where each use is a `where` with a value branch, whose
    # dtype comes from that value: a `where` of numbers takes it from the compared values.
    uses: collections.Counter[sympy.Basic] = collections.Counter()
    valued: collections.Counter[sympy.Basic] = collections.Counter()
    for expr in _exprs(spread):
        for node in sympy.preorder_traversal(expr):
            uses[node] += piecewise.is_condition(node)
            if isinstance(node, piecewise.Where) and any(_reads(b, held) for b in node.args[1:]):
                valued[node.args[0]] += 1
    masks = {
        condition: sympy.Symbol(namer.fresh("mask"), real=True)
        for condition, count in valued.items()
        if count == uses[condition]
        and condition.free_symbols <= set(values)
        and condition.free_symbols & set(tensors)
    }
    result = [_replaced(part, _substitute(masks)) for part in spread]
    for condition, mask in list(masks.items()):
        # A mask spares memory only where the backward reads its values nowhere else.
        others = {m: c for c, m in masks.items() if m != mask}
        elsewhere = _leaves(_reads_of(result) - {mask}, definitions, others)
        compared = _leaves({mask}, definitions, {mask: condition}) & set(tensors)
        if compared <= elsewhere:
            del masks[condition]
            result = [_replaced(part, _substitute({mask: condition})) for part in result]
    return result, tuple(Assignment(mask, condition) for condition, mask in masks.items())


def _replaced(
    part: OutputGradients, rewrite: Callable[[sympy.Expr], sympy.Expr]
) -> OutputGradients:
    """`part` with `rewrite` applied to its gradients and statements."""
    return dataclasses.replace(
        part,
        gradients={item: rewrite(expr) for item, expr in part.gradients.items()},
        statements=tuple(Assignment(s.target, rewrite(s.expr)) for s in part.statements),
    )


def _substitute(mapping: Mapping[sympy.Basic, sympy.Basic]) -> Callable[[sympy.Expr], sympy.Expr]:
    """A rewrite that substitutes `mapping` in an expression."""

    def rewrite(expr: sympy.Expr) -> sympy.Expr:
        result: sympy.Expr = expr.xreplace(dict(mapping))
        return result

    return rewrite


def _exprs(parts: Sequence[OutputGradients]) -> list[sympy.Expr]:
    """The parts' gradients and statements."""
    return [e for p in parts for e in [*p.gradients.values(), *(s.expr for s in p.statements)]]


def _reads_of(parts: Sequence[OutputGradients]) -> set[sympy.Basic]:
    """The symbols the parts' gradients and statements read."""
    return set().union(*(e.free_symbols for e in _exprs(parts)))


def _leaves(
    symbols: set[sympy.Basic],
    definitions: Mapping[sympy.Basic, sympy.Expr],
    masks: Mapping[sympy.Basic, sympy.Basic],
) -> set[sympy.Basic]:
    """The saved symbols (inputs, residuals) that recomputing `symbols` reads; a mask
    stands for the values its condition reads."""
    found: set[sympy.Basic] = set()
    pending = list(symbols)
    seen: set[sympy.Basic] = set()
    while pending:
        symbol = pending.pop()
        if symbol in seen:
            continue
        seen.add(symbol)
        expr = masks.get(symbol, definitions.get(symbol))
        if expr is None:
            found.add(symbol)
        else:
            pending += expr.free_symbols
    return found


def _reads(expr: sympy.Basic, tensors: Collection[sympy.Basic]) -> bool:
    """Whether `expr` reads a tensor."""
    return bool(expr.free_symbols & set(tensors))


def _distributed(expr: sympy.Expr, tensors: Collection[sympy.Basic]) -> sympy.Expr:
    """`g * where(c, 1, -1)` as `where(c, g, -g)`: a `where` of numbers takes its dtype
    from the tensors its condition compares, which a masked backward no longer has; of
    values (`g`), it takes theirs."""

    def distribute(node: sympy.Basic) -> sympy.Basic:
        if not isinstance(node, sympy.Mul):
            return node
        for factor in node.args:
            if isinstance(factor, piecewise.Where) and not any(
                _reads(branch, tensors) for branch in factor.args[1:]
            ):
                rest = node / factor
                if _reads(rest, tensors):
                    condition, a, b = factor.args
                    return piecewise.where(condition, rest * a, rest * b)
        return node

    result: sympy.Expr = expr.replace(lambda node: isinstance(node, sympy.Mul), distribute)
    return result
