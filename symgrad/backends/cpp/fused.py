"""`mode: fused` for the C++ target: the forward and the backward each as one CPU loop.

Note [Fused loops]: for an elementwise spec (no reduction anywhere), the forward and the
backward each run as one `at::parallel_for` over the data, on at::vec::Vectorized
values: every input element is read once, every result written once, and nothing is
materialised between operations, where the ATen Function makes a pass over memory per
operation. The loops run on CPU tensors of a floating dtype (half and bfloat16 computed
in float), broadcast to one shape and made contiguous first. Everything else takes the
ATen path: other devices, torch.compile's fake tensors, and the backward when grad mode
is on (double backward differentiates the ATen operations). The statements are the IR's:
the same formulas, read from the same saved tensors (in fused mode nothing else is
saved: symgrad.ad.derive), so the two paths agree up to rounding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sympy

from symgrad.ad.ir import Assignment, Derived, Namer, cse
from symgrad.backends.base import UnprintableError
from symgrad.backends.cpp.vectorized import VecPrinter
from symgrad.backends.statements import backward_statements
from symgrad.frontend.model import InputType, Spec
from symgrad.language import functions, piecewise, pullbacks, reductions
from symgrad.language.piecewise import is_condition


@dataclass(frozen=True)
class Loop:
    """One fused loop: the tensors it loads, the numbers it broadcasts, what it stores."""

    # Tensor locals loaded each step, from the pointer `<name>_data`.
    loads: tuple[str, ...]
    # Number locals, broadcast once from the parameter `<name>_value`.
    numbers: tuple[str, ...]
    # `const Vec t = ...;`, in order.
    lines: tuple[str, ...]
    # (pointer name, value): stored each step; a pointer may be null (not wanted).
    stores: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class FusedLoops:
    """The forward and backward loops of a spec, and what the launchers pass them."""

    forward: Loop
    backward: Loop
    # (gradient variable, need flag, input shape) per input that gets a gradient, in order.
    gradients: tuple[tuple[str, str, str], ...]
    # Forward values the forward loop stores for the backward loop, beyond the outputs.
    saved: tuple[str, ...] = ()


def fused_loops(
    derived: Derived,
    renames: Mapping[sympy.Basic, str],
    gradient_names: Mapping[str, str],
    need_names: Mapping[str, str],
    input_shapes: Mapping[str, str],
) -> FusedLoops | None:
    """The fused loops of `derived` (Note [Fused loops]), or None where it has none.

    None for a spec that is not elementwise or computes a condition as an output, and
    where some function has no Vectorized spelling.
    """
    if derived.spec.mode != "fused" or not _elementwise(derived):
        return None
    if any(i.type is InputType.BOOL for i in derived.spec.inputs):
        return None  # a flag would be a number in the loop, not a mask
    printer = VecPrinter(dict(renames))
    namer = Namer(derived.names | set(renames.values()))
    name = printer.doprint
    spec = derived.spec
    values = _inlined(derived.forward)
    outputs = [values[o.symbol] for o in spec.outputs]
    received = [i for i in spec.inputs if i.name in gradient_names]
    statements = _inlined(backward_statements(derived))
    totals = [
        expanded(
            sympy.Add(*(g.expr for p in derived.backward for g in p.gradients if g.input == item))
        ).xreplace(statements)
        for item in received
    ]
    if sum(sympy.count_ops(e) for e in [*outputs, *totals]) > _MAX_INLINED_OPS:
        return None
    saved = _saved_calls(totals, outputs, spec, namer)
    totals = [t.xreplace(saved) for t in totals]
    definitions = {o.symbol: v for o, v in zip(spec.outputs, outputs, strict=True)}
    stored = [*outputs, *(call.xreplace(definitions) for call in saved)]
    try:
        forward_lines, forward_values = _loop(stored, printer, namer)
        backward_lines, backward_values = _loop(totals, printer, namer)
    except UnprintableError:
        return None
    forward_reads = set().union(*(e.free_symbols for e in stored))
    backward_reads = set().union(*(e.free_symbols for e in totals))
    loads = [part.grad for part in derived.backward] + list(derived.saved_tensors)
    tensors = tuple(name(i.symbol) for i in spec.tensor_inputs if i.symbol in forward_reads)
    if not tensors:
        return None
    targets = [*(o.symbol for o in spec.outputs), *saved.values()]
    return FusedLoops(
        Loop(
            loads=tensors,
            numbers=tuple(
                name(i.symbol) for i in spec.inputs if not i.is_tensor and i.symbol in forward_reads
            ),
            lines=forward_lines,
            stores=tuple(
                (f"{name(t)}_data", value) for t, value in zip(targets, forward_values, strict=True)
            ),
        ),
        Loop(
            loads=tuple(name(s) for s in [*loads, *saved.values()] if s in backward_reads),
            numbers=tuple(
                name(i.symbol) for i in derived.saved_numbers if i.symbol in backward_reads
            ),
            lines=backward_lines,
            stores=tuple(
                (f"{gradient_names[item.name]}_data", value)
                for item, value in zip(received, backward_values, strict=True)
            ),
        ),
        tuple((gradient_names[i.name], need_names[i.name], input_shapes[i.name]) for i in received),
        tuple(name(s) for s in saved.values()),
    )


# Specs whose loops, written out as one expression per stored value, pass this many
# operations keep the ATen Function: the loops are meant for activation-sized formulas.
_MAX_INLINED_OPS = 3000
# At most this many forward values are stored for the backward (each one tensor).
_MAX_SAVED_CALLS = 2
# Functions too cheap to be worth a pass over memory to keep.
_CHEAP = frozenset({"abs", "sign", "floor", "ceil", "round"})


def _elementwise(derived: Derived) -> bool:
    """No reduction, shape fact, residual or saved value; no condition as an output."""
    if derived.residuals or derived.saved_values or derived.shape_facts:
        return False
    statements = [*derived.forward, *backward_statements(derived)]
    exprs = [a.expr for a in statements]
    exprs += [g.expr for part in derived.backward for g in part.gradients]
    kinds = (
        reductions.Reduction,
        reductions.Normalization,
        reductions.SumTo,
        reductions.Unsqueeze,
        reductions.ShapeFact,
    )
    if any(e.has(*kinds) for e in exprs):
        return False
    return not any(is_condition(o.expr) for o in derived.spec.outputs)


def _inlined(statements: Sequence[Assignment]) -> dict[sympy.Basic, sympy.Expr]:
    """Each statement's value, written out, in terms of what the statements read."""
    values: dict[sympy.Basic, sympy.Expr] = {}
    for statement in statements:
        values[statement.target] = expanded(statement.expr).xreplace(values)
    return values


def _saved_calls(
    totals: Sequence[sympy.Expr], outputs: Sequence[sympy.Expr], spec: Spec, namer: Namer
) -> dict[sympy.Basic, sympy.Symbol]:
    """Calls the backward makes that the forward makes too, which the forward stores.

    A transcendental call costs more than a pass over memory: where the backward would
    recompute one the forward computed, the forward stores it once (as eager autograd
    saves sigmoid's result). A call only the backward makes stays in the backward.
    """
    available = {i.symbol for i in spec.inputs} | {o.symbol for o in spec.outputs}
    definitions = {o.symbol: v for o, v in zip(spec.outputs, outputs, strict=True)}
    computed = {n for v in outputs for n in sympy.preorder_traversal(v)}
    chosen: dict[sympy.Basic, sympy.Symbol] = {}
    for total in totals:
        for node in sympy.preorder_traversal(total):
            if len(chosen) == _MAX_SAVED_CALLS:
                return chosen
            if (
                isinstance(node, functions.ElementwiseFunction)
                and type(node).__name__ not in _CHEAP
                and node.free_symbols
                and node.free_symbols <= available
                and node.xreplace(definitions) in computed
                and node not in chosen
            ):
                chosen[node] = sympy.Symbol(namer.fresh(f"saved{len(chosen)}"), real=True)
    return chosen


def _loop(
    values: Sequence[sympy.Expr], printer: VecPrinter, namer: Namer
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The lines computing `values` with their common parts named once, and each value."""
    shared, reduced = cse(list(values), namer)
    lines = tuple(
        f"const Vec {printer.doprint(a.target)} = {printer.doprint(a.expr)};" for a in shared
    )
    return lines, tuple(printer.doprint(e) for e in reduced)


def expanded(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with activations, pullbacks and kinks (but max, min and clamp, which the
    loops have) written as their definitions, and the logistic family through exp(-|u|)."""

    def is_call(node: sympy.Basic) -> bool:
        if isinstance(node, (piecewise.Maximum, piecewise.Minimum, piecewise.Clamp)):
            return False
        return isinstance(node, (piecewise.Kink, pullbacks.Pullback))

    while any(is_call(n) for n in sympy.preorder_traversal(expr)):
        expr = expr.replace(is_call, lambda node: node.expanded())
    return _through_exp(expr)


class Log1pUnit(sympy.Function):
    """log1p(t) for t in [0, 1], which the loops compute by a short series (no log call)."""

    nargs = 1


def _through_exp(expr: sympy.Expr) -> sympy.Expr:
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
