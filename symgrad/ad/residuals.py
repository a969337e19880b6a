"""Reduced-shape forward values the backward reads, returned as extra outputs to save.

See Note [Residuals] below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import sympy

from symgrad.ad import costs, saving
from symgrad.ad.ir import Assignment, OutputGradients, closure
from symgrad.frontend.model import Output, Spec
from symgrad.language import arg_extrema, reductions
from symgrad.language.indexing import positional_values


def _small_values(
    intermediates: Sequence[Assignment], tensors: set[sympy.Symbol]
) -> set[sympy.Basic]:
    """Intermediates in a reduced shape: reductions, and values computed only from them.

    See Note [Residuals].
    """
    small: set[sympy.Basic] = set()
    for assignment in intermediates:
        read = assignment.expr.free_symbols & tensors
        if isinstance(assignment.expr, reductions.Reduction) or (read and read <= small):
            small.add(assignment.target)
    return small


def find_residuals(
    spec: Spec,
    intermediates: Sequence[Assignment],
    parts: Sequence[OutputGradients],
    tensors: set[sympy.Symbol],
    differentiate: Callable[[Output], OutputGradients],
) -> dict[sympy.Basic, OutputGradients]:
    """The reduced-shape values the backward reads, each made an extra output.

    Note [Residuals]: recomputing a reduction in the backward costs another pass over
    its argument, while its value is small, so the forward returns it as an extra
    output that the backward saves, like torch's own layer norm saves its mean and
    rstd. It stays a differentiable output (not marked non-differentiable): in double
    backward, autograd then sends the gradient that reaches it back through this
    Function, so the backward's use of it is differentiated exactly. Its own backward
    part may read further residuals, hence the loop. The public function drops them.

    A full-size value is a residual too where saving it spares the backward more input
    elements than it holds (`_values_sparing_inputs`): `d = x - target` read by the
    backward is one tensor to save where x and target are two. Not in fused mode: there
    the forward would write it out and the backward read it back, where recomputing it
    from inputs the backward reads anyway costs a subtraction in registers.
    """
    small = _small_values(intermediates, tensors)
    if spec.mode != "fused":
        small |= _values_sparing_inputs(spec, intermediates, parts, tensors, small)
    # A value of index inputs only (an int64 count of valid rows) is recomputed: returned,
    # it would be an int output, which gradcheck's forward AD trips on.
    small -= positional_values((a.target, a.expr) for a in intermediates)
    location = spec.outputs[0].location
    found: dict[sympy.Basic, OutputGradients] = {}
    pending = list(parts)
    while pending:
        read = _free_symbols_of(pending)
        pending = []
        for assignment in reversed(intermediates):
            target = assignment.target
            if target not in read:
                continue
            if target in small:
                if target not in found:
                    # Positions carry no gradient (Note [Arg extrema]).
                    differentiable = not arg_extrema.is_index(assignment.expr)
                    residual = Output(
                        target.name, target, assignment.expr, location, differentiable
                    )
                    found[target] = differentiate(residual)
                    pending.append(found[target])
            else:
                read |= assignment.expr.free_symbols
    return {a.target: found[a.target] for a in intermediates if a.target in found}


def _values_sparing_inputs(
    spec: Spec,
    intermediates: Sequence[Assignment],
    parts: Sequence[OutputGradients],
    tensors: set[sympy.Symbol],
    small: set[sympy.Basic],
) -> set[sympy.Basic]:
    """Values affine in their tensor inputs that, saved, spare the backward more elements.

    Latest first, a value is taken when the elements the backward then saves (inputs
    still read, plus the values taken) are fewer than before, or as many in fewer tensors
    (reduced values counted too). Affine with constant coefficients, the value's own
    backward part reads no tensor, so the count holds. A sum or mean of an affine value
    counts as a number here (layer norm's `xc = x - mean(x)`: saved, it spares x and the
    per-row mean, as eager autograd saves xc), its derivative being constant too.
    """
    definitions = {a.target: a.expr for a in intermediates}
    weigh = saving.Weights(spec, definitions)
    inputs = {i.symbol for i in spec.tensor_inputs}
    numbers = {i.symbol for i in spec.inputs if not i.is_tensor}
    numbers |= {s for s in small if _is_linear_reduction(definitions[s], inputs, numbers)}
    reads = _free_symbols_of(parts)

    def saved_elements(taken: set[sympy.Basic]) -> tuple[float, int]:
        """Elements and tensors saved when the backward reads `taken`, recomputes the rest."""
        kept = [a for a in intermediates if a.target not in taken]
        read = reads.union(*(definitions[t].free_symbols for t in closure(reads, kept)))
        saved = (read & (inputs | small)) | taken
        return sum(weigh(s) for s in saved), len(saved)

    reached = closure(reads, intermediates)
    taken: set[sympy.Basic] = set()
    for assignment in reversed(intermediates):
        target = assignment.target
        if (
            target in reached
            and target in tensors
            and _is_affine(assignment.expr, inputs, numbers)
            and saved_elements(taken | {target}) < saved_elements(taken)
        ):
            taken.add(target)
    return taken


def _is_linear_reduction(
    expr: sympy.Basic, inputs: set[sympy.Symbol], numbers: set[sympy.Symbol]
) -> bool:
    """Whether `expr` is a sum or mean of a value affine in the inputs (`mean(x, -1)`)."""
    return (
        isinstance(expr, reductions.Reduction)
        and expr.name in ("sum", "mean")
        and _is_affine(expr.argument, inputs, numbers)
    )


def _is_affine(expr: sympy.Expr, inputs: set[sympy.Symbol], numbers: set[sympy.Symbol]) -> bool:
    """Whether `expr` is sums and products of inputs and numbers, affine in the tensor ones
    with constant slopes (`x - 2 * target + c`)."""
    read = expr.free_symbols & inputs
    return (
        bool(read)
        and expr.free_symbols <= inputs | numbers
        and all(isinstance(node, _ARITHMETIC) for node in sympy.preorder_traversal(expr))
        and all(sympy.diff(expr, symbol).is_Number for symbol in read)
    )


_ARITHMETIC = (sympy.Add, sympy.Mul, sympy.Symbol, sympy.Number, sympy.NumberSymbol)


def _free_symbols_of(parts: Sequence[OutputGradients]) -> set[sympy.Basic]:
    """The values the parts read; a shape fact reads shapes only, not its argument's value."""
    read: set[sympy.Basic] = set()
    for part in parts:
        for expr in [*part.gradients.values(), *(s.expr for s in part.statements)]:
            facts = expr.atoms(reductions.ShapeFact)
            values = expr.xreplace({fact: sympy.Integer(1) for fact in facts}) if facts else expr
            read |= values.free_symbols
    return read


def outputs_or_their_definitions(
    spec: Spec,
    parts: Sequence[OutputGradients],
    intermediates: Sequence[Assignment],
    by_target: Mapping[sympy.Basic, Assignment],
    tensors: set[sympy.Symbol],
) -> list[OutputGradients]:
    """`parts`, reading an output through its definition where that saves a tensor cheaply.

    Note [Outputs the backward reads]: a derivative written in terms of an output (`y` for
    `xc * rstd`) makes the backward save y. Where the backward reads what y is made from
    anyway (layer norm: x, and the per-row mean and rstd), y is one full-size tensor more
    than needed, and more than eager autograd saves (xc alone). When the inputs and
    outputs saved already exceed eager's saved elements (so no forward value is saved
    instead, Note [Saved values] in symgrad.ad.saving), an output is read through its
    definition if that reads nothing the backward did not read already, costs at most
    `saving.MIN_SAVED_COST` (two multiplications) and saves fewer elements: a cheap pass
    more, a full-size tensor less. `sigmoid(x)`'s derivative still reads y (reading it
    spares x), and so does a softmax's (its recomputation would cost more).
    """
    weigh = saving.Weights(spec, {a.target: a.expr for a in by_target.values()})
    small = _small_values(intermediates, tensors)
    kept = [a for a in intermediates if a.target not in small]
    recomputable = {a.target for a in kept}

    def saved_elements(candidate: Sequence[OutputGradients]) -> float:
        """Elements of the inputs, outputs and reduced values the backward would save."""
        reads = _free_symbols_of(candidate)
        reads |= set().union(*(by_target[t].expr.free_symbols for t in closure(reads, kept)))
        return sum(weigh(s) for s in reads - recomputable)

    def reached(candidate: Sequence[OutputGradients]) -> set[sympy.Basic]:
        """Every value the backward reads or recomputes, and what those read."""
        reads = _free_symbols_of(candidate)
        found = closure(reads, intermediates)
        return reads | found | set().union(*(by_target[t].expr.free_symbols for t in found))

    if saved_elements(parts) <= saving.eager_saved_elements(spec):
        return list(parts)
    table = costs.table()
    for output in spec.outputs:
        definition = by_target[output.symbol].expr
        if output.symbol not in _free_symbols_of(parts):
            continue
        candidate = _reading_through(parts, {output.symbol: definition})
        if (
            table.expression(definition) <= saving.MIN_SAVED_COST
            and reached(candidate) <= reached(parts)
            and saved_elements(candidate) < saved_elements(parts)
        ):
            parts = candidate
    return list(parts)


def _reading_through(
    parts: Sequence[OutputGradients], definitions: Mapping[sympy.Basic, sympy.Expr]
) -> list[OutputGradients]:
    """`parts` with the given outputs replaced by their definitions."""
    return [
        dataclasses.replace(
            part,
            gradients={i: e.xreplace(definitions) for i, e in part.gradients.items()},
            statements=tuple(
                Assignment(s.target, s.expr.xreplace(definitions)) for s in part.statements
            ),
        )
        for part in parts
    ]
