"""Validate a spec (YAML nodes or a plain dict) and build the frozen `Spec` model.

Each section pops the keys it knows; anything left over is an error that lists the
allowed keys. Every error names the file, line and column of the offending value.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Mapping
from typing import Any

import sympy

from symgrad import expr as expressions
from symgrad import functions
from symgrad.errors import Location, SpecError
from symgrad.loader import Node
from symgrad.model import Input, InputType, Intermediate, Number, Output, Spec

_TOP_KEYS = ("name", "module", "doc", "inputs", "where", "outputs")
_INPUT_KEYS = ("type", "assume", "shape", "domain", "requires_grad", "default")
_ASSUMPTIONS = ("positive", "nonnegative", "negative", "nonzero", "real")
# Names the generated code itself uses at module or function scope.
RESERVED_NAMES = frozenset({"ctx", "torch", "math"})
_CLASS_NAME = re.compile(r"[A-Z][A-Za-z0-9]*\Z")
_MODULE_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")
# Bounds on a test shape, so that generated tests stay small.
_MAX_TEST_ELEMENTS = 4096


def snake_case(name: str) -> str:
    """SoftClamp -> soft_clamp, GELUTanh -> gelu_tanh."""
    words = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", words).lower()


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
    fields = _Section(root, "", _TOP_KEYS)
    name = _class_name(fields.require("name"))
    module_node = fields.optional("module")
    module = _module_name(module_node) if module_node else snake_case(name)
    doc_node = fields.optional("doc")
    doc = _string(doc_node, "doc") if doc_node else ""
    inputs = _parse_inputs(fields.require("inputs"), name)
    symbols: dict[str, sympy.Symbol] = {i.name: i.symbol for i in inputs}
    where_node = fields.optional("where")
    intermediates = _parse_where(where_node, symbols, name) if where_node else ()
    outputs = _parse_outputs(fields.require("outputs"), symbols, inputs, intermediates, name)
    fields.finish()
    return Spec(name, module, doc, inputs, intermediates, outputs, source)


class _Section:
    """The keys of one mapping, taken one at a time; leftovers are reported."""

    def __init__(self, node: Node, path: str, allowed: tuple[str, ...]) -> None:
        if not isinstance(node.value, dict):
            what = path or "the spec"
            raise SpecError(node.location, f"expected a mapping, got {_kind(node)}", what)
        self.node = node
        self.items = dict(node.value)
        self.path = path
        self.allowed = allowed

    def require(self, key: str) -> Node:
        if key not in self.items:
            where = f" in {self.path}" if self.path else ""
            raise SpecError(self.node.location, f"missing required key {key!r}{where}")
        return self.items.pop(key)

    def optional(self, key: str) -> Node | None:
        return self.items.pop(key, None)

    def finish(self) -> None:
        for key in self.items:
            assert self.node.key_locations is not None
            hint = expressions.did_you_mean(key, self.allowed)
            allowed = ", ".join(self.allowed)
            raise SpecError(
                self.node.key_locations[key],
                f"unknown key {key!r}{hint}; allowed keys are: {allowed}",
                self.path,
            )


def _kind(node: Node) -> str:
    value = node.value
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _string(node: Node, path: str) -> str:
    if not isinstance(node.value, str):
        raise SpecError(node.location, f"expected a string, got {_kind(node)}", path)
    return node.value


def _class_name(node: Node) -> str:
    name = _string(node, "name")
    if not _CLASS_NAME.match(name) or keyword.iskeyword(name):
        raise SpecError(
            node.location, f"expected a CamelCase class name like SoftClamp, got {name!r}", "name"
        )
    return name


def _module_name(node: Node) -> str:
    module = _string(node, "module")
    if not _MODULE_NAME.match(module) or keyword.iskeyword(module) or module in RESERVED_NAMES:
        raise SpecError(
            node.location, f"expected a snake_case module name, got {module!r}", "module"
        )
    return module


def _check_name(name: str, location: Location, path: str, class_name: str) -> None:
    """Refuse names that are not identifiers or that the generated code needs."""
    if not name.isidentifier():
        raise SpecError(location, f"{name!r} is not a valid Python identifier", path)
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise SpecError(location, f"{name!r} is a Python keyword", path)
    if name in RESERVED_NAMES:
        reserved = ", ".join(sorted(RESERVED_NAMES))
        raise SpecError(location, f"{name!r} is reserved (reserved names: {reserved})", path)
    if name in functions.SPELLINGS:
        raise SpecError(location, f"{name!r} is a function of the language", path)
    if name == class_name:
        raise SpecError(location, f"{name!r} is the name of the class", path)


def _named_entries(node: Node, path: str, class_name: str) -> list[tuple[str, Location, Node]]:
    """The (name, key location, value) entries of a mapping of declared names."""
    if not isinstance(node.value, dict):
        raise SpecError(node.location, f"expected a mapping of names, got {_kind(node)}", path)
    assert node.key_locations is not None
    entries = []
    for name, value in node.value.items():
        location = node.key_locations[name]
        _check_name(name, location, f"{path}.{name}", class_name)
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
        if item.default is not None:
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
        type_node, fields = node, None
    else:
        fields = _Section(node, path, _INPUT_KEYS)
        type_node = fields.require("type")
    input_type = _input_type(type_node, path)
    is_tensor = input_type is InputType.TENSOR
    assumptions: tuple[str, ...] = ()
    shape = domain = default = None
    requires_grad = is_tensor
    if fields is not None:
        assumptions = _assumptions(fields.optional("assume"), f"{path}.assume")
        shape = _tensor_only(fields.optional("shape"), is_tensor, f"{path}.shape", _shape)
        domain = _domain(fields.optional("domain"), f"{path}.domain")
        grad_node = _tensor_only(
            fields.optional("requires_grad"), is_tensor, f"{path}.requires_grad", _boolean
        )
        requires_grad = requires_grad if grad_node is None else grad_node
        default_node = fields.optional("default")
        if default_node is not None:
            default = _default(default_node, input_type, f"{path}.default")
        fields.finish()
    symbol = _make_symbol(name, input_type, assumptions, location, path)
    return Input(
        name, input_type, symbol, requires_grad, default, shape, domain, assumptions, location
    )


def _input_type(node: Node, path: str) -> InputType:
    allowed = [t.value for t in InputType]
    if not isinstance(node.value, str) or node.value not in allowed:
        hint = expressions.did_you_mean(str(node.value), allowed)
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


def _boolean(node: Node, path: str) -> bool:
    if not isinstance(node.value, bool):
        raise SpecError(node.location, f"expected true or false, got {_kind(node)}", path)
    return node.value


def _assumptions(node: Node | None, path: str) -> tuple[str, ...]:
    if node is None:
        return ()
    items = node.value if isinstance(node.value, list) else [node]
    names = []
    for item in items:
        if not isinstance(item.value, str) or item.value not in _ASSUMPTIONS:
            hint = expressions.did_you_mean(str(item.value), _ASSUMPTIONS)
            raise SpecError(
                item.location,
                f"unknown assumption {item.value!r}{hint}; expected: {', '.join(_ASSUMPTIONS)}",
                path,
            )
        names.append(item.value)
    return tuple(dict.fromkeys(names))


def _shape(node: Node, path: str) -> tuple[int, ...]:
    if not isinstance(node.value, list) or len(node.value) > 8:
        raise SpecError(node.location, f"expected a list of sizes, got {_kind(node)}", path)
    sizes = []
    for item in node.value:
        size = item.value
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise SpecError(item.location, f"expected a positive size, got {_kind(item)}", path)
        sizes.append(size)
    if math.prod(sizes) > _MAX_TEST_ELEMENTS:
        raise SpecError(
            node.location, f"test shapes are limited to {_MAX_TEST_ELEMENTS} elements", path
        )
    return tuple(sizes)


def _number(node: Node, path: str) -> float:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(node.location, f"expected a finite number, got {_kind(node)}", path)
    return float(value)


def _domain(node: Node | None, path: str) -> tuple[float, float] | None:
    if node is None:
        return None
    if not isinstance(node.value, list) or len(node.value) != 2:
        raise SpecError(node.location, f"expected [low, high], got {_kind(node)}", path)
    low, high = (_number(item, path) for item in node.value)
    if not low < high:
        raise SpecError(node.location, f"expected low < high, got [{low}, {high}]", path)
    return (low, high)


def _default(node: Node, input_type: InputType, path: str) -> Number:
    value = node.value
    if input_type is InputType.TENSOR:
        raise SpecError(node.location, "tensor inputs cannot have a default", path)
    if input_type is InputType.BOOL:
        return _boolean(node, path)
    if input_type is InputType.INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(node.location, f"expected an integer, got {_kind(node)}", path)
        return value
    return _number(node, path)


def _make_symbol(
    name: str, input_type: InputType, assumptions: tuple[str, ...], location: Location, path: str
) -> sympy.Symbol:
    flags = {"real": True, **{a: True for a in assumptions}}
    if input_type is InputType.INT:
        flags["integer"] = True
    try:
        return sympy.Symbol(name, **flags)
    except Exception as error:  # sympy.core.assumptions.InconsistentAssumptions
        raise SpecError(location, f"inconsistent assumptions: {error}", path) from None


def _expression(node: Node, symbols: Mapping[str, sympy.Symbol], path: str) -> sympy.Expr:
    """An expression value: a string in the language, a number, or a sympy expression."""
    value = node.value
    if isinstance(value, str):
        try:
            return expressions.parse_expression(value, symbols, node.location, node.style)
        except SpecError as error:
            raise SpecError(error.location, error.message, path) from None
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        raise SpecError(node.location, f"expected an expression, got {_kind(node)}", path)
    try:
        return expressions.from_sympy(value, symbols, node.location)
    except SpecError as error:
        raise SpecError(error.location, error.message, path) from None


def _later_name_error(
    error: SpecError, later: Mapping[str, str], node: Node, path: str
) -> SpecError:
    """Explain a reference to a name that is declared, but later or in another section."""
    for name, why in later.items():
        if f"unknown name {name!r}" in error.message:
            return SpecError(error.location, f"{name!r} {why}", path)
    return error


def _parse_where(
    node: Node, symbols: dict[str, sympy.Symbol], class_name: str
) -> tuple[Intermediate, ...]:
    entries = _named_entries(node, "where", class_name)
    _check_unique(entries, symbols, "where")
    intermediates = []
    for index, (name, location, value) in enumerate(entries):
        path = f"where.{name}"
        later = {
            later_name: "is defined later in where (or refers to itself): a cycle; "
            "each name may use only inputs and earlier names"
            for later_name, _, _ in entries[index:]
        }
        try:
            expr = _expression(value, symbols, path)
        except SpecError as error:
            raise _later_name_error(error, later, value, path) from None
        symbol = sympy.Symbol(name, real=True)
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
    output_names = {
        name: "is an output; outputs cannot use each other: name the shared value in where"
        for name, _, _ in entries
    }
    tensors = {i.symbol for i in inputs if i.is_tensor}
    tensor_names = _tensor_dependent(intermediates, tensors)
    outputs = []
    for name, location, value in entries:
        path = f"outputs.{name}"
        try:
            expr = _expression(value, symbols, path)
        except SpecError as error:
            raise _later_name_error(error, output_names, value, path) from None
        if not expr.free_symbols & tensor_names:
            raise SpecError(value.location, "the output does not depend on any tensor input", path)
        outputs.append(Output(name, sympy.Symbol(name, real=True), expr, location))
    return tuple(outputs)


def _tensor_dependent(
    intermediates: tuple[Intermediate, ...], tensors: set[sympy.Symbol]
) -> set[sympy.Basic]:
    """Tensor input symbols plus the intermediates computed from them."""
    dependent: set[sympy.Basic] = set(tensors)
    for item in intermediates:
        if item.expr.free_symbols & dependent:
            dependent.add(item.symbol)
    return dependent
