"""Differentiate a spec: reverse mode over the forward's DAG, then plan the backward.

The forward is a list of assignments (the `where` intermediates, common subexpressions
and outputs). For each output, one reverse sweep seeded with that output's incoming
gradient walks this DAG from the end: inside each assignment it propagates adjoints
through the expression tree with local derivative rules, and between assignments it
hands the accumulated adjoint of an intermediate to the assignment that defines it.
Each sweep costs a constant factor of the forward, so the backward stays proportional
to the forward however large the formula is; no unbounded `sympy.simplify` is run.

After the sweep, every subexpression equal to a value of the forward is replaced by
that value's name, so the backward reads saved outputs and recomputes named values
instead of rebuilding them (symgrad.ad.reuse).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

import sympy

from symgrad.ad import (
    cheapen,
    forward_mode,
    fuse,
    gradient_parts,
    guards,
    inplace,
    layer_norm_idioms,
    masks,
    reuse,
    saving,
    stable,
)
from symgrad.ad.ir import (
    Assignment,
    BackwardPlan,
    Derived,
    JvpPlan,
    Namer,
    OutputGradients,
    closure,
    cse,
    integral_floats,
)
from symgrad.ad.residuals import find_residuals, outputs_or_their_definitions
from symgrad.ad.reverse import ReverseSweep, Term, fit
from symgrad.ad.schedule import plan_backward, plan_jvp
from symgrad.frontend.model import INCOMING_GRAD, Input, Output, Spec
from symgrad.language import (
    broadcasts,
    contractions,
    functions,
    indexing,
    piecewise,
    pullbacks,
    reductions,
    scans,
    segments,
    views,
)


def derive(spec: Spec) -> Derived:
    """Differentiate `spec` and schedule its backward."""
    namer = Namer(_declared_names(spec))
    forward = _forward_assignments(spec, namer)
    outputs = {o.symbol for o in spec.outputs}
    intermediates = [a for a in forward if a.target not in outputs]
    active = _active_symbols(spec, intermediates)
    known_values = reuse.known_values(spec, forward)
    tensors = _tensor_values(spec, intermediates)

    def guard(expr: sympy.Expr) -> sympy.Expr:
        """See Note [Untaken branches] in symgrad.ad.guards."""
        return guards.guard_branches(expr, tensors)

    guarded = [Assignment(a.target, guard(a.expr)) for a in intermediates]
    by_target = {a.target: a for a in forward}

    definitions = {a.target: a.expr for a in forward}

    def reuse_values(expr: sympy.Expr) -> sympy.Expr:
        """A derivative reading forward values, its mirrored differences (log_sigmoid(x) -
        log_sigmoid(-x), which cancel near 0) written exactly first (symgrad.ad.stable)."""
        mirrored = stable.cancel_mirrored(expr, definitions)
        return reuse.reuse_forward_values(mirrored, known_values)

    shapes = reductions.Shapes(definitions, {i.symbol for i in spec.tensor_inputs})

    def differentiate(output: Output) -> OutputGradients:
        """One output's reverse sweep: its contribution to each input's gradient."""
        base = "residual" if output.symbol in namer.made else output.name
        grad = sympy.Symbol(namer.fresh(f"grad_{base}"), real=True)
        sweep = ReverseSweep(active if output.differentiable else set(), namer, shapes)
        sweep.run(output.symbol, guard(by_target[output.symbol].expr), grad, guarded)
        adjoints = {i: sweep.adjoint(i.symbol) for i in spec.differentiable_inputs}
        for item in spec.differentiable_inputs:
            override = spec.override(output, item)
            if override is not None and override.reads_grad:  # the gradient itself
                summed = fit(Term(grad, output.symbol, True), item.symbol, shapes, exact=False)
                given = override.expr.xreplace({INCOMING_GRAD: summed.expr})
                adjoints[item] = Term(guard(given), item.symbol, True)
            elif override is not None:  # the user's d output / d input replaces ours
                adjoints[item] = Term(grad * guard(override.expr), output.symbol, True)
        terms = {
            i: Term(
                _simplify_bounded(cheapen.merge_branches(reuse_values(term.expr))),
                term.frame,
                term.full,
            )
            for i, term in adjoints.items()
            if term is not None and term.expr != 0
        }
        # Reusing forward values can cancel a gradient (w1 - w0 with w1 = w0).
        terms = {i: term for i, term in terms.items() if term.expr != 0}
        frames[output.symbol] = terms
        gradients = {i: term.expr for i, term in terms.items()}
        read = set().union(*(g.free_symbols for g in gradients.values()))
        statements = tuple(
            Assignment(
                s.target,
                integral_floats(cheapen.merge_branches(reuse_values(s.expr))),
            )
            for s in sweep.statements
            if s.target in closure(read, sweep.statements)
        )
        return OutputGradients(output, grad, gradients, statements)

    frames: dict[sympy.Basic, dict[Input, Term]] = {}
    parts = gradient_parts.zero_cancelled_inputs(
        spec, [differentiate(output) for output in spec.outputs], frames
    )
    residuals = find_residuals(spec, intermediates, parts, tensors, differentiate)
    parts += residuals.values()
    if spec.save == "balanced" and spec.mode != "fused":  # Note [Outputs the backward reads]
        parts = outputs_or_their_definitions(spec, parts, intermediates, by_target, tensors)
    declared = {i.symbol for i in spec.intermediates}
    temporaries = {a.target: a.expr for a in intermediates if a.target not in declared}
    partials = _partials(parts[: len(spec.outputs)], temporaries)
    parts = gradient_parts.fit_to_inputs(parts, frames, shapes)
    function_outputs = [*spec.outputs, *(part.output for part in residuals.values())]
    named_calls = {
        a.target
        for a in intermediates
        if a.target not in declared and isinstance(a.expr, functions.ElementwiseFunction)
    }
    tangents = forward_mode.derive_tangents(
        spec, forward, function_outputs, guard, reuse_values, namer, named_calls
    )
    parts, tangents, shape_facts = gradient_parts.name_shape_facts(
        parts, tangents, forward, spec, namer
    )
    mask_statements: tuple[Assignment, ...] = ()
    if spec.save == "memory":  # Note [Save choices] in symgrad.ad.saving
        parts = saving.recompute_outputs(spec, parts, by_target)
        values = {*by_target, *(i.symbol for i in spec.inputs)}
        if spec.mode != "fused":  # Note [Saved masks] in symgrad.ad.masks
            again = {a.target: a.expr for a in intermediates if a.target not in residuals}
            again |= {o.symbol: by_target[o.symbol].expr for o in spec.outputs}
            parts, mask_statements = masks.name_masks(parts, again, values, tensors, namer)
        forward = (*forward, *mask_statements)
        by_target |= {a.target: a for a in mask_statements}
    recomputed = [a for a in intermediates if a.target not in residuals]
    jvp = plan_jvp(spec, recomputed, function_outputs, tangents, namer)
    plan = plan_backward(spec, recomputed, parts, namer)
    # A fused backward recomputes forward values in registers: saving them would only
    # add memory traffic (Note [Saved values] in symgrad.ad.saving).
    saved = (
        saving.saved_values(spec, forward, recomputed, plan, tensors)
        if spec.mode != "fused" and spec.save != "memory"
        else tuple(a.target for a in mask_statements)
    )
    # A mask carries no graph: double backward need not recompute it (Note [Saved masks]).
    unmasked = set(saved) - {a.target for a in mask_statements}
    recompute = saving.recompute_statements(unmasked, recomputed)
    if saved:
        kept = [a for a in recomputed if a.target not in saved]
        reads = set().union(*(a.expr.free_symbols for a in recompute))
        plan = plan_backward(spec, kept, parts, namer, saved, reads)
        jvp = dataclasses.replace(jvp, outputs=jvp.outputs + (None,) * len(saved))
    numbers = {*plan.saved_numbers, *jvp.saved_numbers}
    derived = Derived(
        spec=spec,
        forward=forward,
        saved_tensors=plan.saved_tensors,
        saved_numbers=tuple(i for i in spec.inputs if i in numbers),
        saved_shapes=plan.saved_shapes,
        prelude=plan.prelude,
        backward=plan.outputs,
        partials=partials,
        tensor_symbols=frozenset(_tensor_symbols(spec, forward, plan, jvp)),
        jvp=jvp,
        names=frozenset(namer.taken),
        temporaries=frozenset(namer.made),
        residuals=tuple(part.output for part in residuals.values()),
        saved_values=tuple(
            Output(v.name, v, by_target[v].expr, spec.outputs[0].location, False) for v in saved
        ),
        recompute=recompute,
        shape_facts=shape_facts,
    )
    if spec.inplace is None:
        return derived
    return dataclasses.replace(derived, inplace=inplace.derive_inplace(derived))


def _active_symbols(spec: Spec, intermediates: Sequence[Assignment]) -> set[sympy.Basic]:
    """Differentiable inputs and the intermediates computed from them."""
    active: set[sympy.Basic] = {i.symbol for i in spec.differentiable_inputs}
    for assignment in intermediates:
        if assignment.expr.free_symbols & active:
            active.add(assignment.target)
    return active


def _tensor_values(spec: Spec, intermediates: Sequence[Assignment]) -> set[sympy.Symbol]:
    """Tensor inputs and the intermediates computed from them."""
    tensors: set[sympy.Symbol] = {i.symbol for i in spec.tensor_inputs}
    for assignment in intermediates:
        if assignment.expr.free_symbols & tensors:
            tensors.add(assignment.target)
    return tensors


def _declared_names(spec: Spec) -> list[str]:
    return [
        spec.name,
        spec.module,
        "ctx",
        "torch",
        "math",
        *(i.name for i in spec.inputs),
        *(i.name for i in spec.intermediates),
        *(o.name for o in spec.outputs),
    ]


def _rewrite(expr: sympy.Expr) -> sympy.Expr:
    """The (stabilized) formula in torch's fused activations and cheaper identities."""
    return cheapen.cheapen(fuse.fuse_activations(expr))


def _forward_assignments(spec: Spec, namer: Namer) -> tuple[Assignment, ...]:
    """The forward's statements, with subexpressions repeated across them named once."""
    statements = [Assignment(i.symbol, i.expr) for i in spec.intermediates]
    statements += [Assignment(o.symbol, o.expr) for o in spec.outputs]
    outputs = {o.symbol for o in spec.outputs}
    numbers = {i.symbol for i in spec.inputs if not i.is_tensor}
    statements = layer_norm_idioms.recognise_statements(statements, outputs, numbers)
    # In torch's stable primitives, matched across `where` names (symgrad.ad.stable).
    statements = stable.stabilize_statements(statements, outputs)
    tensors = _tensor_values(spec, statements)
    statements = [
        Assignment(s.target, _rewrite(broadcasts.drop_number_witnesses(s.expr, tensors)))
        for s in statements
    ]
    statements = _name_shared_values(statements, namer, {o.symbol for o in spec.outputs})
    temporaries, reduced = cse([s.expr for s in statements], namer)
    pending = list(temporaries)
    forward: list[Assignment] = []
    for statement, expr in zip(statements, reduced, strict=True):
        used = expr.free_symbols
        # Emit each temporary just before the first statement that needs it.
        needed = closure(used, pending)
        forward += [a for a in pending if a.target in needed]
        pending = [a for a in pending if a.target not in needed]
        forward.append(Assignment(statement.target, expr))
    return tuple(forward)


def _name_shared_values(
    statements: Sequence[Assignment], namer: Namer, outputs: Collection[sympy.Basic]
) -> list[Assignment]:
    """Give every reduction and call inside a larger expression its own statement (`mean0 = ...`).

    The backward then reads them by name, and a named value is one it can save instead
    of recomputing (Note [Residuals] in symgrad.ad.residuals, Note [Saved values] in
    symgrad.ad.saving). Equal ones share a name. Calls inside a `where` stay: its guards
    rewrite the branches.
    """
    names: dict[sympy.Basic, sympy.Symbol] = {}
    hoisted: list[Assignment] = []

    def visit(node: sympy.Basic, is_root: bool, in_branch: bool = False) -> sympy.Basic:
        if not node.args:
            return node
        in_branch = in_branch or isinstance(node, piecewise.Where)
        args = [visit(arg, False, in_branch) for arg in node.args]
        node = node.func(*args) if args != list(node.args) else node
        is_named = isinstance(node, (reductions.Reduction, reductions.Normalization)) or (
            isinstance(node, functions.ElementwiseFunction) and not in_branch and node.free_symbols
        )
        if is_named and not is_root:
            if node not in names:
                base = getattr(node, "name", type(node).__name__)
                names[node] = sympy.Symbol(namer.fresh(f"{base}{len(names)}"), real=True)
                hoisted.append(Assignment(names[node], node))
            return names[node]
        return node

    for statement in statements:
        expr = visit(statement.expr, True)
        if isinstance(expr, reductions.Reduction) and statement.target not in outputs:
            # Not an output's name: the reverse sweep of one output does not pass
            # through another output, so a value shared with an output is named apart.
            names.setdefault(expr, statement.target)
        hoisted.append(Assignment(statement.target, expr))
    return hoisted


# Gradients larger than this (in sympy operations) skip the optional simplification.
_SIMPLIFY_MAX_OPS = 400


def _simplify_bounded(expr: sympy.Expr) -> sympy.Expr:
    """Pull out common factors when that makes the expression smaller; never unbounded."""
    expr = integral_floats(expr)
    size = sympy.count_ops(expr)
    if size > _SIMPLIFY_MAX_OPS:
        return expr
    candidate = integral_floats(sympy.factor_terms(expr))
    return candidate if sympy.count_ops(candidate) < size else expr


def _tensor_symbols(
    spec: Spec, forward: Sequence[Assignment], plan: BackwardPlan, jvp: JvpPlan
) -> set[sympy.Basic]:
    """Symbols holding tensors: tensor inputs, gradients, tangents and values computed from them."""
    tensors: set[sympy.Basic] = {i.symbol for i in spec.tensor_inputs}
    tensors |= {part.grad for part in plan.outputs}
    tensors |= {t for t in jvp.tangents if t is not None}
    # The spec's `where` names too: one the stable rewrites made unread is still printed
    # (symgrad.ad.stable, Note [Patterns across where names]).
    statements = [Assignment(i.symbol, i.expr) for i in spec.intermediates] + list(forward)
    for block in plan.prelude:
        statements += block.statements
    for part in plan.outputs:
        for block in part.shared:
            statements += block.statements
        for gradient in part.gradients:
            statements += gradient.statements
    statements += jvp.statements
    for statement in statements:
        if statement.expr.free_symbols & tensors:
            tensors.add(statement.target)
    return tensors


# Nodes whose presence makes a gradient a vector-Jacobian product, not a partial.
_NOT_ELEMENTWISE = (
    reductions.Reduction,
    reductions.Normalization,
    reductions.SumTo,
    reductions.Unsqueeze,
    indexing.Gather,
    indexing.ScatterAdd,
    views.View,
    views.Cat,
    views.ReshapeTo,
    views.CatPiece,
    scans.AlongDim,
    contractions.Einsum,
    segments.SegmentSum,
    segments.IndexSelect,
    segments.IndexAdd,
)

# Docstring derivatives whose expansion grows past this many operations are not shown.
_DOCSTRING_MAX_OPS = 200


def _partials(
    parts: Sequence[OutputGradients], temporaries: Mapping[sympy.Basic, sympy.Expr]
) -> dict[tuple[str, str], sympy.Expr | None]:
    """d output / d input with symgrad's temporaries expanded, for the docstring.

    Where the derivative is not elementwise (it passes through a reduction), it is
    the vector-Jacobian product instead, in terms of the output's incoming gradient.
    None where the expanded formula would be too long to be worth reading.
    """
    partials: dict[tuple[str, str], sympy.Expr | None] = {}
    for part in parts:
        names = {**temporaries, **{s.target: s.expr for s in part.statements}}
        for item, expr in part.gradients.items():
            partial: sympy.Expr | None = pullbacks.expand_pullbacks(expr)
            while partial is not None and partial.free_symbols & names.keys():
                partial = partial.xreplace(names)
                if sympy.count_ops(partial) > _DOCSTRING_MAX_OPS:
                    partial = None
            if partial is not None and partial.has(broadcasts.ZerosLike):
                partial = sympy.Integer(0)  # an input whose terms cancelled
            if partial is not None and not partial.has(*_NOT_ELEMENTWISE):
                partial = partial.xreplace({part.grad: sympy.Integer(1)})
            partials[(part.output.name, item.name)] = partial
    return partials
