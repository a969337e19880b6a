"""Rewrite formulas that overflow as written into torch's numerically stable primitives.

`log(1 + exp(u))` is what a user writes for softplus, and it overflows in float32 from
u = 89 on, in the forward (inf) and in its derivative exp(u) / (1 + exp(u)) (inf / inf =
NaN). The stable primitive computes the same value without overflow, and its derivative
rule is stable too (softplus' = sigmoid). Each rule is an identity, so the rewrite
changes nothing but rounding. Rules match within one expression; a formula split
across `where` names is left as written (write the primitive then).

| written                                  | emitted                             |
| ---------------------------------------- | ----------------------------------- |
| log(1 + exp(u))                          | softplus(u)                         |
| 1 / (1 + exp(-u))                        | sigmoid(u)                          |
| 1 / sqrt(u)                              | rsqrt(u)                            |
| log(sigmoid(u)), log(1 - sigmoid(u))     | log_sigmoid(u), log_sigmoid(-u)     |
| log(sum(exp(u), dim))                    | logsumexp(u, dim)                   |
| exp(u) / sum(exp(u), dim, keepdim=True)  | softmax(u, dim)                     |
| u - logsumexp(u, dim, keepdim=True)      | log_softmax(u, dim)                 |

(The softmax rules need one dim; with several, softmax is exp(u - logsumexp(u, dims)).)
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from symgrad.ad.rewrite import bottom_up
from symgrad.language import functions, reductions


def stabilize(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with every overflowing pattern of the table above replaced, bottom-up.

    A rewritten node is stabilized again: its new arguments may match a rule in turn.
    """

    def apply_rules(node: sympy.Basic) -> sympy.Basic:
        for rule in _RULES:
            rewritten = rule(node)
            if rewritten is not None:
                return stabilize(rewritten)
        return node

    return bottom_up(expr, apply_rules)


def _is_call(node: sympy.Basic, name: str) -> bool:
    return type(node).__name__ == name and isinstance(node, functions.ElementwiseFunction)


def _one_plus(node: sympy.Basic, name: str) -> sympy.Expr | None:
    """u when `node` is 1 + name(u)."""
    if isinstance(node, sympy.Add) and len(node.args) == 2 and sympy.Integer(1) in node.args:
        (other,) = (a for a in node.args if a != 1)
        if _is_call(other, name):
            result: sympy.Expr = other.args[0]
            return result
    return None


def _softplus(node: sympy.Basic) -> sympy.Expr | None:
    if _is_call(node, "log"):
        u = _one_plus(node.args[0], "exp")
        if u is not None:
            return functions.call("softplus", u)
    return None


def _sigmoid(node: sympy.Basic) -> sympy.Expr | None:
    if isinstance(node, sympy.Pow) and node.exp == -1:
        u = _one_plus(node.base, "exp")
        if u is not None:
            return functions.call("sigmoid", -u)
    return None


def _rsqrt(node: sympy.Basic) -> sympy.Expr | None:
    """1 / sqrt(u) -> rsqrt(u): one kernel, and a derivative in terms of its value."""
    if isinstance(node, sympy.Pow) and node.exp == -1 and _is_call(node.base, "sqrt"):
        return functions.call("rsqrt", node.base.args[0])
    return None


def _log_sigmoid(node: sympy.Basic) -> sympy.Expr | None:
    if not _is_call(node, "log"):
        return None
    (argument,) = node.args
    if _is_call(argument, "sigmoid"):
        return functions.call("log_sigmoid", argument.args[0])
    if isinstance(argument, sympy.Add) and len(argument.args) == 2 and 1 in argument.args:
        (other,) = (a for a in argument.args if a != 1)
        negated = -other
        if _is_call(negated, "sigmoid"):
            return functions.call("log_sigmoid", -negated.args[0])
    return None


def _logsumexp(node: sympy.Basic) -> sympy.Expr | None:
    if _is_call(node, "log"):
        (total,) = node.args
        if isinstance(total, reductions.ReduceSum) and _is_call(total.argument, "exp"):
            return reductions.reduce("logsumexp", total.argument.args[0], total.dims, total.keepdim)
    return None


def _softmax(node: sympy.Basic) -> sympy.Expr | None:
    """exp(u) * sum(exp(u), dim, keepdim=True)**-1 -> exp(u - logsumexp(u, dim, True))."""
    if not isinstance(node, sympy.Mul):
        return None
    for factor in node.args:
        total = factor.base if isinstance(factor, sympy.Pow) and factor.exp == -1 else None
        if not (isinstance(total, reductions.ReduceSum) and total.keepdim):
            continue
        numerator = total.argument
        if _is_call(numerator, "exp") and numerator in node.args:
            u = numerator.args[0]
            if total.dims is not None and len(total.dims) == 1:
                normalized = reductions.normalize("softmax", u, total.dims[0])
            else:
                lse = reductions.reduce("logsumexp", u, total.dims, keepdim=True)
                normalized = functions.call("exp", u - lse)
            rest = list(node.args)
            rest.remove(factor)
            rest.remove(numerator)
            return sympy.Mul(normalized, *rest)
    return None


def _log_softmax(node: sympy.Basic) -> sympy.Expr | None:
    """u - logsumexp(u, dim, keepdim=True) -> log_softmax(u, dim)."""
    if not isinstance(node, sympy.Add):
        return None
    for term in node.args:
        lse = -term
        if not (isinstance(lse, reductions.ReduceLogSumExp) and lse.keepdim):
            continue
        if lse.dims is None or len(lse.dims) != 1:
            continue
        rest = list(node.args)
        rest.remove(term)
        u = sympy.Add(*rest)
        if u == lse.argument:
            return reductions.normalize("log_softmax", u, lse.dims[0])
    return None


_RULES: tuple[Callable[[sympy.Basic], sympy.Expr | None], ...] = (
    _softplus,
    _sigmoid,
    _rsqrt,
    _log_sigmoid,
    _logsumexp,
    _softmax,
    _log_softmax,
)
