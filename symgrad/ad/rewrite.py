"""Bottom-up rewriting of expressions, the traversal the formula passes share."""

from __future__ import annotations

from collections.abc import Callable

import sympy


def bottom_up(expr: sympy.Expr, rewrite: Callable[[sympy.Basic], sympy.Basic]) -> sympy.Expr:
    """`expr` rebuilt from its leaves up, `rewrite` applied to each node after its arguments.

    Memoized per node: a formula repeats subexpressions, and each is rewritten once.
    """
    memo: dict[sympy.Basic, sympy.Basic] = {}

    def visit(node: sympy.Basic) -> sympy.Basic:
        if node in memo:
            return memo[node]
        result = node
        if node.args:
            args = [visit(arg) for arg in node.args]
            if any(new is not old for new, old in zip(args, node.args, strict=True)):
                result = node.func(*args)
        memo[node] = result = rewrite(result)
        return result

    rewritten: sympy.Expr = visit(expr)
    return rewritten
