"""Validate a spec (YAML nodes or a plain dict) and build the frozen `Spec` model.

Each section pops the keys it knows; anything left over is an error that lists the
allowed keys. Every error names the file, line and column of the offending value.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import sympy
from sympy.core.facts import InconsistentAssumptions

from symgrad.errors import Location, SpecError, did_you_mean
from symgrad.frontend import expr as expressions
from symgrad.frontend import fields as read
from symgrad.frontend import indices, names, options, views
from symgrad.frontend.checks import parse_checks
from symgrad.frontend.contractions import check_contractions
from symgrad.frontend.from_sympy import from_sympy
from symgrad.frontend.loader import Node
from symgrad.frontend.model import (
    INCOMING_GRAD,
    GradientOverride,
    Input,
    InputType,
    Intermediate,
    Number,
    Output,
    Spec,
    Target,
)
from symgrad.language import arg_extrema, indexing

TOP_KEYS = (
    "name",
    "module",
    "doc",
    "mode",
    "save",
    "custom_op",
    "inplace",
    "target",
    "inputs",
    "where",
    "outputs",
    "gradients",
    "test",
)
_TARGET_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
# How the generated Function runs its forward and backward (see Spec.mode).
MODES = ("eager", "fused")
# What the backward saves (Note [Save choices] in symgrad.ad.saving).
SAVES = ("balanced", "memory", "speed")
OUTPUT_KEYS = ("expr", "differentiable")
INPUT_KEYS = ("type", "assume", "shape", "domain", "requires_grad", "default", *options.KEYS)
ASSUMPTIONS = ("positive", "nonnegative", "negative", "nonzero", "real")


def node_from_data(data: Any, source: str) -> Node:
    """Wrap plain Python data (a dict from the API) as location-less nodes."""
    location = Location(source)
    if isinstance(data, Mapping):
        items = {str(k): node_from_data(v, source) for k, v in data.items()}
        return Node(items, location, {k: location for k in items})
    if isinstance(data, (list, tuple)):
        return Node([node_from_data(v, source) for v in data], location)
    return Node(data, location)


def parse_spec(root: Node, source: str) -> Spec:
    """Validate the spec tree `root` and return the model; `source` goes in the header."""
    fields = read.Section(root, "", TOP_KEYS)
    name_node = fields.require("name")
    name = names.class_name(name_node)
    module_node = fields.optional("module")
    module = (
        names.module_name(module_node) if module_node else names.derived_module(name_node, name)
    )
    doc_node = fields.optional("doc")
    doc = read.string(doc_node, "doc") if doc_node else ""
    mode_node = fields.optional("mode")
    mode = _choice(mode_node, "mode", MODES) if mode_node else "eager"
    save_node = fields.optional("save")
    save = _choice(save_node, "save", SAVES) if save_node else "balanced"
    custom_op_node = fields.optional("custom_op")
    custom_op = read.flag(custom_op_node, "custom_op") if custom_op_node else False
    inplace_node = fields.optional("inplace")
    inplace = read.flag(inplace_node, "inplace") if inplace_node else False
    target_node = fields.optional("target")
    target = _target(target_node) if target_node else None
    inputs = _parse_inputs(fields.require("inputs"), name)
    checks, inputs = parse_checks(fields.optional("test"), inputs)
    symbols: dict[str, sympy.Symbol] = options.SymbolTable(inputs)
    where_node = fields.optional("where")
    outputs_node = fields.require("outputs")
    output_names = list(outputs_node.value) if isinstance(outputs_node.value, dict) else []
    intermediates = _parse_where(where_node, symbols, name, output_names) if where_node else ()
    outputs = _parse_outputs(outputs_node, symbols, inputs, intermediates, name)
    gradients_node = fields.optional("gradients")
    overrides = _parse_gradients(gradients_node, symbols, inputs, outputs) if gradients_node else ()
    fields.finish()
    spec = Spec(
        name,
        module,
        doc,
        inputs,
        intermediates,
        outputs,
        source,
        overrides,
        mode,
        custom_op,
        checks,
        target,
        inplace_node.location if inplace and inplace_node else None,
        save,
    )
    for variant in options.variants(spec):  # the spec itself where it has no options
        views.check_views(variant.spec)
        indices.check_index_positions(variant.spec)
        indices.check_gathers(variant.spec)
        check_contractions(variant.spec)
        indices.check_segment_sums(variant.spec)
        indices.check_index_selects(variant.spec)
    return spec


def _choice(node: Node, key: str, choices: tuple[str, ...]) -> str:
    """The string value of `key`, one of `choices` (`mode`, `save`)."""
    value = read.string(node, key)
    if value not in choices:
        hint = did_you_mean(value, choices)
        message = f"unknown {key} {value!r}{hint}; expected one of: {', '.join(choices)}"
        raise SpecError(node.location, message, key)
    return value


def _target(node: Node) -> Target:
    """The `target:` name; whether a backend has it is the registry's to say."""
    name = read.string(node, "target")
    if not _TARGET_NAME.match(name):
        message = f"expected a target name like python, got {name!r}"
        raise SpecError(node.location, message, "target")
    return Target(name, node.location)


def _named_entries(node: Node, path: str, class_name: str) -> list[tuple[str, Location, Node]]:
    """The (name, key location, value) entries of a mapping of declared names."""
    if not isinstance(node.value, dict):
        raise SpecError(node.location, f"expected a mapping of names, got {read.kind(node)}", path)
    assert node.key_locations is not None
    entries = []
    for name, value in node.value.items():
        location = node.key_locations[name]
        read.refuse_split_expression(node, name, f"{name!r} is not a name", path)
        names.check_name(name, location, f"{path}.{name}", class_name)
        entries.append((name, location, value))
    return entries


def _parse_inputs(node: Node, class_name: str) -> tuple[Input, ...]:
    entries = _named_entries(node, "inputs", class_name)
    if not entries:
        raise SpecError(node.location, "declare at least one input", "inputs")
    inputs = tuple(_parse_input(name, loc, value) for name, loc, value in entries)
    _check_default_order(inputs)
    if not any(i.is_tensor for i in inputs):
        raise SpecError(node.location, "declare at least one tensor input", "inputs")
    return inputs


def _check_default_order(inputs: tuple[Input, ...]) -> None:
    seen_default: Input | None = None
    for item in inputs:
        if item.has_default:
            seen_default = item
        elif seen_default is not None:
            raise SpecError(
                item.location,
                f"input {item.name!r} has no default but comes after {seen_default.name!r}, "
                "which has one; inputs with defaults come last",
                f"inputs.{item.name}",
            )


def _parse_input(name: str, location: Location, node: Node) -> Input:
    path = f"inputs.{name}"
    if isinstance(node.value, str):
        type_node, fields, assume_node = node, None, None
    else:
        fields = read.Section(node, path, INPUT_KEYS)
        type_node = fields.require("type")
    input_type = _input_type(type_node, path)
    if input_type is InputType.INDEX:
        return indices.parse_index_input(name, location, node)
    if options.is_option_input(input_type, node):
        return options.parse_option_input(name, location, node, input_type)
    is_tensor = input_type is InputType.TENSOR
    assumptions: tuple[str, ...] = ()
    shape = domain = default = None
    requires_grad = is_tensor
    if fields is not None:
        assume_node = fields.optional("assume")
        assumptions = _assumptions(assume_node, f"{path}.assume")
        shape = _tensor_only(fields.optional("shape"), is_tensor, f"{path}.shape", read.shape)
        domain = read.domain(fields.optional("domain"), f"{path}.domain")
        grad_node = _tensor_only(
            fields.optional("requires_grad"), is_tensor, f"{path}.requires_grad", read.flag
        )
        requires_grad = requires_grad if grad_node is None else grad_node
        default_node = fields.optional("default")
        if default_node is not None:
            default = _default(default_node, input_type, f"{path}.default")
        fields.finish()
    symbol = _make_symbol(name, input_type, assumptions)
    if symbol is None:
        assert assume_node is not None
        conflict = ", ".join(assumptions)
        raise SpecError(
            assume_node.location, f"inconsistent assumptions: {conflict}", f"{path}.assume"
        )
    return Input(
        name, input_type, symbol, requires_grad, default, shape, domain, assumptions, location
    )


def _input_type(node: Node, path: str) -> InputType:
    allowed = [t.value for t in InputType]
    if not isinstance(node.value, str) or node.value not in allowed:
        hint = did_you_mean(str(node.value), allowed)
        raise SpecError(
            node.location,
            f"unknown type {node.value!r}{hint}; expected one of: {', '.join(allowed)}",
            path,
        )
    return InputType(node.value)


def _tensor_only(node: Node | None, is_tensor: bool, path: str, read: Any) -> Any:
    if node is None:
        return None
    if not is_tensor:
        raise SpecError(node.location, "only tensor inputs take this key", path)
    return read(node, path)


def _assumptions(node: Node | None, path: str) -> tuple[str, ...]:
    if node is None:
        return ()
    items = node.value if isinstance(node.value, list) else [node]
    names = []
    for item in items:
        if not isinstance(item.value, str) or item.value not in ASSUMPTIONS:
            hint = did_you_mean(str(item.value), ASSUMPTIONS)
            raise SpecError(
                item.location,
                f"unknown assumption {item.value!r}{hint}; expected: {', '.join(ASSUMPTIONS)}",
                path,
            )
        names.append(item.value)
    return tuple(dict.fromkeys(names))


def _default(node: Node, input_type: InputType, path: str) -> Number:
    value = node.value
    if input_type is InputType.TENSOR:
        raise SpecError(node.location, "tensor inputs cannot have a default", path)
    if input_type is InputType.BOOL:
        return read.flag(node, path)
    if input_type is InputType.INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(node.location, f"expected an integer, got {read.kind(node)}", path)
        return value
    return read.number(node, path)


def _make_symbol(
    name: str, input_type: InputType, assumptions: tuple[str, ...]
) -> sympy.Symbol | None:
    """The input's real symbol with its assumptions, or None if they contradict."""
    flags = {"real": True, **{a: True for a in assumptions}}
    if input_type is InputType.INT:
        flags["integer"] = True
    try:
        return sympy.Symbol(name, **flags)
    except InconsistentAssumptions:
        return None


def _expression(
    node: Node,
    symbols: Mapping[str, sympy.Symbol],
    path: str,
    unavailable: Mapping[str, str] | None = None,
) -> sympy.Expr:
    """An expression value: a string in the language, a number, or a sympy expression."""
    value = node.value
    if isinstance(value, str):
        try:
            return expressions.parse_expression(
                value, symbols, node.location, node.style, unavailable
            )
        except SpecError as error:
            raise SpecError(error.location, error.message, path) from None
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        raise SpecError(node.location, f"expected an expression, got {read.kind(node)}", path)
    try:
        return from_sympy(value, symbols, node.location)
    except SpecError as error:
        raise SpecError(error.location, error.message, path) from None


_ONLY_EARLIER = "each name may use only inputs and earlier names"


def _parse_where(
    node: Node, symbols: dict[str, sympy.Symbol], class_name: str, output_names: list[str]
) -> tuple[Intermediate, ...]:
    entries = _named_entries(node, "where", class_name)
    _check_unique(entries, symbols, "where")
    intermediates = []
    for index, (name, location, value) in enumerate(entries):
        unavailable = {n: f"is an output; {_ONLY_EARLIER}" for n in output_names}
        unavailable.update(
            {
                later: f"is defined later in where; {_ONLY_EARLIER}"
                for later, _, _ in entries[index:]
            }
        )
        unavailable[name] = f"refers to itself; {_ONLY_EARLIER}"
        expr = _expression(value, symbols, f"where.{name}", unavailable)
        # A name of positions is an index (Note [Arg extrema]): read only where one is.
        index = arg_extrema.is_index(expr)
        symbol = indexing.index_symbol(name) if index else sympy.Symbol(name, real=True)
        symbols[name] = symbol
        intermediates.append(Intermediate(name, symbol, expr, location))
    return tuple(intermediates)


def _check_unique(
    entries: list[tuple[str, Location, Node]], symbols: Mapping[str, sympy.Symbol], section: str
) -> None:
    for name, location, _ in entries:
        if name in symbols:
            raise SpecError(location, f"{name!r} is already declared", f"{section}.{name}")


def _parse_outputs(
    node: Node,
    symbols: dict[str, sympy.Symbol],
    inputs: tuple[Input, ...],
    intermediates: tuple[Intermediate, ...],
    class_name: str,
) -> tuple[Output, ...]:
    entries = _named_entries(node, "outputs", class_name)
    if not entries:
        raise SpecError(node.location, "declare at least one output", "outputs")
    _check_unique(entries, symbols, "outputs")
    unavailable = {
        name: "is an output; outputs cannot use each other: name the shared value in where"
        for name, _, _ in entries
    }
    tensors = {i.symbol for i in inputs if i.is_tensor}
    tensor_names = _tensor_dependent(intermediates, tensors)
    outputs = []
    for name, location, value in entries:
        path = f"outputs.{name}"
        differentiable = True
        if isinstance(value.value, dict):
            fields = read.Section(value, path, OUTPUT_KEYS)
            flag = fields.optional("differentiable")
            differentiable = True if flag is None else read.flag(flag, f"{path}.differentiable")
            value = fields.require("expr")
            fields.finish()
        expr = _expression(value, symbols, path, unavailable)
        if not expr.free_symbols & tensor_names:
            raise SpecError(value.location, "the output does not depend on any tensor input", path)
        symbol = sympy.Symbol(name, real=True)
        outputs.append(Output(name, symbol, expr, location, differentiable))
    return tuple(outputs)


def _parse_gradients(
    node: Node,
    symbols: dict[str, sympy.Symbol],
    inputs: tuple[Input, ...],
    outputs: tuple[Output, ...],
) -> tuple[GradientOverride, ...]:
    """`gradients: {output: {input: expression}}`, the user's own partial derivatives."""
    by_output = {o.name: o for o in outputs}
    by_input = {i.name: i for i in inputs}
    # Overrides may read outputs too (e.g. a straight-through gradient of y = round(x)),
    # and the incoming gradient (Note [Overrides that read grad]).
    names = copy.copy(symbols)  # a SymbolTable stays one: overrides may read options
    names.update({o.name: o.symbol for o in outputs})
    names.setdefault("grad", INCOMING_GRAD)
    overrides = []
    for output_name, output_node in read.mapping_entries(node, "gradients"):
        path = f"gradients.{output_name}"
        output = by_output.get(output_name)
        if output is None:
            hint = did_you_mean(output_name, by_output) or (
                f"; outputs are: {', '.join(by_output)}"
            )
            message = f"unknown output {output_name!r}{hint}"
            raise SpecError(read.key_location(node, output_name), message, "gradients")
        if not output.differentiable:
            message = f"output {output_name!r} is marked differentiable: false"
            raise SpecError(read.key_location(node, output_name), message, path)
        for input_name, expr_node in read.mapping_entries(output_node, path):
            item = by_input.get(input_name)
            if item is None:
                hint = did_you_mean(input_name, by_input) or (
                    f"; inputs are: {', '.join(by_input)}"
                )
                message = f"unknown input {input_name!r}{hint}"
                raise SpecError(read.key_location(output_node, input_name), message, path)
            where = f"{path}.{input_name}"
            if not item.differentiable:
                message = f"input {input_name!r} takes no gradient " f"({_no_gradient_kind(item)})"
                raise SpecError(read.key_location(output_node, input_name), message, where)
            expr = _expression(expr_node, names, where)
            overrides.append(GradientOverride(output, item, expr, expr_node.location))
    return tuple(overrides)


def _no_gradient_kind(item: Input) -> str:
    """Why an input takes no gradient, in the spec's words."""
    if item.is_index:
        return "it is an index"
    return "it is a number or a tensor with requires_grad: false"


def _tensor_dependent(
    intermediates: tuple[Intermediate, ...], tensors: set[sympy.Symbol]
) -> set[sympy.Basic]:
    """Tensor input symbols plus the intermediates computed from them."""
    dependent: set[sympy.Basic] = set(tensors)
    for item in intermediates:
        if item.expr.free_symbols & dependent:
            dependent.add(item.symbol)
    return dependent
