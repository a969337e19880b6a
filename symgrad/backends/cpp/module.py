"""The context of the generated C++ Function: every statement printed, every name chosen.

It lays the IR out the way LibTorch wants it: the forward's values computed once by a
static `values` (shared by the Function and the operator's kernel that runs below
autograd), numbers and shapes in `ctx->saved_data`, every value the backward assigns
under a guard declared up front (C++ scopes a variable to its braces).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import sympy

from symgrad.ad import inplace
from symgrad.ad.ir import Assignment, Derived, Namer
from symgrad.backends.base import Provenance
from symgrad.backends.cpp.contexts import CpuHelper, FunctionContext, Parameter
from symgrad.backends.cpp.cpu_forms import cpu_form
from symgrad.backends.cpp.fused import fused_loops
from symgrad.backends.cpp.printer import AtenPrinter
from symgrad.backends.forms.blocks import StatementSpelling, backward_blocks, forward_value
from symgrad.backends.python.text import escape_comment, formulas, header, summary
from symgrad.backends.statements import (
    backward_statements,
    fact_shapes,
    saved_comment,
)
from symgrad.frontend.model import Input, InputType
from symgrad.language import contractions, reductions
from symgrad.language.piecewise import is_condition

# C++ type, schema type, Python annotation and IValue accessor of each input type.
INPUT_TYPES = {
    InputType.TENSOR: ("const at::Tensor&", "Tensor", "torch.Tensor", ""),
    InputType.FLOAT: ("double", "float", "float", "toDouble"),
    InputType.INT: ("int64_t", "int", "int", "toInt"),
    InputType.BOOL: ("bool", "bool", "bool", "toBool"),
    InputType.INDEX: ("const at::Tensor&", "Tensor", "torch.Tensor", ""),
}
_SHAPE = ("std::vector<int64_t>", "toIntVector")


def function_context(
    derived: Derived, printer: AtenPrinter, namer: Namer, provenance: Provenance, detail: str
) -> FunctionContext:
    """Print every statement of `derived` and choose every name function.cpp.jinja uses.

    The helpers live in the namespace `detail` (Note [Generated names] in
    symgrad.backends.cpp.names): their calls
    are qualified, so that neither a spec's names nor ATen's can take them.
    """
    spec = derived.spec
    helpers = {
        role: f"{detail}::{role}"
        for role in (
            "reduce_to",
            "accumulate",
            "sum_to",
            "reduced_shape",
            "count",
            "unsqueeze_last",
        )
    }
    forms = {role: f"{role}_cpu_form" for role in ("mish", "mish_backward")}
    printer.helpers = {
        **printer.helpers,
        "sum_to": helpers["sum_to"],
        "unsqueeze_last": helpers["unsqueeze_last"],
        **{role: f"{detail}::{name}" for role, name in forms.items()},
    }
    receiving = {g.input.name for part in derived.backward for g in part.gradients}
    tensor_inputs = [i for i in spec.inputs if i.is_tensor]
    need = {i.name: namer.fresh(f"need_{i.name}") for i in tensor_inputs if i.name in receiving}
    grad = {name: namer.fresh(f"grad_{name}") for name in need}
    shapes = {i.name: namer.fresh(f"{i.name}_shape") for i in derived.saved_shapes}
    spelling = StatementSpelling(printer, _Guards(need), grad, helpers["accumulate"], end=";")
    prelude, backward = backward_blocks(derived, spelling)
    several = len(derived.backward) > 1
    parameters = tuple(_parameter(i, printer.doprint(i.symbol)) for i in spec.inputs)
    reads = _backward_reads(derived)
    output_index = {o.symbol: n for n, o in enumerate(derived.outputs)}
    saved_tensors = tuple(
        f"outputs[{output_index[s]}]" if s in output_index else printer.doprint(s)
        for s in derived.saved_tensors
    )
    saved_names = {s.name for s in derived.saved_tensors}
    # Each gradient's input shape, in the backward: the saved input's, else a saved shape.
    input_shapes = {
        i.name: f"{printer.doprint(i.symbol)}.sizes()" if i.name in saved_names else shapes[i.name]
        for i in spec.inputs
        if i.name in grad
    }
    fused = fused_loops(derived, printer.renames, grad, need, input_shapes, detail)
    returns = [
        (
            f"{helpers['reduce_to']}({grad[i.name]}, {input_shapes[i.name]})"
            if i.name in grad
            else "at::Tensor()"
        )
        for i in spec.inputs
    ]
    return FunctionContext(
        header=tuple(_comment_header(derived, provenance)),
        summary=_comment_text(summary(spec)),
        formulas=formulas(derived),
        namespace=f"symgrad_{spec.module}",
        detail=detail,
        class_name=spec.name,
        function_name=spec.module,
        parameters=parameters,
        forward_reads=frozenset(
            printer.doprint(s) for a in derived.forward for s in a.expr.free_symbols
        ),
        forward=printer.forward_statements(
            derived.forward, lambda a: _forward_statement(a, derived, printer, spelling)
        ),
        outputs=tuple(printer.doprint(o.symbol) for o in derived.outputs),
        public_count=len(spec.outputs),
        non_differentiable=tuple(
            f"outputs[{output_index[o.symbol]}]"
            for o in spec.outputs + derived.saved_values
            if not o.differentiable
        ),
        saved_comment=saved_comment(derived, width=80),
        saved_tensors=saved_tensors
        + tuple(f"fused_saved[{n}]" for n in range(len(fused.saved) if fused else 0)),
        saved_tensor_names=tuple(printer.doprint(s) for s in derived.saved_tensors)
        + (fused.saved if fused else ()),
        saved_data=tuple(_saved_data(derived, printer, shapes, helpers)),
        several_outputs=several,
        several_returned=len(derived.outputs) > 1,
        grads=tuple(
            (printer.doprint(part.grad), output_index[part.output.symbol])
            for n, part in enumerate(derived.backward)
            if part.grad in reads or (n == 0 and not several)
        ),
        needs=tuple((need[i.name], n) for n, i in enumerate(tensor_inputs) if i.name in need),
        input_grads=tuple(grad.values()),
        declarations=tuple(_declarations(derived, printer)),
        recompute=tuple(spelling.assignment(a) for a in derived.recompute),
        prelude=prelude,
        backward=backward,
        returns=tuple(returns),
        uses_shape_facts=bool(derived.shape_facts),
        op_schema=_schema(derived, parameters),
        op_return=op_return(len(spec.outputs)),
        forward_values=namer.fresh("values"),
        forward_kernel=namer.fresh(f"{spec.module}_forward"),
        fused_requested=spec.mode == "fused",
        fused=fused,
        cpu_helpers=tuple(_cpu_helpers(printer, forms)),
        uses_unsqueeze_last="unsqueeze_last" in printer.used_helpers,
    )


def inplace_context(
    derived: Derived, printer: AtenPrinter, namer: Namer, provenance: Provenance, detail: str
) -> FunctionContext | None:
    """The context of the in-place variant `<module>_` (Note [In-place variants]), if any.

    Print it before the module's context, with the same printer and a copy of its namer,
    so that both call the same helpers, which the module's part of the file defines.
    """
    if derived.inplace is None:
        return None
    spec = derived.spec
    context = function_context(derived.inplace, printer, Namer(namer.taken), provenance, detail)
    overwritten = printer.doprint(inplace.overwritten(spec).symbol)
    parameters = tuple(
        (
            dataclasses.replace(p, schema=p.schema.replace("Tensor ", "Tensor(a!) ", 1))
            if p.name == overwritten
            else p
        )
        for p in context.parameters
    )
    class_name, function = inplace.variant_names(spec)
    schema = ", ".join(p.schema for p in parameters)
    return dataclasses.replace(
        context,
        class_name=class_name,
        function_name=function,
        parameters=parameters,
        op_schema=f"{function}({schema}) -> Tensor(a!)",
        overwrites=overwritten,
    )


class _Guards:
    """`need_a || need_b` for the inputs a block serves."""

    def __init__(self, need: dict[str, str]) -> None:
        self.need = need

    def __call__(self, inputs: Sequence[Input]) -> str:
        return " || ".join(self.need[i.name] for i in inputs)


def _comment_header(derived: Derived, provenance: Provenance) -> list[str]:
    """symgrad's generated-file header as `//` comments."""
    return comment_header(derived.spec.source, provenance)


def comment_header(source: str, provenance: Provenance) -> list[str]:
    """symgrad's generated-file header of a spec's source file as `//` comments."""
    lines = header(source, provenance)
    return ["// " + line.removeprefix("# ").removesuffix("  # noqa: E501") for line in lines]


def _cpu_helpers(printer: AtenPrinter, names: dict[str, str]) -> list[CpuHelper]:
    """The helpers for the CPU forms the printed code calls."""
    found = []
    for role, name in names.items():
        form = cpu_form(role)
        if role in printer.used_helpers and form is not None:
            tensors = ("grad", "x") if role.endswith("_backward") else ("x",)
            parameters = ", ".join(f"const at::Tensor& {t}" for t in tensors)
            found.append(CpuHelper(name, parameters, ", ".join(tensors), form))
    return found


def _comment_text(text: str) -> str:
    """Text that stays inside one `//` comment: a backslash at its end would continue the
    comment onto the next line of code."""
    text = escape_comment(text).rstrip()
    return f"{text} ." if text.endswith("\\") else text


def _parameter(item: Input, name: str) -> Parameter:
    """`item` as a C++ parameter named `name` (a C++ keyword is renamed), in the schema
    and in Python (under its own name)."""
    cpp, schema, _, _ = INPUT_TYPES[item.type]
    return Parameter(name, f"{cpp} {name}", f"{cpp} /*{name}*/", f"{schema} {name}", item.is_tensor)


def python_parameter(item: Input) -> str:
    """`item` as a parameter of the Python loader's functions: `beta: float = 1.0`."""
    default = f" = {item.default!r}" if item.default is not None else ""
    return f"{item.name}: {INPUT_TYPES[item.type][2]}{default}"


def _schema(derived: Derived, parameters: tuple[Parameter, ...]) -> str:
    """The operator's schema: `name(Tensor x, float beta) -> Tensor`."""
    spec = derived.spec
    arguments = ", ".join(p.schema for p in parameters)
    returns = (
        "Tensor"
        if len(spec.outputs) == 1
        else "(" + ", ".join("Tensor" for _ in spec.outputs) + ")"
    )
    return f"{spec.module}({arguments}) -> {returns}"


def op_return(count: int) -> str:
    """The C++ return type of an operator with `count` tensor outputs."""
    return (
        "at::Tensor"
        if count == 1
        else "std::tuple<" + ", ".join("at::Tensor" for _ in range(count)) + ">"
    )


def _is_tensor(symbol: sympy.Basic, derived: Derived) -> bool:
    return symbol in derived.tensor_symbols


def _cpp_type(assignment: Assignment, derived: Derived) -> str:
    if _is_tensor(assignment.target, derived):
        return "at::Tensor"
    return "bool" if is_condition(assignment.expr) else "double"


def _forward_statement(
    assignment: Assignment, derived: Derived, printer: AtenPrinter, spelling: StatementSpelling
) -> str:
    """A forward statement, declared (symgrad.backends.forms.blocks.forward_value)."""
    target = f"const {_cpp_type(assignment, derived)} {printer.doprint(assignment.target)}"
    return spelling.statement(target, forward_value(assignment, derived, printer))


def _saved_data(
    derived: Derived, printer: AtenPrinter, shapes: dict[str, str], helpers: dict[str, str]
) -> list[tuple[str, str, str, str]]:
    """(name, C++ type, IValue accessor, value in forward) of what ctx->saved_data keeps."""
    entries = []
    for item in derived.saved_numbers:
        name = printer.doprint(item.symbol)
        entries.append((name, INPUT_TYPES[item.type][0], INPUT_TYPES[item.type][3], name))
    for item in derived.saved_shapes:
        entries.append(
            (shapes[item.name], *_SHAPE, f"{printer.doprint(item.symbol)}.sizes().vec()")
        )
    for fact, shape in fact_shapes(derived):
        code = _shape_code(shape, helpers)
        name = printer.doprint(fact.target)
        if isinstance(fact.expr, reductions.Count):
            code = f"{helpers['count']}({code}, {_dims(fact.expr.dims)})"
            entries.append((name, "int64_t", "toInt", code))
        else:
            entries.append((name, *_SHAPE, code))
    # A computed index (Note [Arg extrema]) is a value the forward returns, by position.
    for n, output in enumerate(derived.outputs):
        read = re.compile(rf"\b{re.escape(output.name)}\.size\(0\)")
        entries = [(*e[:3], read.sub(f"outputs[{n}].size(0)", e[3])) for e in entries]
    return entries


def _dims(dims: tuple[int, ...] | None) -> str:
    """A dim list for the helpers; empty stands for every dim."""
    return "{" + ", ".join(map(str, dims or ())) + "}"


def _shape_code(shape: reductions.Shape | None, helpers: dict[str, str]) -> str:
    """C++ for a shape tree of `symgrad.language.reductions.shape_of`."""
    if shape is None:
        return "std::vector<int64_t>{}"
    if shape[0] == "input":
        return f"{shape[1]}.sizes().vec()"
    if shape[0] in ("view", "cat"):
        return _view_shape_code(shape, helpers)
    if shape[0] == "broadcast":
        codes = [_shape_code(s, helpers) for s in shape[1]]
        code = codes[0]
        for other in codes[1:]:
            code = f"at::infer_size({code}, {other})"
        return code
    if shape[0] == "einsum":  # each output letter's size, read off an operand that has it
        codes = [_shape_code(s, helpers) for s in shape[2]]
        sizes = [f"{codes[k]}[{dim}]" for k, dim in contractions.output_dims(shape[1])]
        return f"std::vector<int64_t>{{{', '.join(sizes)}}}"
    if shape[0] in ("segment", "index_select"):  # Note [Segment sums]
        _, inner, dim, index, *size = shape
        count = size[0] if size else f"{index}.size(0)"
        wrapped = f"at::maybe_wrap_dim({dim}, static_cast<int64_t>(sizes.size()))"
        return (
            f"[&] {{ auto sizes = {_shape_code(inner, helpers)}; sizes[{wrapped}] = {count}; "
            "return sizes; }()"
        )
    _, inner, dims, keepdim = shape
    keep = "true" if keepdim else "false"
    return f"{helpers['reduced_shape']}({_shape_code(inner, helpers)}, {_dims(dims)}, {keep})"


def _view_shape_code(shape: reductions.Shape, helpers: dict[str, str]) -> str:
    """C++ for the shape of a view or a cat, by ATen's rule on the sizes alone (no tensor:
    a meta tensor here would run under opcheck's schema check)."""
    if shape[0] == "cat":
        parts = ", ".join(_shape_code(s, helpers) for s in shape[1])
        return f"{_CAT_SHAPE.format(dim=shape[2])}({{{parts}}})"
    _, inner, method, parameters = shape
    if method == "reshape":
        body = _RESHAPE_SHAPE.format(sizes=", ".join(map(str, parameters)))
    elif method == "unsqueeze":
        body = _UNSQUEEZE_SHAPE.format(dim=parameters[0])
    else:
        body = _CHUNK_SHAPE.format(chunks=parameters[0], dim=parameters[1], piece=parameters[2])
    return f"[](std::vector<int64_t> s) {{ {body} }}({_shape_code(inner, helpers)})"


# The bodies of the lambdas that compute a view's shape from its argument's, `s`.
_RESHAPE_SHAPE = (
    "int64_t n = 1, known = 1; for (auto v : s) n *= v; std::vector<int64_t> r{{{sizes}}}; "
    "for (auto v : r) if (v != -1) known *= v; for (auto& v : r) if (v == -1) v = n / known; "
    "return r;"
)
_UNSQUEEZE_SHAPE = (
    "int64_t d = {dim} < 0 ? {dim} + int64_t(s.size()) + 1 : {dim}; "
    "s.insert(s.begin() + d, 1); return s;"
)
_CHUNK_SHAPE = (
    "int64_t d = {dim} < 0 ? {dim} + int64_t(s.size()) : {dim}; "
    "int64_t c = (s[d] + {chunks} - 1) / {chunks}; "
    "s[d] = std::min(c, s[d] - {piece} * c); return s;"
)
_CAT_SHAPE = (
    "[](std::vector<std::vector<int64_t>> p) {{ int64_t d = {dim} < 0 ? {dim} + "
    "int64_t(p[0].size()) : {dim}; std::vector<int64_t> r = p[0]; "
    "for (size_t i = 1; i < p.size(); ++i) r[d] += p[i][d]; return r; }}"
)


def _declarations(derived: Derived, printer: AtenPrinter) -> list[str]:
    """`at::Tensor a, b;` and the like for every value the backward assigns in a block."""
    statements = [*derived.recompute, *backward_statements(derived)]
    saved = set(derived.saved_tensors)
    by_type: dict[str, dict[str, None]] = {}
    for statement in statements:
        if statement.target in saved:
            continue
        kind = _cpp_type(statement, derived)
        by_type.setdefault(kind, {})[printer.doprint(statement.target)] = None
    initial = {"at::Tensor": "", "double": " = 0", "bool": " = false"}
    return [
        f"{kind} " + ", ".join(f"{name}{initial[kind]}" for name in names) + ";"
        for kind, names in by_type.items()
    ]


def _backward_reads(derived: Derived) -> set[sympy.Basic]:
    """Every symbol the backward's statements and gradients read."""
    exprs = [a.expr for a in backward_statements(derived)]
    exprs += [g.expr for part in derived.backward for g in part.gradients]
    return set().union(*(e.free_symbols for e in exprs))
