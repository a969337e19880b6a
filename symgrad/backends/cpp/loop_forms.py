"""Expressions rewritten into the forms the fused CPU loops compute.

Calls are written out, the logistic family goes through one exp, and the parts that read
only numbers are computed once before the loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sympy

from symgrad.ad.ir import Assignment, Namer
from symgrad.language import functions, piecewise, pullbacks


def expanded(expr: sympy.Expr, logistic: bool = True) -> sympy.Expr:
    """`expr` with activations, pullbacks and kinks (but max, min and clamp, which the
    loops have) written as their definitions, and, unless `logistic` is False, the
    logistic family through exp(-|u|) (through_exp)."""

    def is_call(node: sympy.Basic) -> bool:
        if isinstance(node, (piecewise.Maximum, piecewise.Minimum, piecewise.Clamp)):
            return False
        return isinstance(node, (piecewise.Kink, pullbacks.Pullback))

    while any(is_call(n) for n in sympy.preorder_traversal(expr)):
        expr = expr.replace(is_call, lambda node: node.expanded())
    return through_exp(expr) if logistic else expr


class Log1pUnit(sympy.Function):
    """log1p(t) for t in [0, 1], which the loops compute by a short polynomial (no log call)."""

    nargs = 1


def through_exp(expr: sympy.Expr) -> sympy.Expr:
    """sigmoid, softplus, log_sigmoid and tanh(softplus(u)) written with E = exp(-|u|).

    Each then costs one exp, shared by all of them on the same u (the loop names it
    once), and a few divisions, where the vectorised log1p and tanh cost two to four
    exps each. Every form is exact for all u (E is in [0, 1]: nothing overflows):
    sigmoid(u) = (u >= 0 ? 1 : E) / (1 + E); softplus(u) = max(u, 0) + log1p(E);
    tanh(softplus(u)) = (1 + 2E) / (1 + 2E + 2E**2) for u >= 0, else
    E (2 + E) / (2 + 2E + E**2).
    """

    def small(u: sympy.Expr) -> sympy.Expr:
        return functions.call("exp", -functions.call("abs", u))

    def sign_split(u: sympy.Expr, positive: sympy.Expr, negative: sympy.Expr) -> sympy.Expr:
        return piecewise.where(piecewise.Ge(u, 0), positive, negative)

    def mish_tanh(node: sympy.Basic) -> sympy.Basic:
        u = node.args[0].args[0]
        e = small(u)
        return sign_split(u, (1 + 2 * e) / (1 + 2 * e + 2 * e**2), e * (2 + e) / (2 + 2 * e + e**2))

    def rewrite(node: sympy.Basic) -> sympy.Basic:
        name, u = type(node).__name__, node.args[0]
        if name == "sigmoid":
            return sign_split(u, sympy.Integer(1), small(u)) / (1 + small(u))
        if name == "softplus":
            return piecewise.Maximum(u, sympy.Integer(0)) + Log1pUnit(small(u))
        if name == "log_sigmoid":
            return piecewise.Minimum(u, sympy.Integer(0)) - Log1pUnit(small(u))
        return node

    def is_mish_tanh(node: sympy.Basic) -> bool:
        return _named(node, "tanh") and _named(node.args[0], "softplus")

    expr = expr.replace(is_mish_tanh, mish_tanh)
    return expr.replace(
        lambda n: any(_named(n, f) for f in ("sigmoid", "softplus", "log_sigmoid")), rewrite
    )


def _named(node: sympy.Basic, name: str) -> bool:
    return isinstance(node, functions.ElementwiseFunction) and type(node).__name__ == name


def hoisted(
    values: Sequence[sympy.Expr], numbers: Iterable[sympy.Basic], namer: Namer
) -> tuple[list[sympy.Expr], list[Assignment]]:
    """`values` with each largest part that reads numbers only (`1 / n` of a mean's
    gradient, `0.5 * delta`) a name, and those parts, to compute once before the loop.

    A division by a number is then a multiplication by its reciprocal in the loop:
    within an ulp, where the division by a count cost Huber's backward loop a third.
    """
    fixed = set(numbers)
    names: dict[sympy.Basic, sympy.Symbol] = {}

    def invariant(node: sympy.Basic) -> bool:
        return bool(node.free_symbols) and node.free_symbols <= fixed

    def name(node: sympy.Basic) -> sympy.Basic:
        if node.is_Atom:
            return node
        if node not in names:
            names[node] = namer.temporary()
        return names[node]

    def visit(node: sympy.Basic) -> sympy.Basic:
        if node.is_Atom:
            return node
        if invariant(node):
            return name(node)
        if isinstance(node, (sympy.Add, sympy.Mul)):
            constant = [a for a in node.args if not a.free_symbols or invariant(a)]
            varying = [visit(a) for a in node.args if a not in constant]
            constant = [name(node.func(*constant))] if constant else []
            return node.func(*constant, *varying)
        args = [visit(a) for a in node.args]
        return node.func(*args) if args != list(node.args) else node

    rewritten = [visit(value) for value in values]
    return rewritten, [Assignment(symbol, expr) for expr, symbol in names.items()]
