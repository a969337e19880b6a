"""Recognise layer norm written out, so torch's native_layer_norm computes it.

| written (`where` names read through, factors in any order)          | emitted            |
| ------------------------------------------------------------------- | ------------------ |
| (x - mean(x, -1, keepdim)) * rsqrt(mean((x - mean(x))**2, ...) + eps) | layer_norm(x, eps) |
| ... / sqrt(mean(...) + eps), ... * (mean(...) + eps)**-0.5           | layer_norm(x, eps) |

Both means must be over dim -1 alone, kept, and of the same x (the variance's square of
the same centred value); eps must be a number (constants and float inputs: a tensor eps
would need a derivative of its own, and the kernel takes a number). Anything else, dim 0,
a mean without keepdim, a variance of another value, stays as written. Each is an
identity (Note [Layer norm] in symgrad.language.layer_norms); the `where` names the
formula no longer reads (the mean, xc, var) are dropped, as symgrad.ad.stable drops
the names its rewrites leave unread.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import sympy

from symgrad.ad.idioms import View, is_call
from symgrad.ad.ir import Assignment
from symgrad.ad.rewrite import bottom_up
from symgrad.ad.stable import drop_unread_names
from symgrad.language import layer_norms, reductions


def recognise_statements(
    statements: Sequence[Assignment],
    outputs: Collection[sympy.Basic],
    numbers: Collection[sympy.Basic],
) -> list[Assignment]:
    """The statements with every layer norm written out replaced, names read through.

    `numbers` are the symbols an eps may read (the float inputs). A name read before and
    unread after is dropped.
    """
    definitions: dict[sympy.Basic, sympy.Expr] = {}
    view = View(definitions)
    rewritten: list[Assignment] = []
    for statement in statements:
        expr = bottom_up(statement.expr, lambda node: _layer_norm(node, view, numbers) or node)
        rewritten.append(Assignment(statement.target, expr))
        if statement.target not in outputs:
            definitions[statement.target] = expr
    if rewritten == list(statements):
        return rewritten
    return drop_unread_names(statements, rewritten, outputs)


def _layer_norm(
    node: sympy.Basic, view: View, numbers: Collection[sympy.Basic]
) -> sympy.Expr | None:
    """rstd written out as layer_norm_rstd(x, eps); a product of x - mean(x) and such an
    rstd (or its name, which xhat then reads) with xhat = layer_norm(x, eps) in their place."""
    rstd = _rstd(node, view)
    if rstd is not None:
        x, eps = rstd
        return layer_norms.LayerNormRstd(x, eps) if eps.free_symbols <= set(numbers) else None
    if not isinstance(node, sympy.Mul):
        return None
    for centred in node.args:
        x = _centred(centred, view)
        if x is None:
            continue
        for scale in node.args:
            seen = view(scale)
            if isinstance(seen, layer_norms.LayerNormRstd) and view.same(seen.argument, x):
                rest = [a for a in node.args if a is not centred and a is not scale]
                return sympy.Mul(*rest, layer_norms.LayerNorm(x, scale, seen.eps))
    return None


def _centred(expr: sympy.Basic, view: View) -> sympy.Expr | None:
    """x where `expr` is (or names) x - mean(x, dim=-1, keepdim=True)."""
    seen = view(expr)
    if not isinstance(seen, sympy.Add):
        return None
    for term in seen.args:
        mean = view(-term)
        if not _is_last_mean(mean):
            continue
        rest = sympy.Add(*(a for a in seen.args if a is not term))
        if view.same(rest, mean.argument):
            result: sympy.Expr = mean.argument
            return result
    return None


def _rstd(node: sympy.Basic, view: View) -> tuple[sympy.Expr, sympy.Expr] | None:
    """(x, eps) where `node` is 1 / sqrt(mean((x - mean(x))**2) + eps), in any spelling."""
    inside = None
    if is_call(node, "rsqrt"):
        inside = node.args[0]
    elif isinstance(node, sympy.Pow) and node.exp == -1 and is_call(node.base, "sqrt"):
        inside = node.base.args[0]
    elif isinstance(node, sympy.Pow) and node.exp.is_Number and float(node.exp) == -0.5:
        inside = node.base
    if inside is None:
        return None
    total = sympy.Add.make_args(view(inside))
    for term in total:
        variance = view(term)
        x = _centred_square(variance.argument, view) if _is_last_mean(variance) else None
        if x is not None:
            return x, sympy.Add(*(a for a in total if a is not term))
    return None


def _centred_square(expr: sympy.Basic, view: View) -> sympy.Expr | None:
    """x where `expr` is (x - mean(x, -1, keepdim=True))**2."""
    seen = view(expr)
    if not (isinstance(seen, sympy.Pow) and seen.exp == 2):
        return None
    return _centred(seen.base, view)


def _is_last_mean(node: sympy.Basic) -> bool:
    """Whether `node` is mean(..., dim=-1, keepdim=True)."""
    return isinstance(node, reductions.ReduceMean) and node.keepdim and node.dims == (-1,)
