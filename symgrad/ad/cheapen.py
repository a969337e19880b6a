"""Rewrite formulas into identities that cost less to compute and to differentiate.

On CPU, torch's tanh costs several times its sigmoid (both vectorised, but tanh's
kernel is the slower one), and the derivative of either reads its value. A tanh that
only appears shifted by a constant is a sigmoid, exactly:

| written                  | emitted               |
| ------------------------ | --------------------- |
| k + k * tanh(u)          | 2k * sigmoid(2u)      |
| k - k * tanh(u)          | 2k * sigmoid(-2u)     |

The sigmoid form is also the more accurate one: 1 - tanh(u) rounds to 0 in float32
from u = 9 on, where 2 sigmoid(-2u) keeps its tiny value. Runs after
`symgrad.ad.fuse`, which recognises `1 + tanh(...)` inside the tanh GELU first.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from symgrad.language import functions


def cheapen(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with every pattern of the table above replaced, bottom-up."""
    memo: dict[sympy.Basic, sympy.Basic] = {}

    def visit(node: sympy.Basic) -> sympy.Basic:
        if node in memo:
            return memo[node]
        result = node
        if node.args:
            args = [visit(arg) for arg in node.args]
            if any(new is not old for new, old in zip(args, node.args, strict=True)):
                result = node.func(*args)
        for rule in _RULES:
            rewritten = rule(result)
            if rewritten is not None:
                result = rewritten
                break
        memo[node] = result
        return result

    rewritten: sympy.Expr = visit(expr)
    return rewritten


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
