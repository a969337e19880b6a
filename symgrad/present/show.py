"""Describe a spec's mathematics for review: forward, partial derivatives, what is saved.

`symgrad show` prints this before anyone reads generated code: the formulas as sympy's
unicode pretty printer draws them (or as LaTeX), written with the spec's own function
names (`where`, `relu`, `max`, ...) and the user's names verbatim.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import sympy
from sympy.printing.latex import LatexPrinter, accepted_latex_functions
from sympy.printing.pretty.pretty import PrettyPrinter
from sympy.printing.pretty.stringpict import prettyForm

from symgrad.ad.derive import derive
from symgrad.ad.ir import Derived
from symgrad.frontend.model import Input, Output, Spec
from symgrad.frontend.options import describe_values, variants
from symgrad.language.piecewise import Where
from symgrad.language.reductions import Shapes, SumTo, reduce, summed_reduction
from symgrad.present.arguments import keywords, piece, spec_name

# What `show` prints for a derivative too long to be worth reading.
LONG_PARTIAL = "long; see the generated backward"


def describe(spec: Spec, *, latex: bool = False, width: int = 100) -> str:
    """Describe `spec`'s forward, derivatives and saved values, so its maths can be reviewed.

    Unicode pretty print by default (wrapped at `width` columns), LaTeX with `latex`. A
    spec with options is described variant by variant, each under its option values.
    """
    found = variants(spec)
    if found[0].values:
        comment = "% " if latex else ""
        return "\n\n".join(
            f"{comment}{v.spec.name}, where {describe_values(v.values)}:\n"
            + describe(v.spec, latex=latex, width=width)
            for v in found
        )
    derived = derive(spec)
    if latex:
        return _describe_latex(derived)
    return _describe_pretty(derived, width)


def _describe_pretty(derived: Derived, width: int) -> str:
    """The plain-text description: headed sections of pretty-printed formulas."""
    spec = derived.spec
    printer = _PrettyPrinter(width - len(_INDENT))
    sections = [
        f"{spec.name} ({spec.source})",
        _section("Inputs", [_input_line(i, printer.alias(i.name)) for i in spec.inputs]),
        _section(
            "Forward", [printer.equation(f"{printer.name(n)} = ", e) for n, e in _forward(spec)]
        ),
        _section("Derivatives", _pretty_partials(derived, printer)),
        _section("Backward saves", _saved_lines(derived)),
    ]
    return "\n\n".join(sections) + "\n"


def _describe_latex(derived: Derived) -> str:
    """The LaTeX description: `align*` blocks, with everything else in `%` comments."""
    spec = derived.spec
    printer = _LatexPrinter()
    forward = [f"{printer.name(n)} &= {printer.doprint(e)}" for n, e in _forward(spec)]
    lines = [f"% {spec.name} ({spec.source})", "% Inputs:"]
    lines += [f"%   {_input_line(i, printer.alias(i.name))}" for i in spec.inputs]
    lines += ["% Forward", *_align(forward), "% Derivatives"]
    lines += _align(_latex_partials(derived, printer)) + _latex_notes(derived)
    lines += ["% Backward saves:", *(f"%   {line}" for line in _saved_lines(derived))]
    return "\n".join(lines) + "\n"


_INDENT = "  "


def _section(title: str, blocks: Sequence[str]) -> str:
    """`title` above its indented blocks; a blank line between blocks of several lines."""
    if not blocks:
        blocks = ["none"]
    separator = "\n\n" if any("\n" in block for block in blocks) else "\n"
    body = separator.join(_indent(block) for block in blocks)
    return f"{title}\n{body}"


def _indent(block: str) -> str:
    return "\n".join(f"{_INDENT}{line}".rstrip() for line in block.split("\n"))


def _align(rows: Sequence[str]) -> list[str]:
    """LaTeX rows in an `align*` environment, or a comment when there are none."""
    if not rows:
        return ["% none"]
    body = [f"{row} \\\\" for row in rows[:-1]] + [rows[-1]]
    return ["\\begin{align*}", *body, "\\end{align*}"]


def _forward(spec: Spec) -> list[tuple[str, sympy.Expr]]:
    """The spec's `where` intermediates and outputs as (name, expression)."""
    named = [(i.name, i.expr) for i in spec.intermediates]
    return named + [(o.name, o.expr) for o in spec.outputs]


def _input_line(item: Input, alias: str | None) -> str:
    """`name (as formulas show it): type = default (notes)` for one input."""
    text = item.name if alias is None else f"{item.name} ({alias})"
    text += f": {item.type.value}"
    if item.default is not None:
        text += f" = {item.default}"
    notes = list(item.assumptions)
    if item.is_tensor and not item.differentiable:
        notes.append("no gradient")
    if item.shape is not None:
        notes.append(f"test shape {list(item.shape)}")
    return f"{text} ({', '.join(notes)})" if notes else text


def _pretty_partials(derived: Derived, printer: _PrettyPrinter) -> list[str]:
    """`∂y/∂x = ...` for each partial derivative, then the outputs without a gradient."""
    blocks = []
    for (output, name), expr in _partials(derived):
        if _is_product(derived, output, expr):
            label = f"grad_{name} from {printer.name(output)} = "
        else:
            label = f"∂{printer.name(output)}/∂{printer.name(name)} = "
        blocks.append(label + LONG_PARTIAL if expr is None else printer.equation(label, expr))
        if _is_override(derived.spec, output, name):
            blocks[-1] += f"\n  (given in the spec: gradients.{output}.{name})"
    return blocks + [f"{o.name}: not differentiable" for o in _constant_outputs(derived.spec)]


def _latex_partials(derived: Derived, printer: _LatexPrinter) -> list[str]:
    """`\\frac{\\partial y}{\\partial x} &= ...` rows, one per partial derivative."""
    rows = []
    for (output, name), expr in _partials(derived):
        top, bottom = printer.name(output), printer.name(name)
        value = f"\\text{{{LONG_PARTIAL}}}" if expr is None else printer.doprint(expr)
        if _is_product(derived, output, expr):
            label = f"\\text{{grad of }} {bottom} \\text{{ from }} {top}"
        else:
            label = f"\\frac{{\\partial {top}}}{{\\partial {bottom}}}"
        rows.append(f"{label} &= {value}")
    return rows


def _partials(derived: Derived) -> list[tuple[tuple[str, str], sympy.Expr | None]]:
    """derive()'s partials, with the backward's shape helpers written as a spec would."""
    definitions = {a.target: a.expr for a in derived.forward}
    shapes = Shapes(definitions, {i.symbol for i in derived.spec.tensor_inputs})
    return [
        (key, None if expr is None else _readable(expr, shapes))
        for key, expr in derived.partials.items()
    ]


def _is_product(derived: Derived, output: str, expr: sympy.Expr | None) -> bool:
    """True for a vector-Jacobian product, which derive() gives through reductions.

    It is written in terms of the output's incoming gradient (grad_y), so it is the
    input's gradient from that output rather than a partial derivative.
    """
    grads = [part.grad for part in derived.backward if part.output.name == output]
    return expr is not None and any(grad in expr.free_symbols for grad in grads)


def _readable(expr: sympy.Expr, shapes: Shapes) -> sympy.Expr:
    """`expr` with each SumTo written as the sum over a reduction's dims, where it is one."""

    def as_sum(node: Any) -> Any:
        reduction = summed_reduction(node, shapes)
        if reduction is not None:
            return reduce("sum", node.value, reduction.dims, reduction.keepdim)
        return _SUM_TO(node.value, node.target.argument)

    result: sympy.Expr = expr.replace(lambda node: isinstance(node, SumTo), as_sum)
    return result


# `sum_to(v, e)`: v summed over the dimensions it was broadcast along, to the shape of e.
_SUM_TO = sympy.Function("sum_to")


def _latex_notes(derived: Derived) -> list[str]:
    """Comments on gradients the spec gives itself and on outputs without a gradient."""
    notes = [
        f"% d{output}/d{name} is given in the spec: gradients.{output}.{name}"
        for output, name in derived.partials
        if _is_override(derived.spec, output, name)
    ]
    return notes + [f"% {o.name}: not differentiable" for o in _constant_outputs(derived.spec)]


def _is_override(spec: Spec, output: str, name: str) -> bool:
    return any(o.output.name == output and o.input.name == name for o in spec.overrides)


def _constant_outputs(spec: Spec) -> list[Output]:
    return [o for o in spec.outputs if not o.differentiable]


def _saved_lines(derived: Derived) -> list[str]:
    """What `setup_context` keeps for the backward, and what the backward recomputes."""
    entries = [
        f"tensors (save_for_backward): {_names(str(s) for s in derived.saved_tensors)}",
        f"numbers (ctx.numbers): {_names(i.name for i in derived.saved_numbers)}",
        f"shapes only: {_names(i.name for i in derived.saved_shapes)}",
        f"residuals (extra forward outputs): {_names(o.name for o in derived.residuals)}",
        "saved values (extra non-differentiable outputs): "
        + _names(o.name for o in derived.saved_values),
        f"recomputed in the backward: {_names(_recomputed(derived))}",
    ]
    # Long lists continue indented, within 80 columns under either section prefix.
    return [line for entry in entries for line in textwrap.wrap(entry, 76, subsequent_indent="  ")]


def _names(names: Iterable[str]) -> str:
    return ", ".join(names) or "none"


def _recomputed(derived: Derived) -> list[str]:
    """The spec's `where` names that the backward computes again from what was saved."""
    blocks = list(derived.prelude)
    for part in derived.backward:
        blocks += part.shared
    targets = {a.target for block in blocks for a in block.statements}
    targets |= {a.target for part in derived.backward for g in part.gradients for a in g.statements}
    return [i.name for i in derived.spec.intermediates if i.symbol in targets]


def _as_piecewise(expr: Any) -> sympy.Piecewise:
    """`where(c1, a, where(c2, b, d))` as sympy's Piecewise, which printers draw as cases."""
    cases = []
    while isinstance(expr, Where):
        cond, value, expr = expr.args
        cases.append((value, cond))
    return sympy.Piecewise(*cases, (expr, True), evaluate=False)


def _has_verbatim_name(symbol: sympy.Symbol) -> bool:
    """True for names sympy would misprint as sub- or superscripts (`r2`, `forward_value`)."""
    return not symbol.name.isalpha()


class _PrettyPrinter(PrettyPrinter):
    """sympy's unicode pretty printer, speaking the spec language."""

    def __init__(self, width: int) -> None:
        super().__init__({"use_unicode": True, "wrap_line": True, "num_columns": width})

    def equation(self, label: str, expr: sympy.Expr) -> str:
        """`label` followed by `expr`, on the baseline of the expression."""
        form = prettyForm(*self._print(expr).left(label))
        text: str = form.render(**self._settings)
        return text

    def name(self, name: str) -> str:
        """How formulas show the symbol `name` (`beta` as β)."""
        text: str = self.doprint(sympy.Symbol(name))
        return text

    def alias(self, name: str) -> str | None:
        """How formulas show `name`, where that is not the name itself."""
        shown = self.name(name)
        return None if shown == name else shown

    def _print_Symbol(self, expr: sympy.Symbol, bold: bool = False) -> prettyForm:
        if _has_verbatim_name(expr):
            return prettyForm(expr.name)
        return super()._print_Symbol(expr, bold)

    def _print_Function(
        self, expr: Any, sort: bool = False, func_name: Any = None, **kw: Any
    ) -> Any:
        shown = keywords(expr)
        if shown is None:
            return super()._print_Function(expr, sort, func_name or spec_name(expr), **kw)
        form = self._helper_print_function(expr.func, shown, func_name=spec_name(expr))
        subscript = piece(expr)
        return form if subscript is None else prettyForm(*form.right(f"[{subscript}]"))

    def _print_Listed(self, expr: Any) -> prettyForm:
        return self._print_seq(expr.args, "[", "]")

    def _print_ShapeOf(self, expr: Any) -> prettyForm:
        return self._helper_print_function(expr.func, expr.args, func_name="shape")

    def _print_Where(self, expr: Any) -> prettyForm:
        return self._print(_as_piecewise(expr))


class _LatexPrinter(LatexPrinter):
    """sympy's LaTeX printer, speaking the spec language."""

    def name(self, name: str) -> str:
        """How formulas show the symbol `name` (`beta` as \\beta)."""
        text: str = self.doprint(sympy.Symbol(name))
        return text

    def alias(self, name: str) -> str | None:
        """How formulas show `name` (in $...$), where that is not the name as a word."""
        shown = self.name(name)
        return None if shown in (name, _word(name)) else f"${shown}$"

    def _print_Symbol(self, expr: sympy.Symbol, style: str = "plain") -> str:
        text: str = super()._print_Symbol(expr, style)
        if "=" in expr.name:  # a keyword argument, dim=-1
            name, value = expr.name.split("=")
            shown = (
                _word(value) if value.isidentifier() and value not in ("True", "False") else value
            )
            return f"\\mathrm{{{name}}}={shown}"
        if _has_verbatim_name(expr) or (text == expr.name and len(text) > 1):
            return _word(expr.name)  # a word, not a product of letters
        return text

    def _print_Function(self, expr: Any, exp: Any = None) -> str:
        name = spec_name(expr)
        if name is None:
            text: str = super()._print_Function(expr, exp)
            return text
        args = ", ".join(self._print(arg) for arg in keywords(expr) or expr.args)
        subscript = piece(expr)
        after = "" if subscript is None else f"\\left[{subscript}\\right]"
        return _power(f"{_operator(name)}{{\\left({args} \\right)}}{after}", exp)

    def _print_ShapeOf(self, expr: Any, exp: Any = None) -> str:
        return f"{_operator('shape')}{{\\left({self._print(expr.args[0])} \\right)}}"

    def _print_Listed(self, expr: Any, exp: Any = None) -> str:
        return "\\left[" + ", ".join(self._print(arg) for arg in expr.args) + "\\right]"

    def _print_Str(self, expr: Any) -> str:
        """An einsum's subscripts, as typed: letters, commas and '->'."""
        return f"\\texttt{{{expr}}}"

    def _hprint_Function(self, func: str) -> str:
        if func in accepted_latex_functions:
            return f"\\{func}"
        return _operator(func)

    def _print_Where(self, expr: Any, exp: Any = None) -> str:
        return _power(self._print(_as_piecewise(expr)), exp)


def _power(text: str, exp: Any) -> str:
    """`text`, raised to `exp` when sympy's printer passes an exponent along."""
    return text if exp is None else f"\\left({text}\\right)^{{{exp}}}"


def _word(name: str) -> str:
    return f"\\mathit{{{_escape(name)}}}"


def _operator(name: str) -> str:
    return f"\\operatorname{{{_escape(name)}}}"


def _escape(name: str) -> str:
    return name.replace("_", "\\_")
