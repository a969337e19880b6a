"""Option inputs (a string among choices, an optional number, a bool flag) and variants.

A spec with options is specialised once per combination of option values before it is
differentiated (Note [Option conditions] in symgrad.language.options): each `Variant`
is an ordinary Spec, derived and checked on its own.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy

from symgrad.errors import Location, SpecError, did_you_mean
from symgrad.frontend import fields as read
from symgrad.frontend.loader import Node
from symgrad.frontend.model import GradientOverride, Input, InputType, Intermediate, Output, Spec
from symgrad.language import options as language

if TYPE_CHECKING:
    from symgrad.frontend.calls import Walker

# The input keys only options take.
KEYS = ("choices", "optional")
# Options multiply the variants generated: keep their product small.
MAX_VARIANTS = 32

OptionValue = str | bool


def is_option_input(input_type: InputType, node: Node) -> bool:
    """True for a string input, or a number declared `optional:`."""
    optional = isinstance(node.value, dict) and "optional" in node.value
    return input_type is InputType.STR or optional


def parse_option_input(name: str, location: Location, node: Node, kind: InputType) -> Input:
    """A string input with its choices and default, or an optional float."""
    path = f"inputs.{name}"
    if not isinstance(node.value, dict):
        raise SpecError(node.location, "a str input declares its choices", path)
    fields = read.Section(node, path, ("type", "choices", "default", "optional", "domain"))
    fields.require("type")
    if kind is InputType.STR:
        choices = _choices(fields.require("choices"), f"{path}.choices")
        default_node = fields.optional("default")
        default = _choice(default_node, choices, f"{path}.default") if default_node else None
        _refuse(fields.optional("optional"), "a str input has a default, not optional", path)
        _refuse(fields.optional("domain"), "a str input has choices, not a domain", path)
        fields.finish()
        symbol = language.ChoiceSymbol(name)
        return Input(name, kind, symbol, False, None, None, None, (), location, choices, default)
    optional_node = fields.require("optional")
    if kind is not InputType.FLOAT or not read.flag(optional_node, f"{path}.optional"):
        message = "only a float input may be optional (optional: true)"
        raise SpecError(optional_node.location, message, f"{path}.optional")
    _refuse(fields.optional("default"), "an optional input's default is None", path)
    _refuse(fields.optional("choices"), "only a str input takes choices", path)
    domain = read.domain(fields.optional("domain"), f"{path}.domain")
    fields.finish()
    symbol = sympy.Symbol(name, real=True)
    return Input(name, kind, symbol, False, None, None, domain, (), location, optional=True)


def _refuse(node: Node | None, message: str, path: str) -> None:
    """Raise `message` at `node` if the key was given."""
    if node is not None:
        raise SpecError(node.location, message, path)


def _choices(node: Node, path: str) -> tuple[str, ...]:
    """A non-empty list of distinct identifier-like strings."""
    if not isinstance(node.value, list) or not node.value:
        raise SpecError(node.location, "expected a non-empty list of strings", path)
    choices: list[str] = []
    for item in node.value:
        text = item.value if isinstance(item.value, str) else None
        if text is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
            message = f"expected a choice like mean (letters, digits, _), got {item.value!r}"
            raise SpecError(item.location, message, path)
        if text in choices:
            raise SpecError(item.location, f"choice {text!r} is listed twice", path)
        choices.append(text)
    return tuple(choices)


def _choice(node: Node, choices: tuple[str, ...], path: str) -> str:
    """A string that is one of `choices`."""
    text = node.value if isinstance(node.value, str) else None
    if text is None or text not in choices:
        hint = did_you_mean(str(node.value), choices)
        message = f"{node.value!r} is not a choice{hint}; choices are: {', '.join(choices)}"
        raise SpecError(node.location, message, path)
    return text


class SymbolTable(dict[str, sympy.Symbol]):
    """The names an expression may read, knowing which inputs are bool flags."""

    def __init__(self, inputs: Iterable[Input]) -> None:
        inputs = tuple(inputs)
        super().__init__((i.name, i.symbol) for i in inputs)
        self.flags = frozenset(i.name for i in inputs if i.type is InputType.BOOL)
        self.choices = {i.name: i.choices for i in inputs if i.type is InputType.STR}
        self.optionals = frozenset(i.name for i in inputs if i.optional)


def flag_condition(walker: Walker, node: ast.AST) -> sympy.Basic | None:
    """A bool input used directly as a condition, as its option condition; else None."""
    table = walker.symbols
    if isinstance(node, ast.Name) and isinstance(table, SymbolTable) and node.id in table.flags:
        return language.flag_condition(node.id)
    return None


def choice_comparison(walker: Walker, node: ast.Compare) -> sympy.Basic | None:
    """`name == "choice"` (or !=) on a str input, as its option condition; else None."""
    sides = [node.left, *node.comparators]
    if not any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides):
        return None
    table = walker.symbols
    named = [s for s in sides if isinstance(s, ast.Name) and s.id in getattr(table, "choices", {})]
    literal = [s for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
    if len(sides) != 2 or len(named) != 1 or len(literal) != 1:
        message = 'a string is only compared with a str input: reduction == "mean"'
        raise walker.error(node, message)
    if not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        raise walker.error(node, "a str input is only compared with == or !=")
    assert isinstance(table, SymbolTable)
    name, choice = named[0].id, str(literal[0].value)
    if choice not in table.choices[name]:
        hint = did_you_mean(choice, table.choices[name])
        options = ", ".join(table.choices[name])
        raise walker.error(literal[0], f"{choice!r} is not a choice of {name!r}{hint}: {options}")
    condition = language.choice_condition(name, choice)
    return sympy.Not(condition) if isinstance(node.ops[0], ast.NotEq) else condition


def given(walker: Walker, node: ast.Call) -> sympy.Basic:
    """`given(name)`: the option condition that the optional number `name` is passed."""
    argument = node.args[0] if len(node.args) == 1 and not node.keywords else None
    name = argument.id if isinstance(argument, ast.Name) else None
    if name is None or name not in getattr(walker.symbols, "optionals", ()):
        raise walker.error(node, "given takes the name of an optional input: given(scale)")
    return language.given_condition(name)


@dataclass(frozen=True)
class Variant:
    """One combination of option values and the spec it specialises to."""

    values: tuple[tuple[Input, OptionValue], ...]
    spec: Spec


def option_inputs(spec: Spec) -> tuple[Input, ...]:
    """The spec's options: str and optional inputs, and bools used as conditions."""
    atoms: set[sympy.Basic] = set()
    for expr in _expressions(spec):
        atoms |= expr.atoms(language.OptionCondition)
    return tuple(
        i
        for i in spec.inputs
        if i.type is InputType.STR or i.optional or language.flag_condition(i.name) in atoms
    )


def _expressions(spec: Spec) -> Iterator[sympy.Basic]:
    """Every expression of the spec."""
    yield from (i.expr for i in spec.intermediates)
    yield from (o.expr for o in spec.outputs)
    yield from (g.expr for g in spec.overrides)


def variants(spec: Spec) -> tuple[Variant, ...]:
    """The spec specialised once per combination of option values (none: the spec)."""
    items = option_inputs(spec)
    if not items:
        return (Variant((), spec),)
    if spec.inplace is not None:
        raise SpecError(spec.inplace, "inplace: true does not take options yet", "inplace")
    ranges: list[tuple[OptionValue, ...]] = [
        item.choices if item.type is InputType.STR else (False, True) for item in items
    ]
    combos = list(itertools.product(*ranges))
    if len(combos) > MAX_VARIANTS:
        message = f"options select {len(combos)} formulas; at most {MAX_VARIANTS} are generated"
        raise SpecError(items[0].location, message, "inputs")
    found = tuple(_specialise(spec, tuple(zip(items, combo, strict=True))) for combo in combos)
    names: dict[str, Variant] = {}
    for variant in found:
        clash = names.setdefault(variant.spec.name, variant)
        if clash is not variant:
            message = (
                f"{describe_values(clash.values)} and {describe_values(variant.values)} "
                f"both name their Function {variant.spec.name}: choose choices that differ "
                "in more than case and underscores"
            )
            raise SpecError(items[0].location, message, f"inputs.{items[0].name}")
    return found


def describe_values(values: tuple[tuple[Input, OptionValue], ...]) -> str:
    """A variant's option values as a call reads them: `reduction='sum', scale=None`."""
    parts = []
    for item, value in values:
        if item.optional:
            parts.append(f"{item.name} given" if value else f"{item.name}=None")
        else:
            parts.append(f"{item.name}={value!r}")
    return ", ".join(parts)


def _decisions(values: tuple[tuple[Input, OptionValue], ...]) -> dict[sympy.Basic, sympy.Basic]:
    """Each option condition's value, and a bool flag's value where it is a number."""
    decided: dict[sympy.Basic, sympy.Basic] = {}
    for item, value in values:
        if item.type is InputType.STR:
            for choice in item.choices:
                decided[language.choice_condition(item.name, choice)] = (
                    sympy.true if choice == value else sympy.false
                )
        elif item.optional:
            decided[language.given_condition(item.name)] = sympy.true if value else sympy.false
        else:
            decided[language.flag_condition(item.name)] = sympy.true if value else sympy.false
            decided[item.symbol] = sympy.Integer(int(bool(value)))
    return decided


def suffix(values: tuple[tuple[Input, OptionValue], ...]) -> tuple[str, str]:
    """The variant's CamelCase and snake_case suffixes, e.g. ("SumLogTarget", "sum_log_target")."""
    words: list[str] = []
    for item, value in values:
        if item.type is InputType.STR:
            words.append(str(value).lower())
        elif value:
            words.append(item.name.lower())
    words = words or ["plain"]
    camel = "".join(part.capitalize() for word in words for part in word.split("_"))
    return camel, "_".join(words)


def _specialise(spec: Spec, values: tuple[tuple[Input, OptionValue], ...]) -> Variant:
    """The spec under one combination of option values, its options gone."""
    decided = _decisions(values)
    absent = {item.symbol: item for item, value in values if item.optional and not value}
    kept = {item.name for item, value in values if item.optional and value}
    dropped = {item.name for item, _ in values} - kept
    inputs = _variant_inputs(spec.inputs, dropped)

    def specialised(expr: sympy.Basic, location: Location, path: str) -> sympy.Expr:
        result = language.decide(expr, decided)
        for symbol in result.free_symbols & absent.keys():
            name = absent[symbol].name
            message = (
                f"{name!r} is optional but read where it may be None: guard it with given({name})"
            )
            raise SpecError(location, message, path)
        return result

    intermediates = tuple(
        dataclasses.replace(i, expr=specialised(i.expr, i.location, f"where.{i.name}"))
        for i in spec.intermediates
    )
    outputs = tuple(
        dataclasses.replace(o, expr=specialised(o.expr, o.location, f"outputs.{o.name}"))
        for o in spec.outputs
    )
    _check_tensor_outputs(intermediates, outputs, inputs, values)
    by_name = {o.name: o for o in outputs}
    by_input = {i.name: i for i in inputs}
    overrides = tuple(
        GradientOverride(
            by_name[g.output.name],
            by_input[g.input.name],
            specialised(g.expr, g.location, f"gradients.{g.output.name}.{g.input.name}"),
            g.location,
        )
        for g in spec.overrides
    )
    camel, snake = suffix(values)
    variant = dataclasses.replace(
        spec,
        name=spec.name + camel,
        module=f"{spec.module}_{snake}",
        inputs=inputs,
        intermediates=intermediates,
        outputs=outputs,
        overrides=overrides,
    )
    return Variant(values, variant)


def _variant_inputs(inputs: tuple[Input, ...], dropped: set[str]) -> tuple[Input, ...]:
    """The inputs a variant takes: options dropped, a given optional number required.

    Defaults before a required input are dropped too, so that the variant's signature
    stays valid; the dispatching function keeps every default.
    """
    kept = [i for i in inputs if i.name not in dropped]
    last_required = max(
        (n for n, i in enumerate(kept) if not i.has_default or i.optional), default=-1
    )
    return tuple(
        dataclasses.replace(i, optional=False, default=None) if n <= last_required else i
        for n, i in enumerate(kept)
    )


def _check_tensor_outputs(
    intermediates: tuple[Intermediate, ...],
    outputs: tuple[Output, ...],
    inputs: tuple[Input, ...],
    values: tuple[tuple[Input, OptionValue], ...],
) -> None:
    """Refuse a variant whose output its options leave without any tensor input."""
    dependent: set[sympy.Basic] = {i.symbol for i in inputs if i.is_tensor}
    for item in intermediates:
        if item.expr.free_symbols & dependent:
            dependent.add(item.symbol)
    for output in outputs:
        if not output.expr.free_symbols & dependent:
            chosen = ", ".join(f"{item.name}={value!r}" for item, value in values)
            message = f"with {chosen} the output does not depend on any tensor input"
            raise SpecError(output.location, message, f"outputs.{output.name}")
