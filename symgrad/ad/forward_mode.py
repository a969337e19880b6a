"""Forward-mode differentiation: the directional derivative (jvp) of every output.

One forward sweep over the forward's assignments: the tangent of each value is the sum
over its arguments of the local partial derivative times the argument's tangent, with
the same local rules as the reverse sweep (symgrad.ad.derive) and one more per reduction
(a reduction is linear, so the tangent of sum(e) is sum(tangent(e))). Each value's
tangent gets its own statement, so the jvp is straight-line code as long as the forward.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import sympy

from symgrad.ad.ir import Assignment, Namer
from symgrad.frontend.model import Output, Spec
from symgrad.language import (
    arg_extrema,
    contractions,
    extrema,
    functions,
    indexing,
    layer_norms,
    piecewise,
    reductions,
    rules,
    scans,
    segment_extrema,
    segments,
    views,
)
from symgrad.language.indexing import of_positions_only, positional_values
from symgrad.language.piecewise import is_condition

Rewrite = Callable[[sympy.Expr], sympy.Expr]


@dataclass(frozen=True)
class Tangents:
    """The jvp: statements computing tangents, and each output's tangent by output."""

    # One tangent symbol per differentiable input, in input order (None for the rest).
    inputs: tuple[sympy.Symbol | None, ...]
    statements: tuple[Assignment, ...]
    outputs: tuple[sympy.Expr | None, ...]


def derive_tangents(
    spec: Spec,
    forward: Sequence[Assignment],
    outputs: Sequence[Output],
    guard: Rewrite,
    reuse: Rewrite,
    namer: Namer,
    inline: Collection[sympy.Basic] = (),
) -> Tangents:
    """Tangents of `outputs` (the spec's and the residuals) given the input tangents.

    The tangents of the values in `inline` (calls the forward names only so that the
    backward can save them) stay inside their users' tangents, so that `c * exp(x)`
    still reads as the output `y` in `y * tangent_x`.
    """
    if any(o.reads_grad for o in spec.overrides):  # Note [Overrides that read grad]
        return Tangents((None,) * len(spec.inputs), (), (None,) * len(outputs))
    tangent_of: dict[sympy.Basic, sympy.Expr] = {}
    inputs: list[sympy.Symbol | None] = []
    for item in spec.inputs:
        symbol = None
        if item.differentiable:
            symbol = sympy.Symbol(namer.fresh(f"tangent_{item.name}"), real=True)
            tangent_of[item.symbol] = symbol
        inputs.append(symbol)
    # An input's tangent, where given, has the input's shape (forward AD requires it).
    shapes = reductions.Shapes(
        {a.target: a.expr for a in forward},
        {i.symbol for i in spec.tensor_inputs},
        aliases={t: i for i, t in tangent_of.items()},
    )
    statements: list[Assignment] = []
    for assignment in forward:
        tangent = reuse(_tangent(guard(assignment.expr), tangent_of, shapes))
        if tangent == 0:
            continue
        if tangent.is_Symbol or assignment.target in inline:
            tangent_of[assignment.target] = tangent
            continue
        symbol = sympy.Symbol(namer.fresh(f"tangent_{assignment.target.name}"), real=True)
        statements.append(Assignment(symbol, tangent))
        tangent_of[assignment.target] = symbol
    positional = positional_values((a.target, a.expr) for a in forward)
    results: list[sympy.Expr | None] = []
    for output in outputs:
        if not output.differentiable or of_positions_only(output.expr, positional):
            results.append(None)
            continue
        overridden = [o for o in spec.overrides if o.output == output]
        if overridden:
            results.append(_overridden_tangent(spec, output, tangent_of, guard, reuse, shapes))
        else:
            results.append(tangent_of.get(output.symbol, sympy.Integer(0)))
    return Tangents(tuple(inputs), tuple(statements), tuple(results))


def _overridden_tangent(
    spec: Spec,
    output: Output,
    tangent_of: Mapping[sympy.Basic, sympy.Expr],
    guard: Rewrite,
    reuse: Rewrite,
    shapes: reductions.Shapes,
) -> sympy.Expr:
    """The tangent along the user's derivatives (`gradients:`), as the backward uses them.

    The output's formula is differentiated inline with the overridden inputs held fixed,
    then each override times its input's tangent is added.
    """
    values = {i.symbol: i.expr for i in spec.intermediates}
    expr = output.expr
    while expr.free_symbols & values.keys():
        expr = expr.xreplace(values)
    held = {o.input.symbol for o in spec.overrides if o.output == output}
    inputs = {i.symbol for i in spec.inputs}
    free = {s: t for s, t in tangent_of.items() if s in inputs and s not in held}
    tangent = _tangent(guard(expr), free, shapes)
    for override in spec.overrides:
        if override.output == output and override.input.symbol in tangent_of:
            tangent += guard(override.expr) * tangent_of[override.input.symbol]
    return reuse(tangent)


def _tangent(
    expr: sympy.Expr, tangent_of: Mapping[sympy.Basic, sympy.Expr], shapes: reductions.Shapes
) -> sympy.Expr:
    """d expr along the tangents of its symbols (zero for symbols without one)."""
    memo: dict[sympy.Basic, sympy.Expr] = {}

    def in_own_shape(tangent: sympy.Expr, value: sympy.Expr) -> sympy.Expr:
        """`tangent` expanded to the shape of `value`, before a reduction reads it.

        A tangent can be smaller than its value (the tangent of x + c with c constant
        has x's shape; a missing input tangent is a 0-d zero, so of a sum of terms only
        some may be there), and a reduction must see each element it reduces. A tangent
        whose every term already has the value's shape is left alone.
        """
        shape = shapes.of(value)
        if tangent == 0 or all(shapes.of(term) == shape for term in sympy.Add.make_args(tangent)):
            return tangent
        fact = reductions.ShapeOf(value)
        return reductions.SumTo(tangent, fact, fact)

    def visit(node: sympy.Basic) -> sympy.Expr:
        if node in memo:
            return memo[node]
        result: sympy.Expr
        if node.is_Symbol:
            result = tangent_of.get(node, sympy.Integer(0))
        elif is_condition(node) or not node.free_symbols & tangent_of.keys():
            result = sympy.Integer(0)  # a boolean, or a value without tangents
        elif isinstance(node, arg_extrema.ArgExtremum):
            result = sympy.Integer(0)  # positions (Note [Arg extrema])
        elif isinstance(node, piecewise.Kink) and node.partial(0) is None:
            result = visit(node.expanded())  # routes tangents; values stay the kink's
        elif isinstance(node, piecewise.Where):
            cond, a, b = node.args
            result = piecewise.where(cond, visit(a), visit(b))
        elif isinstance(node, layer_norms.NODES):  # Note [Layer norm]
            result = node.tangent(in_own_shape(visit(node.argument), node.argument))
        elif isinstance(node, reductions.Reduction):
            result = _reduction_tangent(node, in_own_shape(visit(node.argument), node.argument))
        elif isinstance(node, indexing.Gather):
            tangent = in_own_shape(visit(node.argument), node.argument)
            result = indexing.gather_tangent(node, tangent)
        elif isinstance(node, views.View):
            result = views.view_tangent(node, in_own_shape(visit(node.argument), node.argument))
        elif isinstance(node, views.Cat):
            tangents = [in_own_shape(visit(p), p) for p in node.pieces]
            result = views.cat_tangent(node, tangents, reductions.ShapeOf)
        elif isinstance(node, scans.AlongDim):
            result = scans.tangent(node, in_own_shape(visit(node.argument), node.argument))
        elif isinstance(node, contractions.Einsum):
            tangents = [in_own_shape(visit(arg), arg) for arg in node.operands]
            result = contractions.einsum_tangent(node, tangents)
        elif isinstance(node, segment_extrema.SegmentAmax):
            tangent = in_own_shape(visit(node.source), node.source)
            result = segment_extrema.tangent(node, tangent)
        elif isinstance(node, segments.SegmentSum):
            tangent = in_own_shape(visit(node.source), node.source)
            result = segments.segment_sum_tangent(node, tangent)
        elif isinstance(node, segments.IndexSelect):
            tangent = in_own_shape(visit(node.argument), node.argument)
            result = segments.index_select_tangent(node, tangent)
        elif isinstance(node, reductions.Normalization):
            tangent = in_own_shape(visit(node.argument), node.argument)
            result = _normalization_tangent(node, tangent)
        else:
            result = sympy.Add(
                *(
                    rules.local_partial(node, i) * visit(arg)
                    for i, arg in enumerate(node.args)
                    if arg.free_symbols & tangent_of.keys()
                )
            )
        memo[node] = result
        return result

    return visit(expr)


def _reduction_tangent(node: reductions.Reduction, tangent: sympy.Expr) -> sympy.Expr:
    """sum and mean are linear; logsumexp's tangent is the softmax-weighted sum; amax's
    and amin's the mean over their ties."""
    if tangent == 0:
        return sympy.Integer(0)
    if isinstance(node, reductions.ReduceExtremum):  # Note [Ties of amax and amin]
        return extrema.tangent(node, tangent)
    if isinstance(node, reductions.ReduceLogSumExp):
        weight = functions.call("exp", node.argument - reductions.broadcast_back(node, node))
        return reductions.reduce("sum", weight * tangent, node.dims, node.keepdim)
    return reductions.reduce(node.name, tangent, node.dims, node.keepdim)


def _normalization_tangent(node: reductions.Normalization, tangent: sympy.Expr) -> sympy.Expr:
    """softmax: y (t - sum(y t)); log_softmax: t - sum(exp(y) t), sums along the dim."""
    if tangent == 0:  # a softmax of values without tangents (where(x > 0, k, k))
        return sympy.Integer(0)
    dim = (node.dim,)
    if isinstance(node, reductions.Softmax):
        return node * (tangent - reductions.reduce("sum", node * tangent, dim, keepdim=True))
    weight = functions.call("exp", node)
    return tangent - reductions.reduce("sum", weight * tangent, dim, keepdim=True)
