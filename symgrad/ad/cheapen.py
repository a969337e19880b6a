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

Note [Removable singularities]: sin(u) / u with its limit 1 at u = 0, written as a
`where`, has an exact value but a gradient that is not: differentiated as written, the
quotient's derivative (cos(u) u - sin(u)) / u**2 is 0 / 0 or 1e21 near 0 in float32
(u = 1e-30 squares to 0). The pattern is torch's sinc, whose derivative has its limit 0
there, so it is rewritten whatever the costs say (u = c x with c a nonzero number):

| written                                  | emitted               |
| ---------------------------------------- | --------------------- |
| where(u != 0, sin(u) / u, 1)             | sinc(u / pi)          |
| where(u == 0, 1, sin(u) / u)             | sinc(u / pi)          |
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
    """`node` rewritten by the first rule that matches it, if the cost table says it pays.

    A removable singularity is rewritten whatever it costs (Note [Removable singularities]).
    """
    sinc = _removable_sinc(node)
    if sinc is not None:
        return sinc
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


def _removable_sinc(node: sympy.Basic) -> sympy.Expr | None:
    """where(u != 0, sin(u) / u, 1) as sinc(u / pi) (Note [Removable singularities])."""
    if not isinstance(node, piecewise.Where):
        return None
    cond, a, b = node.args
    if isinstance(cond, piecewise.Eq):
        a, b = b, a
    elif not isinstance(cond, piecewise.Ne):
        return None
    if b != 1 or 0 not in cond.args:
        return None
    w = cond.args[0] if cond.args[1] == 0 else cond.args[1]
    sines = [f for f in sympy.Mul.make_args(a) if _is_function(f, "sin")]
    if len(sines) != 1:
        return None
    u = sines[0].args[0]
    scale = sympy.cancel(u / w)
    if not (scale.is_number and scale.is_zero is False and scale.is_finite):
        return None
    if sympy.cancel(a * u / sines[0]) != 1:
        return None
    return functions.call("sinc", u / sympy.pi)


def _is_function(node: sympy.Basic, name: str) -> bool:
    return isinstance(node, functions.ElementwiseFunction) and type(node).__name__ == name


def _is_tanh(node: sympy.Basic) -> bool:
    return isinstance(node, functions.ElementwiseFunction) and type(node).__name__ == "tanh"


_RULES: tuple[Callable[[sympy.Basic], sympy.Expr | None], ...] = (_shifted_tanh,)


def merge_branches(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with the terms of each sum that are `where`s of one condition merged, and each
    `where` nested in a branch of the same condition dropped, bottom-up."""

    def merge(node: sympy.Basic) -> sympy.Basic:
        if isinstance(node, sympy.Add):
            return _merge_sum(node)
        if isinstance(node, piecewise.Where):
            return _drop_nested(node)
        return node

    return bottom_up(expr, merge)


def _drop_nested(node: piecewise.Where) -> sympy.Expr:
    """where(c, where(c, a, 0) * k, b) as where(c, a * k, b): one guard per branch.

    The gradient of a `where` branch is where(c, g, 0); under the outer `where` of the
    same condition its zero is never selected. Only a routing where (zero in the other
    branch) is dropped, and only through elementwise nodes, where the positions are the
    condition's: a guard where(c, x, safe) keeps the branch finite where it is not taken
    (Note [Untaken branches] in symgrad.ad.guards), and stays.
    """
    cond, taken, untaken = node.args
    kept_taken = _unroute(taken, cond, 1)
    kept_untaken = _unroute(untaken, cond, 2)
    if kept_taken is taken and kept_untaken is untaken:
        return node
    return piecewise.where(cond, kept_taken, kept_untaken)


def _unroute(expr: sympy.Expr, cond: sympy.Basic, branch: int) -> sympy.Expr:
    """`expr` with each where(cond, a, 0) (branch 1) or where(cond, 0, b) (branch 2) it
    holds through sums, products and powers replaced by its selected branch."""
    if isinstance(expr, piecewise.Where) and expr.args[0] == cond and expr.args[3 - branch] == 0:
        result: sympy.Expr = expr.args[branch]
        return result
    if not isinstance(expr, (sympy.Add, sympy.Mul, sympy.Pow)):
        return expr
    args = [_unroute(arg, cond, branch) for arg in expr.args]
    if all(new is old for new, old in zip(args, expr.args, strict=True)):
        return expr
    rebuilt: sympy.Expr = expr.func(*args)
    return rebuilt


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
