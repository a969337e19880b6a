"""`mode: fused` for the C++ target: the forward and the backward each as one CPU loop.

Note [Fused loops]: for an elementwise spec, the forward and the backward each run as one
`at::parallel_for` over the data, on at::vec::Vectorized values: every input element is
read once, every result written once, and nothing is materialised between operations,
where the ATen Function makes a pass over memory per operation. The loops run on CPU
tensors of a floating dtype (half and bfloat16 computed in float), broadcast to one shape;
a broadcast input that covers the trailing dims is read in place and its gradient summed
in the loop (FusedFrame, FusedGradient in fused.cpp.jinja). An output may also sum or
average its elementwise value over every element (a loss such as Huber's mean): the
forward loop sums it, and the backward loop reads the output's gradient as one value;
where the reduction leaves dims, ATen operations make the outputs, and the forward loop
only stores what the backward loop reads. Everything else takes the ATen path: other
devices, torch.compile's fake tensors, and the backward when grad mode is on (double
backward differentiates the ATen operations). The statements are the
IR's: the same formulas, read from the same saved tensors (in fused mode nothing else is
saved: symgrad.ad.derive), so the two paths agree up to rounding. The backward loop
recomputes the forward values it needs from those inputs, which it reads anyway, but for
transcendental calls the forward makes too (exp, tanh, erf: `_saved_calls`), which the
forward loop stores for it; a Function of one input and one output, and a loss whose
backward would read several inputs, then stores its derivative instead
(`_derivative_factor`): the backward loop only multiplies, and, where the graph is not
kept, writes the gradient over the derivative (FusedGradient). The loops' large fresh
buffers are advised to huge pages before their first write (fused_huge_pages).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import sympy

from symgrad.ad.ir import Assignment, Derived, Namer, cse
from symgrad.backends.base import UnprintableError
from symgrad.backends.cpp.loop_forms import expanded, hoisted, through_exp
from symgrad.backends.cpp.vectorized import VecPrinter
from symgrad.backends.statements import backward_statements
from symgrad.frontend.model import Input, InputType
from symgrad.language import functions, reductions, scans
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
    # What the caller passes for each load (a gradient unsqueezed where the forward reduced).
    arguments: tuple[str, ...] = ()
    # `const Vec c = ...;` of numbers only, computed once before the loop.
    invariants: tuple[str, ...] = ()


@dataclass(frozen=True)
class Summed:
    """A forward output that is the sum or mean of its loop value over every element."""

    # The reduction's dims (empty: all) and keepdim, for the output's shape.
    dims: tuple[int, ...]
    keepdim: bool
    mean: bool


@dataclass(frozen=True)
class FusedLoops:
    """The forward and backward loops of a spec, and what the launchers pass them."""

    forward: Loop
    backward: Loop
    # (gradient variable, need flag, input shape) per input that gets a gradient, in order.
    gradients: tuple[tuple[str, str, str], ...]
    # Forward values the forward loop stores for the backward loop, beyond the outputs.
    saved: tuple[str, ...] = ()
    # Per forward store: how the output is reduced, or None for a value per element.
    summed: tuple[Summed | None, ...] = ()
    # Gradients of residual outputs: the loops assume them undefined (they always are).
    unused: tuple[str, ...] = ()
    # Gradients that must be defined before the loop's arguments are (they unsqueeze them).
    required: tuple[str, ...] = ()
    # The stored derivative (`_derivative_factor`), which the backward loop may overwrite
    # with the gradient where the graph is not kept; None where there is none.
    donor: str | None = None


def fused_loops(
    derived: Derived,
    renames: Mapping[sympy.Basic, str],
    gradient_names: Mapping[str, str],
    need_names: Mapping[str, str],
    input_shapes: Mapping[str, str],
    detail: str = "",
    printer: VecPrinter | None = None,
    store: bool = True,
) -> FusedLoops | None:
    """The fused loops of `derived` (Note [Fused loops]), or None where it has none.

    None for a spec that is not elementwise (but for outputs that sum or average over
    every element) or computes a condition as an output, and where some function has
    no Vectorized spelling. `detail` is the helpers' namespace (Note [Generated names]
    in symgrad.backends.cpp.names). `printer`: another spelling of the same loops (Triton's).
    `store`: the forward loop stores calls or the derivative for the backward loop; without
    it the backward loop recomputes everything from the inputs, as a device whose loops are
    bound by memory traffic should (Note [Triton kernels] in symgrad.backends.triton).
    """
    spec = derived.spec
    if spec.mode != "fused" or not _fusible(derived):
        return None
    if any(i.type is InputType.BOOL for i in spec.inputs):
        return None  # a flag would be a number in the loop, not a mask
    printer = printer or VecPrinter(dict(renames), f"{detail}::" if detail else "")
    namer = Namer(derived.names | set(renames.values()))
    # The logistic family stays calls until the stored calls are chosen, so that what is
    # stored is sigmoid(u), say, not the exp(-|u|) it is computed from (through_exp):
    # the backward then neither divides nor branches on the sign to rebuild it.
    outputs, summed = _stored_outputs(derived, _inlined(derived.forward, logistic=False))
    received = [i for i in spec.inputs if i.name in gradient_names]
    totals = _backward_totals(derived, received)
    if sum(sympy.count_ops(e) for e in [*outputs, *totals]) > _MAX_INLINED_OPS:
        return None
    totals, unsqueezed = _unsqueezed_grads(totals, printer, namer)
    reduced = {o.symbol for o, how in zip(derived.outputs, summed, strict=True) if how}
    definitions = _definitions(derived, outputs, reduced)
    saved = _saved_calls(totals, outputs, derived, definitions, namer) if store else {}
    if not saved and store:
        # softplus: its backward's sigmoid is no call its forward makes, but both go
        # through exp(-|x|), which is then the call stored.
        outputs, totals = [through_exp(o) for o in outputs], [through_exp(t) for t in totals]
        definitions = _definitions(derived, outputs, reduced)
        saved = _saved_calls(totals, outputs, derived, definitions, namer)
    grad = next(iter(unsqueezed)) if reduced and unsqueezed else derived.backward[0].grad
    factor = _derivative_factor(totals, derived, grad, reduced, bool(saved)) if store else None
    if factor is None:
        totals = [t.xreplace(saved) for t in totals]
    else:
        derivative, multiplier = factor
        symbol = next(iter(saved.values()), None) or sympy.Symbol(namer.fresh("saved0"), real=True)
        saved = {derivative: symbol}
        totals = [multiplier * symbol]
    totals = [through_exp(t) for t in totals]
    outputs = [through_exp(o) for o in outputs]
    stored = [*outputs, *(through_exp(call.xreplace(definitions)) for call in saved)]
    targets = [*(o.symbol for o in derived.outputs), *saved.values()]
    name = printer.doprint
    try:
        forward, _ = _build_loop(
            stored,
            [f"{name(t)}_data" for t in targets],
            [i.symbol for i in spec.tensor_inputs],
            [i.symbol for i in spec.inputs if not i.is_tensor],
            printer,
            namer,
        )
        backward, loaded = _build_loop(
            totals,
            [f"{gradient_names[i.name]}_data" for i in received],
            [
                *(p.grad for p in derived.backward),
                *unsqueezed,
                *derived.saved_tensors,
                *saved.values(),
            ],
            [*(i.symbol for i in derived.saved_numbers), *(f.target for f in derived.shape_facts)],
            printer,
            namer,
        )
    except UnprintableError:
        return None
    if not forward.loads:
        return None
    arguments = tuple(unsqueezed[s].code if s in unsqueezed else name(s) for s in loaded)
    return FusedLoops(
        forward,
        dataclasses.replace(backward, arguments=arguments),
        tuple((gradient_names[i.name], need_names[i.name], input_shapes[i.name]) for i in received),
        tuple(name(s) for s in saved.values()),
        (*summed, *(None for _ in saved)),
        tuple(name(p.grad) for p in derived.backward if p.output in derived.residuals),
        tuple(sorted({u.grad for u in unsqueezed.values()})),
        name(next(iter(saved.values()))) if factor is not None else None,
    )


def _backward_totals(derived: Derived, received: Sequence[Input]) -> list[sympy.Expr]:
    """Each received input's whole gradient, written out in terms of what the backward
    loads; residual outputs' parts left out (their gradients are always undefined)."""
    statements = _inlined(backward_statements(derived), logistic=False)
    parts = [p for p in derived.backward if p.output not in derived.residuals]
    return [
        expanded(
            sympy.Add(*(g.expr for p in parts for g in p.gradients if g.input == item)),
            logistic=False,
        ).xreplace(statements)
        for item in received
    ]


# Specs whose loops, written out as one expression per stored value, pass this many
# operations keep the ATen Function: the loops are meant for activation-sized formulas.
_MAX_INLINED_OPS = 3000
# At most this many forward values are stored for the backward (each one tensor).
_MAX_SAVED_CALLS = 2
# Functions too cheap to be worth a pass over memory to keep.
_RECOMPUTED = frozenset({"abs", "sign", "floor", "ceil", "round"})
# What the loops cannot compute inside an expression.
_NOT_ELEMENTWISE = (
    reductions.Reduction,
    reductions.Normalization,
    reductions.SumTo,
    reductions.Unsqueeze,
    reductions.ShapeFact,
    scans.AlongDim,
)


def _fusible(derived: Derived) -> bool:
    """Elementwise but for outputs that sum or average everything and the backward's
    unsqueezed gradients and element counts; no saved value; no condition as an output."""
    if derived.saved_values or any(
        not isinstance(f.expr, reductions.Count) for f in derived.shape_facts
    ):
        return False
    values = _inlined(derived.forward)
    for output in derived.outputs:
        value = values[output.symbol]
        if isinstance(value, (reductions.ReduceSum, reductions.ReduceMean)):
            value = value.argument
        if value.has(*_NOT_ELEMENTWISE):
            return False
    grads = {part.grad for part in derived.backward}
    exprs = [a.expr for a in backward_statements(derived)]
    exprs += [g.expr for part in derived.backward for g in part.gradients]
    for expr in exprs:
        unsqueezed = expr.replace(
            lambda n: isinstance(n, reductions.Unsqueeze) and n.args[0] in grads,
            lambda n: n.args[0],
        )
        if unsqueezed.has(*_NOT_ELEMENTWISE):
            return False
    return not any(is_condition(o.expr) for o in derived.spec.outputs)


def _stored_outputs(
    derived: Derived, values: Mapping[sympy.Basic, sympy.Expr]
) -> tuple[list[sympy.Expr], list[Summed | None]]:
    """What the forward loop computes for each output, and how it is summed, if it is."""
    stored: list[sympy.Expr] = []
    summed: list[Summed | None] = []
    for output in derived.outputs:
        value = values[output.symbol]
        if isinstance(value, (reductions.ReduceSum, reductions.ReduceMean)):
            mean = isinstance(value, reductions.ReduceMean)
            summed.append(Summed(value.dims or (), value.keepdim, mean))
            value = value.argument
        else:
            summed.append(None)
        stored.append(value)
    return stored, summed


class _Unsqueezed(NamedTuple):
    """A gradient the backward loop loads unsqueezed: its name, and the C++ that does it."""

    grad: str
    code: str


def _unsqueezed_grads(
    totals: Sequence[sympy.Expr], printer: VecPrinter, namer: Namer
) -> tuple[list[sympy.Expr], dict[sympy.Basic, _Unsqueezed]]:
    """`totals` with each gradient that is unsqueezed (the gradient of a reduced output)
    a load of its own, and how each such load is made."""
    symbols: dict[sympy.Basic, sympy.Symbol] = {}
    made: dict[sympy.Basic, _Unsqueezed] = {}

    def load(node: reductions.Unsqueeze) -> sympy.Symbol:
        if node not in symbols:
            grad = printer.doprint(node.args[0])
            symbol = sympy.Symbol(namer.fresh(f"{grad}_unsqueezed"), real=True)
            symbols[node] = symbol
            made[symbol] = _Unsqueezed(grad, _unsqueezed(grad, node.dims))
        return symbols[node]

    totals = [t.replace(lambda n: isinstance(n, reductions.Unsqueeze), load) for t in totals]
    return totals, made


def _unsqueezed(grad: str, dims: tuple[int, ...]) -> str:
    """The C++ that unsqueezes the gradient named `grad` back over `dims` (Note
    [Reductions of 0-d tensors] in symgrad.language.reductions)."""
    if reductions.unsqueezes_by_rank(dims):
        return f"({grad}.dim() > 0 ? {grad}.unsqueeze(-1) : {grad})"
    return grad + "".join(f".unsqueeze({d})" for d in reductions.restoring_unsqueezes(dims))


def _inlined(
    statements: Sequence[Assignment], logistic: bool = True
) -> dict[sympy.Basic, sympy.Expr]:
    """Each statement's value, written out, in terms of what the statements read
    (`logistic`: as `expanded`)."""
    values: dict[sympy.Basic, sympy.Expr] = {}
    for statement in statements:
        values[statement.target] = expanded(statement.expr, logistic).xreplace(values)
    return values


def _definitions(
    derived: Derived, outputs: Sequence[sympy.Expr], reduced: set[sympy.Symbol]
) -> dict[sympy.Basic, sympy.Expr]:
    """Each output's loop value, by output, but for summed outputs (known after the loop)."""
    return {
        o.symbol: value
        for o, value in zip(derived.outputs, outputs, strict=True)
        if o.symbol not in reduced
    }


def _saved_calls(
    totals: Sequence[sympy.Expr],
    outputs: Sequence[sympy.Expr],
    derived: Derived,
    definitions: Mapping[sympy.Basic, sympy.Expr],
    namer: Namer,
) -> dict[sympy.Basic, sympy.Symbol]:
    """Calls the backward makes that the forward makes too, which the forward stores.

    A transcendental call costs more than a pass over memory: where the backward would
    recompute one the forward computed, the forward stores it once (as eager autograd
    saves sigmoid's result). A call only the backward makes stays in the backward, and so
    do the cheap ones (`_RECOMPUTED`). Measured (paired, one thread): storing is 10-20%
    faster for silu and gelu, and on par for softplus, than calling exp again.
    `definitions`: the outputs' loop values (_definitions).
    """
    available = {i.symbol for i in derived.spec.inputs} | set(definitions)
    computed = {n for v in outputs for n in sympy.preorder_traversal(v)}
    chosen: dict[sympy.Basic, sympy.Symbol] = {}
    for total in totals:
        for node in sympy.preorder_traversal(total):
            if len(chosen) == _MAX_SAVED_CALLS:
                return chosen
            if (
                isinstance(node, functions.ElementwiseFunction)
                and type(node).__name__ not in _RECOMPUTED
                and node.free_symbols
                and node.free_symbols <= available
                and node.xreplace(definitions) in computed
                and node not in chosen
            ):
                chosen[node] = sympy.Symbol(namer.fresh(f"saved{len(chosen)}"), real=True)
    return chosen


def _derivative_factor(
    totals: Sequence[sympy.Expr],
    derived: Derived,
    grad: sympy.Symbol,
    reduced: set[sympy.Symbol],
    calls_saved: bool,
) -> tuple[sympy.Expr, sympy.Expr] | None:
    """The derivative that the forward loop stores for a one-input, one-output Function,
    and what the backward loop multiplies it by (the output's gradient, and the element
    count of a mean); else None.

    The backward then reads the gradient and one value per element, not the inputs and
    the calls, only multiplies, and may write the gradient over the stored value (where
    the graph is not kept; FusedGradient). Worth it where the forward stores calls
    anyway (`calls_saved`: silu, gelu, mish), and for a sum or mean over every element
    whose backward would read several inputs (Huber): its forward then writes the
    derivative as torch.compile's writes `x - target`, and its backward overwrites it.
    """
    if len(totals) != 1 or len(derived.outputs) != 1:
        return None
    inputs = {i.symbol for i in derived.spec.tensor_inputs}
    if not calls_saved and not (reduced and len(totals[0].free_symbols & inputs) > 1):
        return None
    terms = sympy.Add.make_args(totals[0])
    if any(term.as_independent(grad, as_Add=False)[1] != grad for term in terms):
        return None
    facts = {f.target for f in derived.shape_facts}
    # Each term is (what the forward can compute) * (the same power of the count): the
    # terms are split one by one, not refactored, so that the derivative keeps the
    # forward's subexpressions (tanh of the same argument, shared by the loop's CSE).
    split = [
        term.xreplace({grad: sympy.Integer(1)}).as_independent(*facts, as_Add=False)
        for term in terms
    ]
    count_parts = {count_part for _, count_part in split}
    derivative = sympy.Add(*(part for part, _ in split))
    numbers = {i.symbol for i in derived.spec.inputs}
    if len(count_parts) != 1 or derivative.free_symbols - numbers:
        return None
    count_part = count_parts.pop()
    if count_part.free_symbols - facts:
        return None
    return derivative, grad * count_part


def _build_loop(
    values: Sequence[sympy.Expr],
    stores: Sequence[str],
    tensors: Sequence[sympy.Basic],
    numbers: Sequence[sympy.Basic],
    printer: VecPrinter,
    namer: Namer,
) -> tuple[Loop, tuple[sympy.Basic, ...]]:
    """The loop that stores `values` at `stores`, their common parts named once, loading
    the `tensors` and broadcasting the `numbers` they read (in those orders); and the
    tensors it loads."""
    values, invariants = hoisted(values, numbers, namer)
    shared, reduced = cse(values, namer)
    reads = set().union(*(e.free_symbols for e in [*values, *(a.expr for a in invariants)]))
    loaded = tuple(t for t in tensors if t in reads)
    name = printer.doprint
    loop = Loop(
        loads=tuple(name(t) for t in loaded),
        numbers=tuple(name(n) for n in numbers if n in reads),
        lines=tuple(printer.line(name(a.target), name(a.expr)) for a in shared),
        stores=tuple(zip(stores, (name(e) for e in reduced), strict=True)),
        arguments=tuple(name(t) for t in loaded),
        invariants=tuple(printer.line(name(a.target), name(a.expr)) for a in invariants),
    )
    return loop, loaded
