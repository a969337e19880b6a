"""What the generated module checks after a failed call: input types and broadcasting."""

from __future__ import annotations

from symgrad.frontend.model import Spec
from symgrad.language import reductions


def broadcast_groups(spec: Spec) -> tuple[tuple[str, ...], ...]:
    """The tensor inputs that the spec's formulas broadcast together, group by group.

    Only inputs that meet directly in one elementwise expression: an input inside a
    reduction meets the others in the reduction's shape, which the call does not give.
    """
    definitions = {i.symbol: i.expr for i in spec.intermediates}
    tensors = {i.symbol for i in spec.tensor_inputs}
    order = [i.name for i in spec.inputs]
    groups: dict[tuple[str, ...], None] = {}

    def visit(shape: reductions.Shape | None) -> None:
        if shape is None or shape[0] == "input":
            return
        if shape[0] in ("reduced", "view", "segment", "index_select"):
            visit(shape[1])
            return
        if shape[0] == "cat":
            for part in shape[1]:
                visit(part)
            return
        if shape[0] == "einsum":  # operands meet in the contraction, not by broadcasting
            for part in shape[2]:
                visit(part)
            return
        names = tuple(sorted((p[1] for p in shape[1] if p[0] == "input"), key=order.index))
        if len(names) > 1:
            groups[names] = None
        for part in shape[1]:
            visit(part)

    for output in spec.outputs:
        visit(reductions.shape_of(output.expr, definitions, tensors))
    return tuple(groups)
