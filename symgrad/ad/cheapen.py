"""Rewrite formulas into identities that cost less to compute and to differentiate.

On CPU, torch's tanh costs several times its sigmoid (both vectorised, but tanh's
kernel is the slower one), and the derivative of either reads its value. A tanh that
only appears shifted by a constant is a sigmoid, exactly (rewritten where the cost
table, symgrad.ad.costs, prices the sigmoid form lower):

| written                  | emitted               |
| ------------------------ | --------------------- |
| k + k * tanh(u)          | 2k * sigmoid(2u)      |
| k - k * tanh(u)          | 2k * sigmoid(-2u)     |

The sigmoid form is also the more accurate one: 1 - tanh(u) rounds to 0 in float32
from u = 9 on, where 2 sigmoid(-2u) keeps its tiny value. Runs after
`symgrad.ad.fuse`, which recognises `1 + tanh(...)` inside the tanh GELU first.

Gradients of a `where` come out as one `where` per term, each with a zero branch; a
`where` costs several multiplies on CPU, so terms under the same condition are merged
(`merge_branches`, on derivatives):

| written                                  | emitted                      |
| ---------------------------------------- | ---------------------------- |
| where(c, a, 0) * x + where(c, 0, b) * y  | where(c, a * x, b * y)       |

An untaken branch no longer multiplies into the sum, so a NaN or inf there cannot
leak into the result (symgrad.ad.guards guards the branches themselves).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from symgrad.ad import costs
from symgrad.ad.rewrite import bottom_up
from symgrad.language import functions, piecewise


def cheapen(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with every pattern of the table above replaced, bottom-up."""
    return bottom_up(expr, _apply_rules)


def _apply_rules(node: sympy.Basic) -> sympy.Basic:
    """`node` rewritten by the first rule that matches it, if the cost table says it pays."""
    table = costs.table()
    for rule in _RULES:
        rewritten = rule(node)
        if rewritten is not None and table.expression(rewritten) < table.expression(node):
            return rewritten
    return node


def _shifted_tanh(node: sympy.Basic) -> sympy.Expr | None:
    """k + c tanh(u) with c = +-k, as 2k sigmoid(+-2u); other terms of the sum stay."""
    if not isinstance(node, sympy.Add):
        return None
    constants = [term for term in node.args if term.is_Number]
    if len(constants) != 1 or constants[0] == 0:
        return None
    (k,) = constants
    for term in node.args:
        coefficient, rest = term.as_coeff_Mul()
        if not _is_tanh(rest) or coefficient not in (k, -k):
            continue
        sign = 1 if coefficient == k else -1
        scale = 2 * k
        if scale.is_Float and float(scale).is_integer():  # 2 * 0.5 is 1, not 1.0
            scale = sympy.Integer(int(scale))
        others = [t for t in node.args if t is not k and t is not term]
        return sympy.Add(scale * functions.call("sigmoid", 2 * sign * rest.args[0]), *others)
    return None


def _is_tanh(node: sympy.Basic) -> bool:
    return isinstance(node, functions.ElementwiseFunction) and type(node).__name__ == "tanh"


_RULES: tuple[Callable[[sympy.Basic], sympy.Expr | None], ...] = (_shifted_tanh,)


def merge_branches(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with the terms of each sum that are `where`s of one condition merged, bottom-up."""
    return bottom_up(expr, lambda node: _merge_sum(node) if isinstance(node, sympy.Add) else node)


def _merge_sum(node: sympy.Add) -> sympy.Expr:
    """Terms `k * where(c, a, b)` sharing a condition c, summed as one `where`."""
    by_condition: dict[sympy.Basic, list[tuple[sympy.Expr, sympy.Expr, sympy.Expr]]] = {}
    others: list[sympy.Expr] = []
    for term in node.args:
        split = _split_where(term)
        if split is None:
            others.append(term)
        else:
            condition, taken, untaken = split
            by_condition.setdefault(condition, []).append((term, taken, untaken))
    if all(len(group) < 2 for group in by_condition.values()):
        return node
    terms = list(others)
    for condition, group in by_condition.items():
        if len(group) < 2:
            terms.append(group[0][0])
            continue
        taken = sympy.Add(*(t for _, t, _ in group))
        untaken = sympy.Add(*(u for _, _, u in group))
        common = _common_factors(taken, untaken)
        terms.append(common * piecewise.where(condition, taken / common, untaken / common))
    return sympy.Add(*terms)


def _split_where(term: sympy.Expr) -> tuple[sympy.Basic, sympy.Expr, sympy.Expr] | None:
    """(c, k * a, k * b) for a term `k * where(c, a, b)` with one `where` factor."""
    factors = sympy.Mul.make_args(term)
    wheres = [f for f in factors if isinstance(f, piecewise.Where)]
    if len(wheres) != 1:
        return None
    (where,) = wheres
    rest = list(factors)
    rest.remove(where)
    scale = sympy.Mul(*rest)
    if scale.has(piecewise.Where):
        return None
    condition, taken, untaken = where.args
    return condition, scale * taken, scale * untaken


def _common_factors(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    """The non-numeric factors two products share (the gradient `g` of both branches)."""
    if a == 0 or b == 0:
        return sympy.Integer(1)
    left = [f for f in sympy.Mul.make_args(a) if not f.is_Number]
    right = list(sympy.Mul.make_args(b))
    shared = []
    for factor in left:
        if factor in right:
            right.remove(factor)
            shared.append(factor)
    return sympy.Mul(*shared)
