"""The context of the generated module: every statement printed, every name chosen."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import sympy

from symgrad.ad import inplace
from symgrad.ad.ir import Assignment, Derived, Namer
from symgrad.backends.base import Provenance
from symgrad.backends.forms.blocks import StatementSpelling, backward_blocks, forward_value
from symgrad.backends.python import call_checks, kernels
from symgrad.backends.python.contexts import (
    CustomOp,
    ForwardHelper,
    Fused,
    Jvp,
    ModuleContext,
    PullbackHelper,
)
from symgrad.backends.python.names import BackwardNames
from symgrad.backends.python.printer import TorchPrinter
from symgrad.backends.python.text import docstring, formulas, header, summary
from symgrad.backends.statements import fact_shapes, saved_comment
from symgrad.frontend.model import Input, InputType
from symgrad.language import activations, contractions, pullbacks, reductions

ANNOTATIONS = {
    InputType.TENSOR: "torch.Tensor",
    InputType.FLOAT: "float",
    InputType.INT: "int",
    InputType.BOOL: "bool",
    InputType.INDEX: "torch.Tensor",
}


def module_context(
    derived: Derived, printer: TorchPrinter, provenance: Provenance
) -> ModuleContext:
    """Print every statement of `derived` and choose every name function.py.jinja uses."""
    spec = derived.spec
    namer = Namer(derived.names)
    names = BackwardNames(derived, namer)
    printer.helpers = names.helpers
    spelling = StatementSpelling(printer, names.guard, names.grad, names.accumulate_helper)
    prelude, backward = backward_blocks(derived, spelling)
    several = len(derived.backward) > 1
    # Names are taken in this order (jvp, fused, custom op, the template's locals), so
    # that the generated code does not change from one version to the next.
    jvp = _jvp_context(derived, printer, names, namer)
    fused = _fused_context(derived, names, printer, namer) if spec.mode == "fused" else None
    custom_op = custom_op_context(derived, namer) if spec.custom_op else None
    local_body = namer.fresh("body")
    # Saved values are non-differentiable outputs: their gradient is always None.
    unused_grads = [namer.fresh(f"_grad_{o.name}") for o in derived.saved_values]
    local_error = namer.fresh("error")
    forward = printer.forward_statements(
        derived.forward,
        lambda a: spelling.statement(printer.doprint(a.target), forward_value(a, derived, printer)),
    )
    facts = fact_shapes(derived)
    shape_facts = tuple(_shape_fact_lines(facts, printer, names.helpers))
    pullback_helpers = _pullback_helpers(printer, names.helpers)
    forward_helpers = _forward_helpers(printer, names.helpers)
    helpers: list[PullbackHelper | ForwardHelper] = [*pullback_helpers, *forward_helpers]
    return ModuleContext(
        version=provenance.version,
        header=tuple(header(spec.source, provenance)),
        summary=docstring(summary(spec), indent=0, closing=False),
        formulas=formulas(derived),
        class_name=spec.name,
        function_name=spec.module,
        doc=docstring(spec.doc or summary(spec), indent=4),
        parameters=tuple(_parameter(i) for i in spec.inputs),
        input_names=tuple(i.name for i in spec.inputs),
        return_annotation=_return_annotation(len(spec.outputs)),
        forward_annotation=_return_annotation(len(derived.outputs)),
        forward=forward,
        outputs=tuple(o.name for o in derived.outputs),
        public_outputs=tuple(o.name for o in spec.outputs),
        residuals=tuple(o.name for o in derived.residuals + derived.saved_values),
        saved_values=tuple(o.name for o in derived.saved_values),
        saved_comment=saved_comment(derived, width=78),
        recompute=tuple(spelling.assignment(a) for a in derived.recompute),
        shape_facts=shape_facts,
        shape_fact_names=tuple(printer.doprint(a.target) for a in derived.shape_facts),
        shape_facts_attribute=names.shape_facts_attribute,
        helpers=names.helpers,
        pullback_helpers=pullback_helpers,
        forward_helpers=forward_helpers,
        in_blocks=names.helpers["in_blocks"] if any(h.cpu for h in helpers) else "",
        cpu_form_min=kernels.CPU_FORM_MIN_ELEMENTS,
        # `_reduced_shape` is needed where a fact measures a reduction (see _shape_code).
        uses_reduced_shape=any(_has_reduction(shape) for _, shape in facts),
        uses_broadcast_shapes=any(_has_broadcast(shape) for _, shape in facts),
        uses_count=any(isinstance(f.expr, reductions.Count) for f in derived.shape_facts),
        uses_math=printer.uses_math,
        uses_unsqueeze_last="unsqueeze_last" in printer.used_helpers,
        non_differentiable=tuple(
            o.name for o in spec.outputs + derived.saved_values if not o.differentiable
        ),
        saved_tensors=tuple(s.name for s in derived.saved_tensors),
        saved_numbers=tuple(i.name for i in derived.saved_numbers),
        saved_shapes=tuple(i.name for i in derived.saved_shapes),
        shape_names=tuple(names.shape_names),
        shapes_attribute=names.shapes_attribute,
        numbers_attribute=names.numbers_attribute,
        several_outputs=several,
        several_returned=len(derived.outputs) > 1,
        needs=names.needs_unpacking,
        input_grads=tuple(names.grad.values()),
        prelude=prelude,
        backward=backward,
        grad_output_names=(
            *(part.grad.name for part in derived.backward),
            *(unused_grads),
        ),
        returns=tuple(names.returns),
        jvp=jvp,
        fused=fused,
        custom_op=custom_op,
        reduce_helper=names.reduce_helper,
        inputs_parameter=names.inputs_parameter,
        output_parameter=names.output_parameter,
        accumulate_helper=names.accumulate_helper,
        local_body=local_body,
        local_error=local_error,
        tensor_inputs=tuple(i.name for i in spec.tensor_inputs),
        broadcast_groups=repr(call_checks.broadcast_groups(spec)),
    )


def inplace_context(
    derived: Derived, printer: TorchPrinter, provenance: Provenance
) -> ModuleContext | None:
    """The context of the in-place variant `<module>_` (Note [In-place variants]), if any.

    Print it before the module's context with the same printer, so that the module
    defines every helper the variant calls.
    """
    if derived.inplace is None:
        return None
    spec = derived.spec
    context = module_context(derived.inplace, printer, provenance)
    class_name, function_name = inplace.variant_names(spec)
    return dataclasses.replace(
        context,
        class_name=class_name,
        function_name=function_name,
        doc=docstring(inplace.variant_doc(spec), indent=4),
        overwrites=inplace.overwritten(spec).name,
        out_of_place=spec.module,
    )


def _pullback_helpers(
    printer: TorchPrinter, helpers: Mapping[str, str]
) -> tuple[PullbackHelper, ...]:
    """The helpers the printed backward calls, each with its plain-torch formula."""
    grad, x = sympy.Symbol("grad", real=True), sympy.Symbol("x", real=True)
    local = TorchPrinter(frozenset({grad, x}))
    found = []
    for function, kernel in kernels.KERNELS.items():
        role = kernels.helper_role(function)
        if role in printer.used_helpers:
            formula = local.doprint(pullbacks.PULLBACKS[function](grad, x).expanded())
            call = kernel.call.format(grad="grad", point="x")
            block = helpers[kernels.block_role(role)] if kernel.cpu else ""
            found.append(PullbackHelper(helpers[role], function, formula, call, kernel.cpu, block))
    return tuple(found)


def _forward_helpers(
    printer: TorchPrinter, helpers: Mapping[str, str]
) -> tuple[ForwardHelper, ...]:
    """The helpers the printed forward calls for activations with a CPU form."""
    return tuple(
        ForwardHelper(
            helpers[name],
            name,
            activations.ACTIVATIONS[name].torch_function,
            form,
            helpers[kernels.block_role(name)],
        )
        for name, form in kernels.FORWARD_FORMS.items()
        if name in printer.used_helpers
    )


# Shape-tree nodes that carry a shape through unchanged in kind; any other one reduces.
_NOT_REDUCTIONS = frozenset({"input", "broadcast", "cat", "view", "einsum"})


def _shape_kinds(shape: reductions.Shape | None) -> set[str]:
    """The kinds of node a shape tree of `reductions.shape_of` holds (see _shape_code)."""
    if shape is None:
        return set()
    kind = shape[0]
    if kind == "input":
        return {kind}
    if kind in ("broadcast", "cat", "einsum"):
        children = shape[2] if kind == "einsum" else shape[1]
    else:  # a view, segment or reduction of one shape
        children = (shape[1],)
    return {kind}.union(*(_shape_kinds(child) for child in children))


def _has_reduction(shape: reductions.Shape | None) -> bool:
    """Whether a shape tree holds a reduction (a segment sum counts as one)."""
    return bool(_shape_kinds(shape) - _NOT_REDUCTIONS)


def _has_broadcast(shape: reductions.Shape | None) -> bool:
    """Whether a shape tree broadcasts shapes."""
    return "broadcast" in _shape_kinds(shape)


def _parameter(item: Input) -> str:
    text = f"{item.name}: {ANNOTATIONS[item.type]}"
    if item.default is not None:
        text += f" = {item.default!r}"
    return text


def _return_annotation(count: int) -> str:
    if count == 1:
        return "torch.Tensor"
    return "tuple[" + ", ".join("torch.Tensor" for _ in range(count)) + "]"


def _statement(assignment: Assignment, printer: TorchPrinter) -> str:
    return f"{printer.doprint(assignment.target)} = {printer.doprint(assignment.expr)}"


def custom_op_context(derived: Derived, namer: Namer) -> CustomOp:
    """The operator `symgrad::<module>`: its name, Python function and parameters.

    Its parameters have no defaults: the dispatcher drops arguments equal to their
    default, and the backward's needs_input_grad must line up with every input.
    """
    spec = derived.spec
    return CustomOp(
        name=f"symgrad::{spec.module}",
        function=namer.fresh(f"_{spec.module}_op"),
        parameters=tuple(f"{i.name}: {ANNOTATIONS[i.type]}" for i in spec.inputs),
    )


def _fused_context(
    derived: Derived, names: BackwardNames, printer: TorchPrinter, namer: Namer
) -> Fused:
    """Names for fused mode: the compiled bodies and what the backward body reads."""
    arguments = (
        *(printer.doprint(s) for s in derived.saved_tensors),
        *(i.name for i in derived.saved_numbers),
        *names.shape_names,
        *(printer.doprint(a.target) for a in derived.shape_facts),
        *(part.grad.name for part in derived.backward),
        *(() if names.always_needed else names.need.values()),
    )
    return Fused(namer.fresh("_compiled"), namer.fresh("_use_compiled"), arguments)


def has_jvp(derived: Derived) -> bool:
    """Whether the Function gets a jvp: some input has a tangent.

    Even when every output's tangent is zero: autograd's jvp of `x - x` is zeros.
    """
    jvp = derived.jvp
    return jvp is not None and any(t is not None for t in jvp.tangents)


def _jvp_context(
    derived: Derived, printer: TorchPrinter, names: BackwardNames, namer: Namer
) -> Jvp | None:
    """The jvp staticmethod: tangent parameters, statements and the output tangents."""
    jvp = derived.jvp
    if jvp is None or not has_jvp(derived):
        return None
    parameters = [
        printer.doprint(t) if t is not None else namer.fresh(f"_tangent_{i.name}")
        for t, i in zip(jvp.tangents, derived.spec.inputs, strict=True)
    ]
    shapes = [namer.fresh(f"{o.name}_shape") for o in derived.outputs]
    filled = [printer.doprint(t) for t in jvp.tangents if t is not None]
    returns = [
        _output_tangent(t, shape, filled[0], names.helpers["expand_to"], printer)
        for t, shape in zip(jvp.outputs, shapes, strict=True)
    ]
    # An output that is a tensor input is returned as a view (_forward_statement); torch
    # then wants its tangent to be a view too.
    inputs = {i.symbol for i in derived.spec.tensor_inputs}
    by_target = {a.target: a.expr for a in derived.forward}
    returns = [
        f"{text}.view({shape})" if by_target.get(o.symbol) in inputs and text != "None" else text
        for text, shape, o in zip(returns, shapes, derived.outputs, strict=True)
    ]
    facts = {a.target for a in derived.shape_facts}
    read = set().union(*(a.expr.free_symbols for a in jvp.statements))
    read |= set().union(*(t.free_symbols for t in jvp.outputs if t is not None))
    tangent_inputs = (
        i.name for t, i in zip(jvp.tangents, derived.spec.inputs, strict=True) if t is not None
    )
    return Jvp(
        parameters=tuple(parameters),
        saved_tensors=tuple(printer.doprint(s) for s in jvp.saved_tensors),
        lines=tuple(_statement(a, printer) for a in jvp.statements),
        returns=tuple(returns),
        output_shapes=tuple(shapes),
        filled=tuple(filled),
        tangent_inputs=tuple(tangent_inputs),
        reads_shape_facts=bool(facts & read),
        output_shapes_attribute=names.output_shapes_attribute,
        tangent_shapes_attribute="tangent_shapes",
        traceable_class=namer.fresh(f"_{derived.spec.name}Traceable"),
    )


def _output_tangent(
    tangent: sympy.Expr | None, shape: str, given: str, expand_to: str, printer: TorchPrinter
) -> str:
    """An output's tangent in its shape: zeros where no input tangent reaches it.

    A differentiable output needs a tangent tensor even when it is constant along the
    inputs (a residual, or an output of inputs without tangents); None is for
    non-differentiable outputs only.
    """
    if tangent is None:
        return "None"
    if tangent == 0:
        return f"{given}.new_zeros({shape})"
    return f"{expand_to}({printer.doprint(tangent)}, {shape})"


def _shape_fact_lines(
    facts: list[tuple[Assignment, reductions.Shape | None]],
    printer: TorchPrinter,
    helpers: Mapping[str, str],
) -> list[str]:
    """`name = ...` computing each `ShapeFact` (symgrad.language.reductions) from the inputs."""
    lines = []
    for fact, shape in facts:
        code = _shape_code(shape, helpers)
        if isinstance(fact.expr, reductions.Count):
            dims = "None" if fact.expr.dims is None else repr(fact.expr.dims)
            code = f"{helpers['count']}({code}, {dims})"
        lines.append(f"{printer.doprint(fact.target)} = {code}")
    return lines


def _shape_code(shape: reductions.Shape | None, helpers: Mapping[str, str]) -> str:
    """Python for a shape tree of `symgrad.language.reductions.shape_of`."""
    if shape is None:
        return "torch.Size([])"
    if shape[0] == "input":
        return f"{shape[1]}.shape"
    if shape[0] == "broadcast":
        shapes = ", ".join(_shape_code(s, helpers) for s in shape[1])
        return f"{helpers['broadcast_shapes']}({shapes})"
    if shape[0] in ("view", "cat"):
        return _view_shape_code(shape, helpers)
    if shape[0] == "einsum":  # each output letter's size, read off an operand that has it
        codes = [_shape_code(s, helpers) for s in shape[2]]
        sizes = [f"{codes[k]}[{dim}]" for k, dim in contractions.output_dims(shape[1])]
        return f"torch.Size([{', '.join(sizes)}])"
    if shape[0] in ("segment", "index_select"):  # Note [Segment sums]
        _, inner, dim, index, *size = shape
        code = _shape_code(inner, helpers)
        head = "" if dim == 0 else f"*{code}[:{dim}], "
        tail = "" if dim == -1 else f", *{code}[{dim + 1}:]"
        count = size[0] if size else f"{index}.shape[0]"
        return f"torch.Size([{head}{count}{tail}])"
    _, inner, dims, keepdim = shape
    dims_code = "None" if dims is None else repr(dims)
    return (
        f"{helpers['reduced_shape']}({_shape_code(inner, helpers)}, {dims_code}, keepdim={keepdim})"
    )


def _view_shape_code(shape: reductions.Shape, helpers: Mapping[str, str]) -> str:
    """Python for the shape of a view or a cat: torch's own rule, on meta tensors."""
    if shape[0] == "cat":
        codes = [_shape_code(s, helpers) for s in shape[1]]
        empties = ", ".join(f'torch.empty({code}, device="meta")' for code in codes)
        return f"torch.cat([{empties}], {shape[2]}).shape"
    _, inner, method, parameters = shape
    call = f"{method}({', '.join(map(str, parameters))})"
    if method == "chunk":
        call = f"chunk({parameters[0]}, {parameters[1]})[{parameters[2]}]"
    return f'torch.empty({_shape_code(inner, helpers)}, device="meta").{call}.shape'
