"""The typed contexts the C++ templates lay out: frozen dataclasses of printed strings."""

from __future__ import annotations

from dataclasses import astuple, dataclass

from symgrad.backends.cpp.cpu_forms import CpuForm
from symgrad.backends.cpp.fused import FusedLoops
from symgrad.backends.forms.blocks import Block, OutputPart
from symgrad.backends.python.contexts import InplaceTest


@dataclass(frozen=True)
class Parameter:
    """One argument of the Function, in C++ and in the operator's schema."""

    name: str
    # `const at::Tensor& x`, `double beta`.
    cpp: str
    # The same, named in a comment only, where the forward does not read it (-Wextra).
    cpp_unread: str
    # `Tensor x`, `float beta` (the operator's schema).
    schema: str
    is_tensor: bool


@dataclass(frozen=True)
class CpuHelper:
    """A helper that runs a cheaper ATen form of a slow CPU kernel (backends.cpp.cpu_forms)."""

    name: str
    # `const at::Tensor& x` or `const at::Tensor& grad, const at::Tensor& x`.
    parameters: str
    # The tensors it reads, `x` or `grad, x`.
    arguments: str
    form: CpuForm


@dataclass(frozen=True)
class CommonHelpers:
    """Which of the helpers every Function may define (templates/cpp/helpers.cpp.jinja)
    a Function uses."""

    several_outputs: bool = False
    uses_unsqueeze_last: bool = False
    uses_shape_facts: bool = False
    cpu_forms: bool = False

    def __or__(self, other: CommonHelpers) -> CommonHelpers:
        """The helpers either uses: what one namespace shared by both must define."""
        return CommonHelpers(*(a or b for a, b in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True)
class FunctionContext:
    """Everything function.cpp.jinja lays out, printed and named."""

    header: tuple[str, ...]
    summary: str
    formulas: dict[str, list[str]]
    namespace: str
    # The namespace inside `namespace` that holds the helpers (Note [Generated names] in
    # symgrad.backends.cpp.names).
    detail: str
    class_name: str
    function_name: str
    parameters: tuple[Parameter, ...]
    # The names of the parameters the forward reads.
    forward_reads: frozenset[str]
    # The forward's statements, ending in the outputs.
    forward: tuple[str, ...]
    # Every value the forward returns: the spec's outputs, then residuals and saved values.
    outputs: tuple[str, ...]
    # How many of `outputs` the spec declares (the operator returns those).
    public_count: int
    non_differentiable: tuple[str, ...]
    saved_comment: tuple[str, ...]
    # `x` for an input, `outputs[1]` for a value the forward returns.
    saved_tensors: tuple[str, ...]
    saved_tensor_names: tuple[str, ...]
    # (name, C++ type, IValue accessor) of numbers and shapes kept in ctx->saved_data.
    saved_data: tuple[tuple[str, str, str, str], ...]
    several_outputs: bool
    several_returned: bool
    # Each incoming gradient's name and its output's position in `outputs`.
    grads: tuple[tuple[str, int], ...]
    needs: tuple[tuple[str, int], ...]
    input_grads: tuple[str, ...]
    # Declarations of every value the backward assigns inside a guard.
    declarations: tuple[str, ...]
    recompute: tuple[str, ...]
    prelude: tuple[Block, ...]
    backward: tuple[OutputPart, ...]
    returns: tuple[str, ...]
    uses_shape_facts: bool
    # The backward restores a dim -1 that a 0-d reduction may not have removed.
    uses_unsqueeze_last: bool
    op_schema: str
    op_return: str
    forward_values: str
    # The operator's kernel below autograd.
    forward_kernel: str
    cpu_helpers: tuple[CpuHelper, ...]
    # The spec asks for `mode: fused`.
    fused_requested: bool
    # Its fused CPU loops (Note [Fused loops] in symgrad.backends.cpp.fused); None where
    # the spec is not elementwise, or not in fused mode.
    fused: FusedLoops | None = None
    # In the in-place variant's context, the parameter it overwrites (Note [In-place
    # variants] in symgrad.ad.inplace): the template then writes only its struct and
    # kernels. "" in the module's own context.
    overwrites: str = ""
    # In the module's context: the in-place variant's context and its code, which goes
    # before the operator registrations (one TORCH_LIBRARY block holds both operators).
    variant: FunctionContext | None = None
    variant_code: str = ""
    # A variant of a spec with options: the namespace that holds the helpers all variants
    # share (symgrad.backends.cpp.options), which its own `detail` then uses; "" otherwise.
    shared_helpers: str = ""

    @property
    def common_helpers(self) -> CommonHelpers:
        """The common helpers this Function calls."""
        return CommonHelpers(
            self.several_outputs,
            self.uses_unsqueeze_last,
            self.uses_shape_facts,
            bool(self.cpu_helpers),
        )


@dataclass(frozen=True)
class LoaderContext:
    """What loader.py.jinja lays out: the names the Python module exposes."""

    header: tuple[str, ...]
    summary: str
    # The module docstring's paragraph on what the loader does, wrapped.
    about: tuple[str, ...]
    module: str
    class_name: str
    function_name: str
    namespace: str
    parameters: tuple[str, ...]
    arguments: tuple[str, ...]
    return_annotation: str
    doc: str
    # The in-place variant's names, when the spec asks for one, and its docstring.
    inplace: InplaceTest | None = None
    inplace_doc: str = ""
    # The C++ has fused loops: build it with optimisation and the CPU's vector units.
    fused: bool = False
    # The C++ calls at::parallel_for (fused loops, CPU forms): build it with OpenMP.
    parallel: bool = False
