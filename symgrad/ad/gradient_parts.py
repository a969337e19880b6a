"""Passes over each output's gradient part: zeros, terms summed to shape, facts named.

Run by symgrad.ad.derive after the reverse sweeps: an input whose terms all cancelled gets
zeros, terms are summed to their input's shape where parts disagree, and the shape facts
(a mean's divisor, a reduced shape) are named once for the backward and the jvp.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import sympy

from symgrad.ad import forward_mode
from symgrad.ad.ir import Assignment, Namer, OutputGradients
from symgrad.ad.reverse import Term, fit
from symgrad.frontend.model import Input, Spec
from symgrad.language import broadcasts, reductions


def zero_cancelled_inputs(
    spec: Spec, parts: list[OutputGradients], frames: dict[sympy.Basic, dict[Input, Term]]
) -> list[OutputGradients]:
    """The parts, with zeros for an input whose every term cancelled (`x - x`).

    autograd differentiates the formula as written, so it gives such an input a gradient
    of zeros, not None (Note [Cancelled shapes] in symgrad.language.broadcasts). The
    zeros go to every differentiable output that reads the input outside conditions:
    which of them gets a gradient is known only in backward (one tensor returned as two
    outputs gets its gradient in the last slot alone).
    """
    definitions = {i.symbol: i.expr for i in spec.intermediates}
    given = {i for part in parts for i in part.gradients}
    result = list(parts)
    for item in spec.differentiable_inputs:
        if item in given:
            continue
        for index, part in enumerate(result):
            output = part.output
            if not output.differentiable or spec.override(output, item) is not None:
                continue
            if item.symbol in broadcasts.differentiable_reach(output.expr, definitions):
                zeros = broadcasts.ZerosLike(part.grad, reductions.ShapeOf(item.symbol))
                frames[output.symbol][item] = Term(zeros, item.symbol, True)
                gradients = {**part.gradients, item: zeros}
                result[index] = dataclasses.replace(part, gradients=gradients)
    return result


def fit_to_inputs(
    parts: Sequence[OutputGradients],
    frames: Mapping[sympy.Basic, Mapping[Input, Term]],
    shapes: reductions.Shapes,
) -> list[OutputGradients]:
    """The parts, with gradient terms summed to their input's shape where needed.

    The emitter adds up the parts of an input's gradient and sums the total to the
    input's shape once. That is exact when every part has the same frame and fills it
    by itself (a part is absent when its output got no gradient); otherwise each part
    is summed to the input's shape first (Note [Frames of gradient terms] in
    symgrad.ad.reverse).
    """
    fitted: dict[tuple[sympy.Basic, Input], sympy.Expr] = {}
    inputs = {i for part in parts for i in part.gradients}
    for item in inputs:
        terms = {
            p.output.symbol: frames[p.output.symbol][item] for p in parts if item in p.gradients
        }
        shape = shapes.of(item.symbol)
        kinds = {shapes.of(t.frame) for t in terms.values()}
        if len(kinds) == 1 and (kinds == {shape} or all(t.full for t in terms.values())):
            continue
        for output, term in terms.items():
            fitted[(output, item)] = fit(term, item.symbol, shapes, exact=False).expr
    return [
        OutputGradients(
            part.output,
            part.grad,
            {i: fitted.get((part.output.symbol, i), g) for i, g in part.gradients.items()},
            part.statements,
        )
        for part in parts
    ]


def name_shape_facts(
    parts: Sequence[OutputGradients],
    tangents: forward_mode.Tangents,
    forward: Sequence[Assignment],
    spec: Spec,
    namer: Namer,
) -> tuple[list[OutputGradients], forward_mode.Tangents, tuple[Assignment, ...]]:
    """Replace each `ShapeFact` (a mean's divisor, a reduced shape) by a name.

    Facts that are equal as functions of the input shapes share a name; the emitter
    computes each once, from the input shapes, for the backward and the jvp.
    """
    shapes = reductions.Shapes(
        {a.target: a.expr for a in forward}, {i.symbol for i in spec.tensor_inputs}
    )
    by_key: dict[Any, sympy.Symbol] = {}
    found: dict[sympy.Basic, sympy.Symbol] = {}
    named: list[Assignment] = []
    expressions: list[sympy.Expr] = []
    for part in parts:
        expressions += [*part.gradients.values(), *(s.expr for s in part.statements)]
    expressions += [s.expr for s in tangents.statements]
    expressions += [t for t in tangents.outputs if t is not None]
    for expr in expressions:
        for fact in sorted(expr.atoms(reductions.ShapeFact), key=sympy.default_sort_key):
            key = (type(fact), shapes.of(fact.argument), fact.args[1:])
            if key not in by_key:
                by_key[key] = namer.temporary()
                named.append(Assignment(by_key[key], fact))
            found[fact] = by_key[key]
    if not found:
        return list(parts), tangents, ()
    renamed = [
        OutputGradients(
            part.output,
            part.grad,
            {i: g.xreplace(found) for i, g in part.gradients.items()},
            tuple(Assignment(s.target, s.expr.xreplace(found)) for s in part.statements),
        )
        for part in parts
    ]
    renamed_tangents = forward_mode.Tangents(
        tangents.inputs,
        tuple(Assignment(s.target, s.expr.xreplace(found)) for s in tangents.statements),
        tuple(None if t is None else t.xreplace(found) for t in tangents.outputs),
    )
    return renamed, renamed_tangents, tuple(named)
