"""Rewrite formulas that overflow as written into torch's numerically stable primitives.

`log(1 + exp(u))` is what a user writes for softplus, and it overflows in float32 from
u = 89 on, in the forward (inf) and in its derivative exp(u) / (1 + exp(u)) (inf / inf =
NaN). The stable primitive computes the same value without overflow, and its derivative
rule is stable too (softplus' = sigmoid). Each rule is an identity, so the rewrite
changes nothing but rounding.

| written                                     | emitted                             |
| ------------------------------------------- | ----------------------------------- |
| log(1 + exp(u)), log1p(exp(u))              | softplus(u)                         |
| log(exp(a) + exp(b) + ...)                  | logaddexp(logaddexp(a, b), ...)     |
| 1 / (1 + exp(-u))                           | sigmoid(u)                          |
| 1 / sqrt(u)                                 | rsqrt(u)                            |
| log(sigmoid(u)), log(1 - sigmoid(u))        | log_sigmoid(u), log_sigmoid(-u)     |
| log(sum(exp(u), dims, keepdim))             | logsumexp(u, dims, keepdim)         |
| exp(u) / sum(exp(u), dim, keepdim=True)     | softmax(u, dim) (also dim=0 unkept) |
| exp(u) / sum(exp(u), dims, keepdim)         | exp(u - logsumexp(u, dims, keepdim))|
| u - logsumexp(u, dim, keepdim=True)         | log_softmax(u, dim)                 |
| log(softmax(u, dim)), log(exp(u))           | log_softmax(u, dim), u              |
| exp(log_softmax(u, dim))                    | softmax(u, dim)                     |
| log(1 - exp(u)), log(-expm1(u))             | log1mexp(u)                         |
| log1p(-exp(u))                              | log1mexp(u)                         |

and the stable idioms of smooth functions (symgrad.ad.idioms), and Huber's loss and
smooth-L1 written as a `where` (symgrad.ad.loss_idioms).

Note [Patterns across where names]: users split these formulas over `where` names
(`ex = exp(x)`, `y = ex / sum(ex, dim=-1, keepdim=True)`). The rules see a name as its
definition (idioms.View), so the pattern matches wherever its parts are named, and the
rewritten formula reads the pattern's inputs (softmax(x)). A name the rewrites leave
unread is dropped (`stabilize_statements`); every other name, and the user's factoring
with it, stays as written: nothing is inlined where no rule applies.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import sympy

from symgrad.ad import idioms, loss_idioms
from symgrad.ad.idioms import View, is_call
from symgrad.ad.ir import Assignment
from symgrad.ad.rewrite import bottom_up
from symgrad.language import functions, reductions

Rule = Callable[[sympy.Basic, View], sympy.Expr | None]


def stabilize(
    expr: sympy.Expr, definitions: Mapping[sympy.Basic, sympy.Expr] | None = None
) -> sympy.Expr:
    """`expr` with every overflowing pattern of the table above replaced, bottom-up.

    `definitions` are the `where` names `expr` may read, already stabilized (Note
    [Patterns across where names]). A rewritten node is stabilized again: its new
    arguments may match a rule in turn.
    """
    view = View(definitions or {})

    def apply_rules(node: sympy.Basic) -> sympy.Basic:
        for rule in _RULES:
            rewritten = rule(node, view)
            if rewritten is not None:
                return stabilize(rewritten, definitions)
        return node

    return bottom_up(expr, apply_rules)


def cancel_mirrored(expr: sympy.Expr, definitions: Mapping[sympy.Basic, sympy.Expr]) -> sympy.Expr:
    """`expr` with c f(u) - c f(-u) written c u (idioms.mirrored_difference), reading
    `definitions`' names: derivatives form such differences where the spec shows none."""
    view = View(definitions)

    def rewrite(node: sympy.Basic) -> sympy.Basic:
        return idioms.mirrored_difference(node, view) or node

    return bottom_up(expr, rewrite)


def stabilize_statements(
    statements: Sequence[Assignment], outputs: Collection[sympy.Basic]
) -> list[Assignment]:
    """The statements stabilized in order, each seeing the `where` names before it.

    A name that was read before the rewrites and is read by nothing now is dropped:
    the rewritten formulas compute its value another way (Note [Patterns across where
    names]).
    """
    definitions: dict[sympy.Basic, sympy.Expr] = {}
    stabilized: list[Assignment] = []
    for statement in statements:
        expr = stabilize(statement.expr, definitions)
        stabilized.append(Assignment(statement.target, expr))
        if statement.target not in outputs:
            definitions[statement.target] = expr
    return drop_unread_names(statements, stabilized, outputs)


def drop_unread_names(
    before: Sequence[Assignment],
    after: Sequence[Assignment],
    outputs: Collection[sympy.Basic],
) -> list[Assignment]:
    """`after` without the names that `before` read and that nothing reads now: a
    rewrite computes their value another way (Note [Patterns across where names])."""
    read_before = set().union(*(s.expr.free_symbols for s in before))
    read: set[sympy.Basic] = set()
    kept: list[Assignment] = []
    for statement in reversed(after):
        target = statement.target
        if target in outputs or target in read or target not in read_before:
            kept.append(statement)
            read |= statement.expr.free_symbols
    return kept[::-1]


def _one_plus(node: sympy.Basic, name: str, view: View) -> sympy.Expr | None:
    """u when `node` is 1 + name(u)."""
    if isinstance(node, sympy.Add) and len(node.args) == 2 and sympy.Integer(1) in node.args:
        (other,) = (a for a in node.args if a != 1)
        return view.argument(other, name)
    return None


def _softplus(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """log(1 + exp(u)) and log1p(exp(u)) -> softplus(u)."""
    u = None
    if is_call(node, "log"):
        u = _one_plus(view(node.args[0]), "exp", view)
    elif is_call(node, "log1p"):
        u = view.argument(node.args[0], "exp")
    return None if u is None else functions.call("softplus", u)


def _logaddexp(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """log(exp(a) + exp(b) + ...) -> logaddexp(logaddexp(a, b), ...)."""
    if not is_call(node, "log"):
        return None
    total = view(node.args[0])
    if not isinstance(total, sympy.Add):
        return None
    exponents = [view.argument(term, "exp") for term in total.args]
    if any(e is None for e in exponents):
        return None
    first, *rest = (e for e in exponents if e is not None)
    result = first
    for exponent in rest:
        result = idioms.logaddexp(result, exponent)
    return result


def _log_exp(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """log(exp(u)) -> u; log(softmax(u, dim)) -> log_softmax(u, dim)."""
    if not is_call(node, "log"):
        return None
    inner = view(node.args[0])
    if is_call(inner, "exp"):
        result: sympy.Expr = inner.args[0]
        return result
    if isinstance(inner, reductions.Softmax):
        return reductions.normalize("log_softmax", inner.argument, inner.dim)
    return None


def _exp_log_softmax(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """exp(log_softmax(u, dim)) -> softmax(u, dim): one kernel, not two."""
    if not is_call(node, "exp"):
        return None
    inner = view(node.args[0])
    if isinstance(inner, reductions.LogSoftmax):
        return reductions.normalize("softmax", inner.argument, inner.dim)
    return None


def _sigmoid(node: sympy.Basic, view: View) -> sympy.Expr | None:
    if isinstance(node, sympy.Pow) and node.exp == -1:
        u = _one_plus(view(node.base), "exp", view)
        if u is not None:
            return functions.call("sigmoid", -u)
    return None


def _rsqrt(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """1 / sqrt(u) -> rsqrt(u): one kernel, and a derivative in terms of its value."""
    if isinstance(node, sympy.Pow) and node.exp == -1 and is_call(node.base, "sqrt"):
        return functions.call("rsqrt", node.base.args[0])
    return None


def _log_sigmoid(node: sympy.Basic, view: View) -> sympy.Expr | None:
    if not is_call(node, "log"):
        return None
    argument = view(node.args[0])
    u = view.argument(argument, "sigmoid")
    if u is not None:
        return functions.call("log_sigmoid", u)
    if isinstance(argument, sympy.Add) and len(argument.args) == 2 and 1 in argument.args:
        (other,) = (a for a in argument.args if a != 1)
        u = view.argument(-other, "sigmoid")
        if u is not None:
            return functions.call("log_sigmoid", -u)
    return None


def _one_minus(node: sympy.Basic, name: str, view: View) -> sympy.Expr | None:
    """u when `node` is 1 - name(u)."""
    if isinstance(node, sympy.Add) and len(node.args) == 2 and sympy.Integer(1) in node.args:
        (other,) = (a for a in node.args if a != 1)
        return view.argument(-other, name)
    return None


def _log1mexp(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """log(1 - exp(u)), log(-expm1(u)) and log1p(-exp(u)) -> log1mexp(u).

    Each spelling loses precision in part of u < 0 (log1p(-exp(u)) near 0, log(-expm1(u))
    below -30, the first at both); log1mexp switches between the last two at -ln 2. The
    rule emits the opaque call, which no rule reads: its definition is spelled only when
    printed.
    """
    u = None
    if is_call(node, "log"):
        argument = view(node.args[0])
        u = view.argument(-argument, "expm1")
        if u is None:
            u = _one_minus(argument, "exp", view)
    elif is_call(node, "log1p"):
        u = view.argument(-node.args[0], "exp")
    return None if u is None else functions.call("log1mexp", u)


def _logsumexp(node: sympy.Basic, view: View) -> sympy.Expr | None:
    if is_call(node, "log"):
        total = view(node.args[0])
        if isinstance(total, reductions.ReduceSum):
            u = view.argument(total.argument, "exp")
            if u is not None:
                return reductions.reduce("logsumexp", u, total.dims, total.keepdim)
    return None


def _softmax(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """exp(u) * sum(exp(u), dims, keepdim)**-1 -> exp(u - logsumexp(u, dims, keepdim)).

    torch's softmax kernel where the pattern is one dim that the quotient broadcasts
    back (kept, or the leading one); the lse form is the same broadcast as the quotient
    for any dims and keepdim, but loses the last bits of large inputs (Normalization).
    """
    if not isinstance(node, sympy.Mul):
        return None
    for factor in node.args:
        seen = view(factor)
        total = view(seen.base) if isinstance(seen, sympy.Pow) and seen.exp == -1 else None
        if not isinstance(total, reductions.ReduceSum):
            continue
        u = view.argument(total.argument, "exp")
        numerator = next((a for a in node.args if view.same(a, total.argument)), None)
        if u is None or numerator is None:
            continue
        if (
            total.dims is not None
            and len(total.dims) == 1
            and (total.keepdim or total.dims == (0,))
        ):
            # Without keepdim the sum broadcasts back along the dim only when it leads.
            normalized = reductions.normalize("softmax", u, total.dims[0])
        else:
            lse = reductions.reduce("logsumexp", u, total.dims, total.keepdim)
            normalized = functions.call("exp", u - lse)
        rest = list(node.args)
        rest.remove(factor)
        rest.remove(numerator)
        return sympy.Mul(normalized, *rest)
    return None


def _log_softmax(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """u - logsumexp(u, dim, keepdim=True) -> log_softmax(u, dim)."""
    if not isinstance(node, sympy.Add):
        return None
    for term in node.args:
        lse = view(-term)
        if not (isinstance(lse, reductions.ReduceLogSumExp) and lse.keepdim):
            continue
        if lse.dims is None or len(lse.dims) != 1:
            continue
        rest = list(node.args)
        rest.remove(term)
        u = sympy.Add(*rest)
        if view.same(u, lse.argument):
            return reductions.normalize("log_softmax", lse.argument, lse.dims[0])
    return None


_RULES: tuple[Rule, ...] = (
    _softplus,
    _logaddexp,
    _log_exp,
    _sigmoid,
    _rsqrt,
    _log_sigmoid,
    _log1mexp,
    _logsumexp,
    _softmax,
    _log_softmax,
    _exp_log_softmax,
    idioms.smooth_pairs,
    idioms.negated_softplus,
    idioms.mirrored_difference,
    loss_idioms.pointwise_loss,
)
