"""The typed contexts the Python templates lay out: frozen dataclasses of printed strings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from symgrad.backends.forms.blocks import Block, OutputPart
from symgrad.backends.python.kernels import CpuForm


def as_template_variables(context: Any) -> dict[str, Any]:
    """A context's fields as the template's top-level names."""
    return {f.name: getattr(context, f.name) for f in fields(context)}


@dataclass(frozen=True)
class CustomOp:
    """The operator `symgrad::<module>`: its name, Python function and parameters."""

    name: str
    function: str
    parameters: tuple[str, ...]


@dataclass(frozen=True)
class Fused:
    """Fused mode: the compiled bodies' names and what the backward body reads."""

    compiled: str
    use_compiled: str
    arguments: tuple[str, ...]


@dataclass(frozen=True)
class Jvp:
    """The jvp staticmethod, and the class without it that torch.compile traces."""

    parameters: tuple[str, ...]
    saved_tensors: tuple[str, ...]
    lines: tuple[str, ...]
    returns: tuple[str, ...]
    output_shapes: tuple[str, ...]
    # The tangent parameters that may be None (filled with zeros first).
    filled: tuple[str, ...]
    tangent_inputs: tuple[str, ...]
    reads_shape_facts: bool
    output_shapes_attribute: str
    tangent_shapes_attribute: str
    traceable_class: str


@dataclass(frozen=True)
class PullbackHelper:
    """A module-level function calling a backward kernel that has no derivative
    (symgrad.backends.python.kernels), or plain torch when grad mode is on."""

    name: str
    # The language function whose derivative it applies (silu, mish).
    function: str
    # grad * f'(x) in plain torch, and the kernel call, both on `grad` and `x`.
    formula: str
    kernel: str
    # What runs instead on CPU tensors (symgrad.backends.python.kernels), if anything,
    # and the name of the function holding it (run block by block).
    cpu: CpuForm | None = None
    block: str = ""


@dataclass(frozen=True)
class ForwardHelper:
    """A module-level function computing an activation: torch's, or a CPU form on CPU."""

    name: str
    function: str
    torch_function: str
    cpu: CpuForm
    # The function holding the CPU form (run block by block).
    block: str


@dataclass(frozen=True)
class ModuleContext:
    """Everything function.py.jinja lays out, printed and named."""

    version: str
    header: tuple[str, ...]
    summary: str
    # Readable formulas for the module docstring: "forward" and "derivatives" lines.
    formulas: Mapping[str, list[str]]
    class_name: str
    function_name: str
    doc: str
    parameters: tuple[str, ...]
    input_names: tuple[str, ...]
    return_annotation: str
    forward_annotation: str
    forward: tuple[str, ...]
    outputs: tuple[str, ...]
    public_outputs: tuple[str, ...]
    # Outputs of the forward that the public function drops: residuals and saved values.
    residuals: tuple[str, ...]
    # Forward values saved for the backward (Note [Saved values] in symgrad.ad.saving),
    # and the statements recomputing them when the backward runs with grad mode on.
    saved_values: tuple[str, ...]
    # The comment in setup_context that names the saved values, line by line.
    saved_comment: tuple[str, ...]
    recompute: tuple[str, ...]
    shape_facts: tuple[str, ...]
    shape_fact_names: tuple[str, ...]
    shape_facts_attribute: str
    # The module's helper functions by role (sum_to, reduced_shape, ...), named freshly.
    helpers: Mapping[str, str]
    pullback_helpers: tuple[PullbackHelper, ...]
    forward_helpers: tuple[ForwardHelper, ...]
    # The helper running CPU forms block by block ("" when no helper has a CPU form).
    in_blocks: str
    # Fewer elements than this run torch's kernel, not the CPU form (kernels.py).
    cpu_form_min: int
    uses_reduced_shape: bool
    # A shape fact broadcasts shapes (the module then defines its own broadcast_shapes).
    uses_broadcast_shapes: bool
    uses_count: bool
    uses_math: bool
    # The backward restores a dim -1 that a 0-d reduction may not have removed.
    uses_unsqueeze_last: bool
    non_differentiable: tuple[str, ...]
    saved_tensors: tuple[str, ...]
    saved_numbers: tuple[str, ...]
    saved_shapes: tuple[str, ...]
    shape_names: tuple[str, ...]
    shapes_attribute: str
    numbers_attribute: str
    # Several outputs receive gradients (the backward adds up their parts).
    several_outputs: bool
    # The forward returns several tensors (outputs, residuals or saved values).
    several_returned: bool
    # `need_x, _, need_y,`: the left side that unpacks ctx.needs_input_grad.
    needs: str
    input_grads: tuple[str, ...]
    prelude: tuple[Block, ...]
    backward: tuple[OutputPart, ...]
    grad_output_names: tuple[str, ...]
    returns: tuple[str, ...]
    jvp: Jvp | None
    fused: Fused | None
    custom_op: CustomOp | None
    reduce_helper: str
    inputs_parameter: str
    output_parameter: str
    accumulate_helper: str
    # The template's own locals, named so that no spec name can shadow them.
    local_body: str
    local_error: str
    # Read only after a call failed, to say why: the inputs declared tensors, and the
    # groups of inputs the formulas broadcast together (a tuple display).
    tensor_inputs: tuple[str, ...]
    broadcast_groups: str
    # In the in-place variant's context, the input it overwrites (Note [In-place
    # variants] in symgrad.ad.inplace): the template then writes only its class and
    # function, which follow the module's. "" in the module's own context.
    overwrites: str = ""
    # In the in-place variant's context, the module's function it calls under torch.compile.
    out_of_place: str = ""
    # The in-place variant's class and function, which the module exports too.
    variant_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sample:
    """How the test draws one input: a tensor's shape and interval, or a number's value."""

    name: str
    tensor: bool
    shape: str = ""
    low: str = ""
    high: str = ""
    requires_grad: bool = False
    value: str = ""
    # An index input: int64 positions drawn below `high`, the size of the dim it indexes.
    index: bool = False


@dataclass(frozen=True)
class TestContext:
    """Everything test_function.py.jinja lays out, printed and named."""

    # Not a test class, though pytest would collect one named Test* from this module.
    __test__ = False

    version: str
    header: tuple[str, ...]
    class_name: str
    # Whether an input is an index (int64), which the float64 copies leave as it is.
    has_index: bool
    # An override reads grad: the reference needs the `_gradient_through` hook.
    uses_gradient_through: bool
    function_name: str
    module: str
    samples: tuple[Sample, ...]
    input_names: tuple[str, ...]
    # The plain formula, statement by statement, for autograd to differentiate.
    reference: tuple[str, ...]
    boundaries: tuple[str, ...]
    overridden: tuple[str, ...]
    gradcheck_inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    uses_math: bool
    has_gradients: bool
    fused: bool
    custom_op: CustomOp | None
    has_jvp: bool
    test_doc: str
    differentiable_outputs: tuple[str, ...]
    low_precision: tuple[str, ...]
    tolerances: str
    points: int
    # The in-place variant, when the spec asks for one.
    inplace: InplaceTest | None = None


@dataclass(frozen=True)
class InplaceTest:
    """What the test of an in-place variant names (Note [In-place variants])."""

    class_name: str
    function_name: str
    # The overwritten input and its position among the inputs.
    overwrites: str
    index: int
