"""Reduced-shape forward values the backward reads, returned as extra outputs to save.

See Note [Residuals] below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy

from symgrad.ad.ir import Assignment, OutputGradients
from symgrad.frontend.model import Output, Spec
from symgrad.language import reductions


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
    """
    small = _small_values(intermediates, tensors)
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
                    residual = Output(target.name, target, assignment.expr, location)
                    found[target] = differentiate(residual)
                    pending.append(found[target])
            else:
                read |= assignment.expr.free_symbols
    return {a.target: found[a.target] for a in intermediates if a.target in found}


def _free_symbols_of(parts: Sequence[OutputGradients]) -> set[sympy.Basic]:
    """The values the parts read; a shape fact reads shapes only, not its argument's value."""
    read: set[sympy.Basic] = set()
    for part in parts:
        for expr in [*part.gradients.values(), *(s.expr for s in part.statements)]:
            facts = expr.atoms(reductions.ShapeFact)
            values = expr.xreplace({fact: sympy.Integer(1) for fact in facts}) if facts else expr
            read |= values.free_symbols
    return read
