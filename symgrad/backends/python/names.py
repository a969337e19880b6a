"""The names a generated module introduces, chosen so that no spec name collides with them."""

from __future__ import annotations

from collections.abc import Iterable

from symgrad.ad.ir import Derived, Namer
from symgrad.backends.python import kernels
from symgrad.frontend.model import Input


class BackwardNames:
    """The names the backward introduces, chosen not to collide with the spec's."""

    def __init__(self, derived: Derived, namer: Namer) -> None:
        spec = derived.spec
        # Inputs that receive a gradient from at least one output, in input order.
        receiving_names = {g.input.name for part in derived.backward for g in part.gradients}
        receiving = [i for i in spec.differentiable_inputs if i.name in receiving_names]
        self.need = {i.name: namer.fresh(f"need_{i.name}") for i in receiving}
        # With one tensor input, autograd runs the backward only when that input needs a
        # gradient: no flag to read or test (a tuple built per call).
        self.always_needed = len(spec.tensor_inputs) == 1 and bool(receiving)
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
                "explain_call",
                "apply",
                "unwrap",
                "broadcast_shapes",
                "unsqueeze_last",
                *kernels.HELPER_ROLES,
            )
        }
        self.output_shapes_attribute = "output_shapes"
        needs = [self.need.get(i.name, "_") for i in spec.inputs]
        self.needs_unpacking = ", ".join(needs) + ("," if len(needs) == 1 else "")
        if self.always_needed:
            self.needs_unpacking = ""
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
        """The test that some of `inputs` need a gradient; empty where one always does."""
        return "" if self.always_needed else " or ".join(self.need[i.name] for i in inputs)
