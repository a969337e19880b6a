"""Emit Python: turn a `Derived` into the source of the module and of its test.

The work is split in two: this module prints every expression and decides every name
(a render model made only of strings), and the jinja2 templates in `templates/` hold
the shape of the code. black formats the result, so the output is stable.
"""

from __future__ import annotations

import functools
import importlib.resources
import itertools
import random
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import black
import jinja2
import sympy
from black.mode import TargetVersion
from sympy.core.relational import Relational
from sympy.printing.str import StrPrinter

from symgrad.ad import guards
from symgrad.ad.ir import Assignment, Derived, GuardedBlock, Namer, OutputBackward
from symgrad.backends.python.printer import TorchPrinter, UnprintableError
from symgrad.errors import SpecError
from symgrad.frontend.model import Input, InputType, Spec
from symgrad.language import functions, piecewise, reductions
from symgrad.language.piecewise import is_condition

# black's stable style only changes in its yearly January release, which pyproject pins.
_BLACK_MODE = black.Mode(line_length=88, target_versions={TargetVersion.PY39})

_ANNOTATIONS = {
    InputType.TENSOR: "torch.Tensor",
    InputType.FLOAT: "float",
    InputType.INT: "int",
    InputType.BOOL: "bool",
}


@dataclass(frozen=True)
class GeneratedFiles:
    """The generated module and its test, by file name."""

    module_name: str
    module_source: str
    test_source: str

    def by_filename(self) -> dict[str, str]:
        return {
            f"{self.module_name}.py": self.module_source,
            f"test_{self.module_name}.py": self.test_source,
        }


def render(derived: Derived, version: str) -> GeneratedFiles:
    """Print the module and the test for `derived`, black-formatted."""
    spec = derived.spec
    conditions = _condition_temporaries(derived)
    printer = TorchPrinter(derived.tensor_symbols, _temporary_names(derived), conditions)
    printer.small_symbols = _small_symbols(derived)
    _check_printable(derived)
    try:
        context = _module_context(derived, printer, version)
        test_printer = TorchPrinter(derived.tensor_symbols, conditions=conditions)
        test_context = _test_context(derived, test_printer, version)
    except UnprintableError as error:
        # The forward printed (checked above): the trouble is in a derivative.
        outputs = ", ".join(o.name for o in spec.outputs)
        raise SpecError(
            spec.outputs[0].location,
            f"cannot generate the backward of {outputs}: {error}",
            "outputs",
        ) from None
    module = _format(_template("function.py.jinja").render(context))
    test = _format(_template("test_function.py.jinja").render(test_context))
    return GeneratedFiles(spec.module, module, test)


def _check_printable(derived: Derived) -> None:
    """Raise a SpecError at the `where` or output whose expression cannot be printed."""
    printer = TorchPrinter(derived.tensor_symbols)
    spec = derived.spec
    named = [(f"where.{i.name}", i.expr, i.location) for i in spec.intermediates]
    named += [(f"outputs.{o.name}", o.expr, o.location) for o in spec.outputs]
    named += [
        (f"gradients.{g.output.name}.{g.input.name}", g.expr, g.location) for g in spec.overrides
    ]
    for path, expr, location in named:
        try:
            printer.doprint(expr)
        except UnprintableError as error:
            raise SpecError(location, f"cannot generate code: {error}", path) from None


def _format(source: str) -> str:
    return black.format_str(source, mode=_BLACK_MODE)


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_directory())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    environment.filters["unpack"] = _unpack_target
    environment.filters["pack"] = _tuple_display
    environment.filters["add_suffix"] = lambda text, suffix: f"{text}{suffix}"
    return environment


def _unpack_target(names: list[str]) -> str:
    """`a, b` or `(a,)`: the left side that unpacks a tuple into `names`."""
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)


def _tuple_display(items: list[str]) -> str:
    """`(a, b)` or `(a,)`."""
    return f"({items[0]},)" if len(items) == 1 else "(" + ", ".join(items) + ")"


def _template(name: str) -> jinja2.Template:
    return _environment().get_template(name)


def templates_directory() -> Path:
    """This backend's templates: in the installed package, or templates/ of a checkout."""
    packaged = importlib.resources.files("symgrad") / "templates" / "python"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "templates" / "python"


def _module_context(derived: Derived, printer: TorchPrinter, version: str) -> dict[str, Any]:
    spec = derived.spec
    namer = Namer(derived.names)
    names = _BackwardNames(derived, namer)
    printer.helpers = helpers = names.helpers
    shape_facts = _shape_fact_lines(derived, printer, helpers)
    context: dict[str, Any] = {
        "version": version,
        "header": _header(escape_comment(spec.source), version),
        "summary": _docstring(_summary(spec), indent=0, closing=False),
        "formulas": _formulas(derived),
        "class_name": spec.name,
        "function_name": spec.module,
        "doc": _docstring(spec.doc or _summary(spec), indent=4),
        "parameters": [_parameter(i) for i in spec.inputs],
        "input_names": [i.name for i in spec.inputs],
        "return_annotation": _return_annotation(len(spec.outputs)),
        "forward_annotation": _return_annotation(len(derived.outputs)),
        "forward": [_forward_statement(a, derived, printer) for a in derived.forward],
        "outputs": [o.name for o in derived.outputs],
        "public_outputs": [o.name for o in spec.outputs],
        "residuals": [o.name for o in derived.residuals],
        "shape_facts": shape_facts,
        "shape_fact_names": [printer.doprint(a.target) for a in derived.shape_facts],
        "shape_facts_attribute": names.shape_facts_attribute,
        "helpers": names.helpers,
        "uses_reduced_shape": any(f"{helpers['reduced_shape']}(" in s for s in shape_facts),
        "uses_count": any(f"{helpers['count']}(" in s for s in shape_facts),
        "non_differentiable": [o.name for o in spec.outputs if not o.differentiable],
        "saved_tensors": [s.name for s in derived.saved_tensors],
        "saved_numbers": [i.name for i in derived.saved_numbers],
        "saved_shapes": [i.name for i in derived.saved_shapes],
        "shape_names": names.shape_names,
        "shapes_attribute": names.shapes_attribute,
        "numbers_attribute": names.numbers_attribute,
        "several_outputs": len(derived.outputs) > 1,
        "needs": names.needs_unpacking,
        "input_grads": list(names.grad.values()),
        "prelude": [_block(b, printer, names) for b in derived.prelude],
        "backward": [
            _output_backward(p, printer, names, len(derived.outputs) > 1) for p in derived.backward
        ],
        "returns": names.returns,
        **_jvp_context(derived, printer, names, namer),
        "fused": _fused_context(derived, names, printer, namer) if spec.mode == "fused" else None,
        "custom_op": _custom_op_context(derived, namer) if spec.custom_op else None,
        "reduce_helper": names.reduce_helper,
        "inputs_parameter": names.inputs_parameter,
        "output_parameter": names.output_parameter,
        "accumulate_helper": names.accumulate_helper,
    }
    if len(derived.outputs) == 1:
        # One output: its shared work can join the recomputation under the same guards.
        context["prelude"] = _merge_blocks(context["prelude"] + context["backward"][0]["blocks"])
        context["backward"][0]["blocks"] = []
    # The template's own locals, named so that no spec name can shadow them.
    context["local_function"] = namer.fresh("function")
    context["local_body"] = namer.fresh("body")
    context["grad_output_names"] = [part.grad.name for part in derived.backward]
    context["uses_math"] = printer.uses_math
    return context


def _merge_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join neighbouring blocks that have the same guard."""
    merged: list[dict[str, Any]] = []
    for block in blocks:
        if merged and merged[-1]["guard"] == block["guard"]:
            merged[-1] = {"guard": block["guard"], "lines": merged[-1]["lines"] + block["lines"]}
        else:
            merged.append(block)
    return merged


def escape_docstring(text: str) -> str:
    """Text that can sit inside a triple-quoted docstring without ending or changing it."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return "".join(c if c.isprintable() or c in "\n" else f"\\x{ord(c):02x}" for c in text)


# Width of docstring text: black leaves docstrings alone, so symgrad wraps them to fit 88.
_DOCSTRING_WIDTH = 80


def _docstring(text: str, indent: int, closing: bool = True) -> str:
    """The escaped text of a docstring, wrapped to fit, indented for its place.

    With `closing`, a docstring of several lines ends with a newline and the indent, so
    that the closing quotes stand on their own line.
    """
    lines: list[str] = []
    for paragraph in escape_docstring(text.strip()).split("\n"):
        lines += textwrap.wrap(paragraph, _DOCSTRING_WIDTH - indent, break_on_hyphens=False) or [""]
    if len(lines) == 1:
        return lines[0]
    margin = "\n" + " " * indent
    return margin.join(lines) + (margin if closing else "")


def _header(source: str, version: str) -> list[str]:
    """The generated-file header; a line that a long path makes too long says so to ruff."""
    lines = [
        f"# Generated by symgrad {version} from {source}. Do not edit:",
        f"# change the spec and run `symgrad gen {source}` again.",
    ]
    return [line + "  # noqa: E501" if len(line) > 88 else line for line in lines]


def escape_comment(text: str) -> str:
    """Text that stays inside one `#` comment line."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


class _BackwardNames:
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
            for role in ("sum_to", "reduced_shape", "count", "expand_to", "fill_tangents")
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


def _summary(spec: Spec) -> str:
    if spec.doc:
        return spec.doc.strip().splitlines()[0]
    return f"{spec.name}: a custom autograd Function generated by symgrad."


def _formulas(derived: Derived) -> dict[str, list[str]]:
    """Readable forward and derivative formulas for the module docstring."""
    spec = derived.spec
    readable = _ReadablePrinter({"order": "none"})
    readable.definitions = {a.target: a.expr for a in derived.forward}
    readable.shapes = reductions.Shapes(
        readable.definitions, {i.symbol for i in spec.tensor_inputs}
    )
    forward = [f"{i.name} = {readable.doprint(i.expr)}" for i in spec.intermediates]
    forward += [f"{o.name} = {readable.doprint(o.expr)}" for o in spec.outputs]
    grads = {part.output.name: part.grad for part in derived.backward}
    derivatives = []
    for (output, name), expr in derived.partials.items():
        if expr is None:
            derivatives.append(f"d{output}/d{name} = (long; see backward)")
        elif grads[output] in expr.free_symbols:  # a vector-Jacobian product
            derivatives.append(f"grad_{name} from {output} = {readable.doprint(expr)}")
        else:
            derivatives.append(f"d{output}/d{name} = {readable.doprint(expr)}")
    return {
        "forward": [part for line in forward for part in _wrap_formula(line)],
        "derivatives": [part for line in derivatives for part in _wrap_formula(line)],
    }


# Docstring formulas wrap at this width and are cut after this many characters.
_FORMULA_WIDTH = 84
_FORMULA_MAX_CHARS = 600


class _ReadablePrinter(StrPrinter):
    """sympy's str form, with conditionals written as in a spec: where(x != 0, ...)."""

    def _print_Where(self, expr: sympy.Basic) -> str:
        return "where({}, {}, {})".format(*(self._print(arg) for arg in expr.args))

    def _print_Relational(self, expr: sympy.Basic) -> str:
        lhs, rhs = (self._print(arg) for arg in expr.args)
        return f"{lhs} {expr.rel_op} {rhs}"

    def _print_Function(self, expr: sympy.Basic) -> str:
        if isinstance(expr, piecewise.Kink):  # relu, clamp, the activations: spec names
            return f"{expr.name}({', '.join(self._print(a) for a in expr.args)})"
        text: str = super()._print_Function(expr)
        return text

    # Forward values by name, to print the shape of a named reduction.
    definitions: Mapping[sympy.Basic, sympy.Basic] = {}
    shapes = reductions.Shapes({}, ())

    def _reduction(self, name: str, argument: str, dims: Any, keepdim: bool) -> str:
        dim = "" if dims is None else f", dim={dims[0] if len(dims) == 1 else list(dims)}"
        return f"{name}({argument}{dim}{', keepdim=True' if keepdim else ''})"

    def _print_Reduction(self, expr: Any) -> str:
        return self._reduction(expr.name, self._print(expr.argument), expr.dims, expr.keepdim)

    _print_ReduceSum = _print_ReduceMean = _print_ReduceLogSumExp = _print_Reduction

    def _print_Normalization(self, expr: Any) -> str:
        return f"{expr.name}({self._print(expr.argument)}, dim={expr.dim})"

    _print_Softmax = _print_LogSoftmax = _print_Normalization

    def _print_SumTo(self, expr: Any) -> str:
        """A sum to the shape of a value (symgrad.language.reductions.SumTo), as torch writes it."""
        value, target = expr.args[:2]
        reduction = reductions.summed_reduction(expr, self.shapes)
        if reduction is not None:
            return self._reduction("sum", self._print(value), reduction.dims, reduction.keepdim)
        return f"sum_to({self._print(value)}, {self._print(target.argument)})"

    def _print_Unsqueeze(self, expr: Any) -> str:
        dims = ", ".join(str(d) for d in expr.dims)
        return f"unsqueeze({self._print(expr.args[0])}, {dims})"

    def _print_Count(self, expr: Any) -> str:
        dims = "" if expr.dims is None else f", dim={list(expr.dims)}"
        return f"numel({self._print(expr.argument)}{dims})"


def _wrap_formula(line: str) -> list[str]:
    """Wrap a `name = formula` line for the docstring, eliding very long formulas."""
    if len(line) > _FORMULA_MAX_CHARS:
        line = line[:_FORMULA_MAX_CHARS].rsplit(" ", 1)[0] + " ..."
    return textwrap.wrap(
        line, _FORMULA_WIDTH, subsequent_indent="    ", break_on_hyphens=False
    ) or [line]


def _parameter(item: Input) -> str:
    text = f"{item.name}: {_ANNOTATIONS[item.type]}"
    if item.default is not None:
        text += f" = {item.default!r}"
    return text


def _return_annotation(count: int) -> str:
    if count == 1:
        return "torch.Tensor"
    return "tuple[" + ", ".join("torch.Tensor" for _ in range(count)) + "]"


def _statement(assignment: Assignment, printer: TorchPrinter) -> str:
    return f"{printer.doprint(assignment.target)} = {printer.doprint(assignment.expr)}"


def _forward_statement(assignment: Assignment, derived: Derived, printer: TorchPrinter) -> str:
    """A forward statement; an output that is a tensor input is returned as a view of it.

    torch refuses to save an input that a Function returns as-is; a view is cheap. A
    non-differentiable output that renames a value is returned detached (no copy): the
    value may be another output or a residual too, and marking the one tensor
    non-differentiable would cut that one's gradient.
    """
    name = printer.doprint(assignment.expr)
    if assignment.expr in {i.symbol for i in derived.spec.tensor_inputs}:
        return f"{printer.doprint(assignment.target)} = {name}.view_as({name})"
    constant = {o.symbol for o in derived.spec.outputs if not o.differentiable}
    if assignment.target in constant and assignment.expr.is_Symbol:
        return f"{printer.doprint(assignment.target)} = {name}.detach()"
    # A residual that renames a value an output may rename too: one tensor returned
    # twice breaks forward AD, and a residual is small, so it gets its own copy.
    if assignment.target in {o.symbol for o in derived.residuals} and assignment.expr.is_Symbol:
        return f"{printer.doprint(assignment.target)} = {name}.clone()"
    return _statement(assignment, printer)


def _all_statements(derived: Derived) -> list[Assignment]:
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


def _small_symbols(derived: Derived) -> frozenset[sympy.Basic]:
    """Tensors of a reduced shape: residuals, and values computed only from them."""
    small: set[sympy.Basic] = {o.symbol for o in derived.residuals}
    tensors = derived.tensor_symbols
    for statement in _all_statements(derived):
        read = statement.expr.free_symbols & tensors
        reduced = isinstance(statement.expr, (reductions.Reduction, reductions.SumTo))
        if reduced or (read and read <= small):
            small.add(statement.target)
    return frozenset(small)


def _condition_temporaries(derived: Derived) -> dict[sympy.Basic, sympy.Basic]:
    """Statements whose value is a condition (a boolean tensor), by target."""
    return {s.target: s.expr for s in _all_statements(derived) if is_condition(s.expr)}


def _temporary_names(derived: Derived) -> dict[sympy.Basic, str]:
    """Rename symgrad's temporaries `_t0`, `_t1`, ... in the order the module defines them."""
    statements = _all_statements(derived)
    taken = derived.names - {t.name for t in derived.temporaries}
    numbers = (f"_t{n}" for n in itertools.count())
    renames: dict[sympy.Basic, str] = {}
    for statement in statements:
        if statement.target in derived.temporaries and statement.target not in renames:
            renames[statement.target] = next(name for name in numbers if name not in taken)
    return renames


def _block(block: GuardedBlock, printer: TorchPrinter, names: _BackwardNames) -> dict[str, Any]:
    return {
        "guard": names.guard(block.inputs),
        "lines": [_statement(a, printer) for a in block.statements],
    }


def _output_backward(
    part: OutputBackward, printer: TorchPrinter, names: _BackwardNames, several: bool
) -> dict[str, Any]:
    """The guarded blocks that add one output's contribution to each input gradient."""
    blocks = [_block(b, printer, names) for b in part.shared]
    for gradient in part.gradients:
        target = names.grad[gradient.input.name]
        term = printer.doprint(gradient.expr)
        if several:
            term = f"{names.accumulate_helper}({target}, {term})"
        lines = [_statement(a, printer) for a in gradient.statements]
        blocks.append(
            {"guard": names.guard([gradient.input]), "lines": [*lines, f"{target} = {term}"]}
        )
    return {"grad": part.grad.name, "blocks": _merge_blocks(blocks)}


def _custom_op_context(derived: Derived, namer: Namer) -> dict[str, Any]:
    """The operator `symgrad::<module>`: its name, Python function and parameters.

    Its parameters have no defaults: the dispatcher drops arguments equal to their
    default, and the backward's needs_input_grad must line up with every input.
    """
    spec = derived.spec
    return {
        "name": f"symgrad::{spec.module}",
        "function": namer.fresh(f"_{spec.module}_op"),
        "parameters": [f"{i.name}: {_ANNOTATIONS[i.type]}" for i in spec.inputs],
    }


def _fused_context(
    derived: Derived, names: _BackwardNames, printer: TorchPrinter, namer: Namer
) -> dict[str, Any]:
    """Names for fused mode: the compiled bodies and what the backward body reads."""
    arguments = [
        *(printer.doprint(s) for s in derived.saved_tensors),
        *(i.name for i in derived.saved_numbers),
        *names.shape_names,
        *(printer.doprint(a.target) for a in derived.shape_facts),
        *(part.grad.name for part in derived.backward),
        *names.need.values(),
    ]
    return {
        "compiled": namer.fresh("_compiled"),
        "use_compiled": namer.fresh("_use_compiled"),
        "arguments": arguments,
    }


def _has_jvp(derived: Derived) -> bool:
    """Whether the Function gets a jvp: some input has a tangent that reaches an output."""
    jvp = derived.jvp
    if jvp is None or all(t is None for t in jvp.tangents):
        return False
    return any(t is not None and t != 0 for t in jvp.outputs)


def _jvp_context(
    derived: Derived, printer: TorchPrinter, names: _BackwardNames, namer: Namer
) -> dict[str, Any]:
    """The jvp staticmethod: tangent parameters, statements and the output tangents."""
    jvp = derived.jvp
    if jvp is None or not _has_jvp(derived):
        return {"jvp": None}
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
    return {
        "jvp": {
            "parameters": parameters,
            "saved_tensors": [printer.doprint(s) for s in jvp.saved_tensors],
            "lines": [_statement(a, printer) for a in jvp.statements],
            "returns": returns,
            "output_shapes": shapes,
            "filled": filled,
            "tangent_inputs": [
                i.name
                for t, i in zip(jvp.tangents, derived.spec.inputs, strict=True)
                if t is not None
            ],
            "reads_shape_facts": bool(facts & read),
        },
        "output_shapes_attribute": names.output_shapes_attribute,
        "tangent_shapes_attribute": "tangent_shapes",
        "traceable_class": namer.fresh(f"_{derived.spec.name}Traceable"),
    }


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
    derived: Derived, printer: TorchPrinter, helpers: Mapping[str, str]
) -> list[str]:
    """`name = ...` computing each `ShapeFact` (symgrad.language.reductions) from the inputs."""
    definitions = {a.target: a.expr for a in derived.forward}
    tensors = {i.symbol for i in derived.spec.tensor_inputs}
    lines = []
    for fact in derived.shape_facts:
        code = _shape_code(reductions.shape_of(fact.expr.args[0], definitions, tensors), helpers)
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
        return f"torch.broadcast_shapes({', '.join(_shape_code(s, helpers) for s in shape[1])})"
    _, inner, dims, keepdim = shape
    dims_code = "None" if dims is None else repr(dims)
    return (
        f"{helpers['reduced_shape']}({_shape_code(inner, helpers)}, {dims_code}, keepdim={keepdim})"
    )


# --- The generated test -------------------------------------------------------------

_DEFAULT_DOMAINS = {
    "positive": (0.5, 2.0),
    "nonnegative": (0.5, 2.0),
    "nonzero": (0.5, 2.0),
    "negative": (-2.0, -0.5),
}
_UNCONSTRAINED_DOMAIN = (-2.0, 2.0)


def default_domain(item: Input) -> tuple[float, float]:
    """The interval the generated test samples `item` from when the spec gives none."""
    if item.domain is not None:
        return item.domain
    for assumption in item.assumptions:
        if assumption in _DEFAULT_DOMAINS:
            return _DEFAULT_DOMAINS[assumption]
    return _UNCONSTRAINED_DOMAIN


def default_shape(spec: Spec) -> tuple[int, ...]:
    """The test shape of tensors declared without one.

    It is the broadcast of the declared shapes, padded on the left to two dimensions, with
    size-1 leading dimensions widened to 3 so that broadcasting is exercised; (3, 4) when
    no input declares a shape with dimensions.
    """
    shapes = [i.shape for i in spec.tensor_inputs if i.shape]
    if not shapes:
        return (3, 4)
    rank = max(2, *(len(s) for s in shapes))
    result = [1] * rank
    for shape in shapes:
        for index, size in enumerate(shape, start=rank - len(shape)):
            result[index] = max(result[index], size)
    return tuple(3 if size == 1 and index < rank - 1 else size for index, size in enumerate(result))


def _boundaries(spec: Spec, test_values: Mapping[str, str]) -> list[tuple[str, str]]:
    """(input, value) for each branch boundary or kink of a tensor input at a number.

    These are the points the generated test probes: where(x > lo, ...) at lo,
    relu(x) and abs(x) at 0, clamp(x, lo, hi) at lo and hi, max(x, c) at c.
    """
    tensors = {i.symbol: i for i in spec.tensor_inputs}
    numbers = {i.symbol: sympy.sympify(test_values[i.name]) for i in spec.inputs if not i.is_tensor}
    found: dict[tuple[str, str], None] = {}

    def add(side: sympy.Basic, other: sympy.Basic) -> None:
        if side in tensors and not other.free_symbols & tensors.keys():
            value = sympy.sympify(other).xreplace(numbers)
            if value.is_number and value.is_finite and value.is_real:
                found[(tensors[side].name, repr(float(value)))] = None

    for expr in [*(i.expr for i in spec.intermediates), *(o.expr for o in spec.outputs)]:
        for relation in expr.atoms(Relational):
            add(relation.lhs, relation.rhs)
            add(relation.rhs, relation.lhs)
        for kink in expr.atoms(piecewise.Kink):
            for argument, value in kink.breakpoints():
                add(argument, value)
        for call in expr.atoms(functions.ElementwiseFunction):
            if type(call).__name__ in ("abs", "sign"):
                add(call.args[0], sympy.Integer(0))
    return list(found)


def unique_names(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _overridden_reference(spec: Spec, printer: TorchPrinter) -> list[str]:
    """Reference outputs whose gradient follows the spec's overrides.

    An output y with an override O for input x is recomputed as
    y(x.detach()) + (x - x.detach()) * O.detach(): the same value, and autograd then
    gives grad_y * O for x (summed over broadcasting), and y's own gradient for the rest.
    """
    values = {i.symbol: i.expr for i in spec.intermediates}
    values.update({o.symbol: o.expr for o in spec.outputs})

    def inline(expr: sympy.Expr) -> sympy.Expr:
        while expr.free_symbols & values.keys():
            expr = expr.xreplace(values)
        return expr

    lines = []
    for output in spec.outputs:
        overrides = [o for o in spec.overrides if o.output == output]
        if not overrides:
            continue
        detached = {o.input.symbol: sympy.Symbol(f"{o.input.name}.detach()") for o in overrides}
        surrogate_printer = TorchPrinter(printer.tensor_symbols | frozenset(detached.values()))
        tensors = surrogate_printer.tensor_symbols
        formula = guards.guard_branches(inline(output.expr).xreplace(detached), tensors)
        terms = [surrogate_printer.doprint(formula)]
        for override in overrides:
            derivative = surrogate_printer.doprint(
                guards.guard_branches(inline(override.expr), tensors)
            )
            if surrogate_printer.is_tensor(inline(override.expr)):
                derivative = f"({derivative}).detach()"
            name = override.input.name
            terms.append(f"({name} - {name}.detach()) * {derivative}")
        lines.append(f"{output.name} = " + " + ".join(terms))
    return lines


def _sample_number(item: Input, rng: random.Random) -> str:
    """A fixed test value for a number input without a default."""
    if item.type is InputType.BOOL:
        return "True"
    low, high = default_domain(item)
    if item.type is InputType.INT:
        return repr(max(int(low), min(int(high), round((low + high) / 2))) or 1)
    return repr(round(rng.uniform(low, high), 3))


def _test_context(derived: Derived, printer: TorchPrinter, version: str) -> dict[str, Any]:
    spec = derived.spec
    rng = random.Random(spec.name)
    shape = default_shape(spec)
    samples = []
    for item in spec.inputs:
        if item.is_tensor:
            low, high = default_domain(item)
            samples.append(
                {
                    "name": item.name,
                    "tensor": True,
                    "shape": repr(shape if item.shape is None else tuple(item.shape)),
                    "low": repr(low),
                    "high": repr(high),
                    "requires_grad": item.differentiable,
                }
            )
        else:
            value = item.default if item.default is not None else _sample_number(item, rng)
            samples.append({"name": item.name, "tensor": False, "value": str(value)})
    test_values = {str(s["name"]): str(s["value"]) for s in samples if not s["tensor"]}
    # The formula as written, with torch's own relu, maximum and clamp, and untaken
    # branches guarded so that autograd of torch.where gives no NaN (symgrad.language.piecewise).
    tensors = derived.tensor_symbols

    def plain(expr: sympy.Expr) -> str:
        return str(printer.doprint(guards.guard_branches(expr, tensors)))

    reference = [f"{i.name} = {plain(i.expr)}" for i in spec.intermediates]
    overridden_outputs = {o.output.name for o in spec.overrides}
    reference += [
        f"{o.name} = {plain(o.expr)}" for o in spec.outputs if o.name not in overridden_outputs
    ]
    reference += _overridden_reference(spec, printer)
    overridden = unique_names(o.input.name for o in spec.overrides)
    return {
        "version": version,
        "header": _header(escape_comment(spec.source), version),
        "class_name": spec.name,
        "function_name": spec.module,
        "module": spec.module,
        "samples": samples,
        "input_names": [i.name for i in spec.inputs],
        "reference": reference,
        "boundaries": [f"({name!r}, {value})" for name, value in _boundaries(spec, test_values)],
        "overridden": overridden,
        "gradcheck_inputs": [
            i.name for i in spec.differentiable_inputs if i.name not in overridden
        ],
        "outputs": [o.name for o in spec.outputs],
        "uses_math": printer.uses_math,
        "has_gradients": any(part.gradients for part in derived.backward),
        "fused": spec.mode == "fused",
        "custom_op": _custom_op_context(derived, Namer(derived.names)) if spec.custom_op else None,
        "has_jvp": _has_jvp(derived),
        "test_doc": _docstring(
            f"Check {spec.name} with gradcheck and against autograd of the plain formula.",
            indent=0,
        ),
        "differentiable_outputs": [str(n) for n, o in enumerate(spec.outputs) if o.differentiable],
        "low_precision": _low_precision(spec),
        "tolerances": _tolerances(spec),
        "points": spec.checks.points,
    }


# The largest finite float16: a test domain beyond it overflows when sampled.
_FLOAT16_MAX = 65504.0


def _low_precision(spec: Spec) -> list[str]:
    """The checked low-precision dtypes; a skipped one as a pytest.param with its reason."""
    reasons = dict(spec.checks.skips)
    for item in spec.tensor_inputs:
        low, high = default_domain(item)
        if "float16" not in reasons and max(abs(low), abs(high)) > _FLOAT16_MAX:
            reasons["float16"] = (
                f"float16 cannot hold the test domain [{low}, {high}] of {item.name}"
            )
    return [
        (
            f"pytest.param(torch.{dtype}, marks=pytest.mark.skip(reason={reasons[dtype]!r}))"
            if dtype in reasons
            else f"torch.{dtype}"
        )
        for dtype in spec.checks.dtypes
    ]


def _tolerances(spec: Spec) -> str:
    """The spec's tolerances as a dict display: {torch.float32: {"rtol": ..., "atol": ...}}."""
    entries = [
        f'torch.{dtype}: {{"rtol": {t.rtol!r}, "atol": {t.atol!r}}}'
        for dtype, t in spec.checks.tolerances
    ]
    return "{" + ", ".join(entries) + "}"
