"""The names a generated module introduces, chosen so that no spec name collides with them."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import sympy

from symgrad.ad.ir import Assignment, Derived, Namer
from symgrad.backends.python import kernels
from symgrad.frontend.model import Input
from symgrad.language import reductions
from symgrad.language.piecewise import is_condition


class BackwardNames:
    """The names the backward introduces, chosen not to collide with the spec's."""

    def __init__(self, derived: Derived, namer: Namer) -> None:
        spec = derived.spec
        # Inputs that receive a gradient from at least one output, in input order.
        receiving_names = {g.input.name for part in derived.backward for g in part.gradients}
        receiving = [i for i in spec.differentiable_inputs if i.name in receiving_names]
        self.need = {i.name: namer.fresh(f"need_{i.name}") for i in receiving}
        self.grad = {i.name: namer.fresh(f"grad_{i.name}") for i in receiving}
        self.inputs_parameter = namer.fresh("inputs")
        self.output_parameter = namer.fresh("output")
        self.reduce_helper = namer.fresh("_reduce_to")
        self.accumulate_helper = namer.fresh("_accumulate")
        self.shapes_attribute = "input_shapes"
        self.numbers_attribute = "numbers"
        self.shape_facts_attribute = "shape_facts"
        # Module-level helpers some modules need, by role.
        self.helpers = {
            role: namer.fresh(f"_{role}")
            for role in (
                "sum_to",
                "reduced_shape",
                "count",
                "expand_to",
                "fill_tangents",
                *kernels.HELPER_ROLES,
            )
        }
        self.output_shapes_attribute = "output_shapes"
        needs = [self.need.get(i.name, "_") for i in spec.inputs]
        self.needs_unpacking = ", ".join(needs) + ("," if len(needs) == 1 else "")
        saved = {s.name for s in derived.saved_tensors}
        shapes = {i.name: namer.fresh(f"{i.name}_shape") for i in derived.saved_shapes}
        returns = []
        for item in spec.inputs:
            if item.name not in self.grad:
                returns.append("None")
                continue
            shape = f"{item.name}.shape" if item.name in saved else shapes[item.name]
            returns.append(f"{self.reduce_helper}({self.grad[item.name]}, {shape})")
        self.returns = returns
        self.shape_names = [shapes[i.name] for i in derived.saved_shapes]

    def guard(self, inputs: Iterable[Input]) -> str:
        return " or ".join(self.need[i.name] for i in inputs)


def all_statements(derived: Derived) -> list[Assignment]:
    """Every statement of the module, in the order it defines them."""
    statements = list(derived.forward) + list(derived.shape_facts)
    for block in derived.prelude:
        statements += block.statements
    for part in derived.backward:
        for block in part.shared:
            statements += block.statements
        for gradient in part.gradients:
            statements += gradient.statements
    if derived.jvp is not None:
        statements += derived.jvp.statements
    return statements


def small_symbols(derived: Derived) -> frozenset[sympy.Basic]:
    """Tensors of a reduced shape: residuals, gradients of reductions, and values of them."""
    small: set[sympy.Basic] = {o.symbol for o in derived.residuals}
    # The incoming gradient of a reduced output has the output's reduced shape.
    definitions = {a.target: a.expr for a in derived.forward}
    small |= {
        part.grad
        for part in derived.backward
        if isinstance(definitions.get(part.output.symbol), reductions.Reduction)
    }
    tensors = derived.tensor_symbols
    for statement in all_statements(derived):
        read = statement.expr.free_symbols & tensors
        reduced = isinstance(statement.expr, (reductions.Reduction, reductions.SumTo))
        if reduced or (read and read <= small):
            small.add(statement.target)
    return frozenset(small)


def condition_temporaries(derived: Derived) -> dict[sympy.Basic, sympy.Basic]:
    """Statements whose value is a condition (a boolean tensor), by target."""
    return {s.target: s.expr for s in all_statements(derived) if is_condition(s.expr)}


def temporary_names(derived: Derived) -> dict[sympy.Basic, str]:
    """Rename symgrad's temporaries `_t0`, `_t1`, ... in the order the module defines them."""
    statements = all_statements(derived)
    taken = derived.names - {t.name for t in derived.temporaries}
    numbers = (f"_t{n}" for n in itertools.count())
    renames: dict[sympy.Basic, str] = {}
    for statement in statements:
        if statement.target in derived.temporaries and statement.target not in renames:
            renames[statement.target] = next(name for name in numbers if name not in taken)
    return renames
