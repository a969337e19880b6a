"""Schedule the backward: share work, place each statement, decide what to save.

Input: for each output, the gradient expressions of its inputs (from `symgrad.ad.derive`),
which read forward values by name. The plan recomputes the forward values they read,
runs one common-subexpression pass over those values and all gradients together, and
places every resulting statement where it costs least:

- used by the parts of several outputs -> the prelude, which always runs;
- used by one output's part only -> inside `if grad_<output> is not None`, so an
  output nobody used costs nothing;
- inside those, used by several inputs' gradients -> a block guarded by
  `need_a or need_b`; used by one input only -> inside that input's `if need_x`.

Note [What the backward saves]: the backward reads tensor inputs and outputs, which are
saved with `save_for_backward`; numbers, which are stored on ctx; the forward values
symgrad.ad.saving chose to save (Note [Saved values]); and recomputes every other
intermediate from those.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import sympy

from symgrad.ad.forward_mode import Tangents
from symgrad.ad.ir import (
    Assignment,
    BackwardPlan,
    GuardedBlock,
    InputGradient,
    JvpPlan,
    Namer,
    OutputBackward,
    OutputGradients,
    closure,
    cse,
)
from symgrad.frontend.model import Input, Output, Spec


def plan_jvp(
    spec: Spec,
    intermediates: Sequence[Assignment],
    outputs: Sequence[Output],
    tangents: Tangents,
    namer: Namer,
) -> JvpPlan:
    """Schedule the jvp: recompute the forward values it reads, then one CSE pass."""
    given = list(tangents.statements)
    results = [t for t in tangents.outputs if t is not None]
    read = _free_symbols(a.expr for a in given) | _free_symbols(results)
    recomputed = [a for a in intermediates if a.target in closure(read, intermediates)]
    everything = recomputed + given
    temporaries, reduced = cse([a.expr for a in everything] + results, namer)
    statements = topological(
        temporaries + [Assignment(a.target, e) for a, e in zip(everything, reduced, strict=False)]
    )
    reduced_results = iter(reduced[len(everything) :])
    final = tuple(None if t is None else next(reduced_results) for t in tangents.outputs)
    # A tangent that an override replaces is not needed (symgrad.ad.forward_mode).
    needed = closure(_free_symbols(t for t in final if t is not None), statements)
    statements = [s for s in statements if s.target in needed]
    reads = _free_symbols(s.expr for s in statements) | _free_symbols(
        t for t in final if t is not None
    )
    candidates = [*(i.symbol for i in spec.tensor_inputs), *(o.symbol for o in outputs)]
    return JvpPlan(
        tangents=tangents.inputs,
        statements=tuple(statements),
        outputs=final,
        saved_tensors=tuple(s for s in candidates if s in reads),
        saved_numbers=tuple(i for i in spec.inputs if not i.is_tensor and i.symbol in reads),
    )


@dataclass
class _Use:
    """Who reads a statement's value, directly or through other statements."""

    # Indices of the outputs whose part reads it.
    outputs: set[int]
    # The inputs whose gradient reads it.
    inputs: set[Input]


def plan_backward(
    spec: Spec,
    intermediates: Sequence[Assignment],
    parts: Sequence[OutputGradients],
    namer: Namer,
    saved_values: Sequence[sympy.Symbol] = (),
    also_reads: Collection[sympy.Basic] = frozenset(),
) -> BackwardPlan:
    """Schedule the backward for `parts`, recomputing the `intermediates` it reads.

    `saved_values` are forward values it reads saved; `also_reads`, what else reads
    saved tensors (the statements recomputing saved values for double backward).
    """
    consumers = [
        (k, item, expr) for k, part in enumerate(parts) for item, expr in part.gradients.items()
    ]
    adjoints = [statement for part in parts for statement in part.statements]
    read = _free_symbols(expr for _, _, expr in consumers) | _free_symbols(a.expr for a in adjoints)
    recomputed = [a for a in intermediates if a.target in closure(read, intermediates)]
    given = recomputed + adjoints
    temporaries, reduced = cse([a.expr for a in given] + [e for _, _, e in consumers], namer)
    gradient_exprs = reduced[len(given) :]
    statements = schedule_late(
        topological(
            temporaries + [Assignment(a.target, e) for a, e in zip(given, reduced, strict=False)]
        ),
        gradient_exprs,
    )
    uses = _uses(
        statements, [(k, i, e) for (k, i, _), e in zip(consumers, gradient_exprs, strict=True)]
    )

    input_order = {item: n for n, item in enumerate(spec.inputs)}
    prelude = [s for s in statements if len(uses[s.target].outputs) > 1]
    outputs = []
    for k, part in enumerate(parts):
        local = [s for s in statements if uses[s.target].outputs == {k}]
        shared = [s for s in local if len(uses[s.target].inputs) > 1]
        gradients = tuple(
            InputGradient(
                item,
                tuple(s for s in local if uses[s.target].inputs == {item}),
                expr,
            )
            for (j, item, _), expr in zip(consumers, gradient_exprs, strict=True)
            if j == k
        )
        blocks = _group_by_inputs(shared, uses, input_order)
        outputs.append(OutputBackward(part.output, part.grad, blocks, gradients))

    reads = _free_symbols(s.expr for s in statements) | _free_symbols(gradient_exprs)
    reads |= set(also_reads)
    return BackwardPlan(
        prelude=_group_by_inputs(prelude, uses, input_order),
        outputs=tuple(outputs),
        saved_tensors=tuple(
            symbol
            for symbol in [
                *(i.symbol for i in spec.tensor_inputs),
                *(part.output.symbol for part in parts),
                *saved_values,
            ]
            if symbol in reads
        ),
        saved_numbers=tuple(i for i in spec.inputs if not i.is_tensor and i.symbol in reads),
        saved_shapes=tuple(
            i
            for i in spec.differentiable_inputs
            if i.symbol not in reads and any(i in part.gradients for part in parts)
        ),
    )


def _free_symbols(exprs: Iterable[sympy.Expr]) -> set[sympy.Basic]:
    symbols: set[sympy.Basic] = set()
    for expr in exprs:
        symbols |= expr.free_symbols
    return symbols


def topological(statements: Sequence[Assignment]) -> list[Assignment]:
    """Order statements so each comes after those it reads, otherwise keeping their order."""
    targets = {s.target for s in statements}
    done: set[sympy.Basic] = set()
    ordered: list[Assignment] = []
    pending = list(statements)
    while pending:
        waiting = []
        for statement in pending:
            if (statement.expr.free_symbols & targets) <= done:
                ordered.append(statement)
                done.add(statement.target)
            else:
                waiting.append(statement)
        if len(waiting) == len(pending):
            raise AssertionError("cyclic backward statements")
        pending = waiting
    return ordered


def schedule_late(
    statements: Sequence[Assignment], roots: Sequence[sympy.Expr]
) -> list[Assignment]:
    """`statements` (in dependency order) reordered so each comes just before its first reader.

    Depth-first from `roots` in order, so a value is computed only when the next root
    needs it and fewer temporaries are alive at once: a value the last step reads is not
    held while the longest is computed (peak memory). Iterative: formulas are deep.
    """
    by_target = {s.target: s for s in statements}
    position = {s.target: n for n, s in enumerate(statements)}
    # Statements under each value (shared ones counted per use): the larger side first,
    # as in Sethi-Ullman numbering, so its temporaries are gone before the smaller starts.
    size: dict[sympy.Basic, int] = {}
    for statement in statements:
        below = statement.expr.free_symbols & size.keys()
        size[statement.target] = 1 + sum(size[symbol] for symbol in below)

    def reads(expr: sympy.Basic) -> list[sympy.Basic]:
        found = expr.free_symbols & by_target.keys()
        return sorted(found, key=lambda symbol: (-size[symbol], position[symbol]))

    emitted: set[sympy.Basic] = set()
    ordered: list[Assignment] = []
    for root in roots:
        stack = [(symbol, False) for symbol in reversed(reads(root))]
        while stack:
            symbol, ready = stack.pop()
            if symbol in emitted:
                continue
            if ready:
                emitted.add(symbol)
                ordered.append(by_target[symbol])
                continue
            stack.append((symbol, True))
            stack += [(r, False) for r in reversed(reads(by_target[symbol].expr))]
    return ordered + [s for s in statements if s.target not in emitted]


def _uses(
    statements: Sequence[Assignment],
    consumers: Sequence[tuple[int, Input, sympy.Expr]],
) -> dict[sympy.Basic, _Use]:
    """For each statement, the outputs and inputs whose gradients read it."""
    uses = {s.target: _Use(set(), set()) for s in statements}
    for output, item, expr in consumers:
        for symbol in expr.free_symbols & uses.keys():
            uses[symbol].outputs.add(output)
            uses[symbol].inputs.add(item)
    for statement in reversed(statements):
        reader = uses[statement.target]
        for symbol in statement.expr.free_symbols & uses.keys():
            uses[symbol].outputs |= reader.outputs
            uses[symbol].inputs |= reader.inputs
    return uses


def _group_by_inputs(
    statements: Sequence[Assignment],
    uses: Mapping[sympy.Basic, _Use],
    input_order: Mapping[Input, int],
) -> tuple[GuardedBlock, ...]:
    """Group statements into blocks with one guard each, keeping dependencies in order.

    A statement's users include the users of everything that reads it, so sorting by
    decreasing number of users (stably) never moves a statement after its readers.
    """

    def guard(statement: Assignment) -> tuple[Input, ...]:
        return tuple(sorted(uses[statement.target].inputs, key=input_order.__getitem__))

    ordered = sorted(statements, key=lambda s: -len(uses[s.target].inputs))
    return tuple(
        GuardedBlock(inputs, tuple(group))
        for inputs, group in itertools.groupby(ordered, key=guard)
    )
