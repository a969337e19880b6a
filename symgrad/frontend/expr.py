"""Turn expression strings from a spec into sympy trees, through a fixed whitelist.

A spec is untrusted data, so its strings never reach `eval`, `sympify` or `parse_expr`.
We parse them with Python's `ast` module, accept only arithmetic, numbers, declared
names and calls of language functions, and build the sympy tree node by node.
Size, depth and constant magnitude are bounded so that no input can hang the tool.
"""

from __future__ import annotations

import ast
import math
import unicodedata
from collections.abc import Mapping

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import Boolean

from symgrad.errors import Location, SpecError, did_you_mean
from symgrad.frontend import calls, options, views
from symgrad.language import broadcasts, functions, indexing, piecewise
from symgrad.language.names import is_function_name
from symgrad.language.options import ChoiceSymbol, OptionCondition

# Bounds that keep parsing and later symbolic work finite for any input.
MAX_EXPRESSION_CHARS = 20_000
MAX_EXPRESSION_NODES = 10_000
MAX_EXPRESSION_DEPTH = 100
# Largest exact constant (in bits); a float64 holds up to 2**1024.
MAX_CONSTANT_BITS = 1000

# Constants of the language; a declared name of the same spelling shadows them.
CONSTANTS: dict[str, sympy.Expr] = {"pi": sympy.pi, "e": sympy.E}

# The language's comparisons, which sympy never decides on symbols: `x != x` is the NaN
# test (Note [Conditions are never folded] in symgrad.language.piecewise).
_COMPARISONS: dict[type[ast.cmpop], type[Relational]] = {
    ast.Lt: piecewise.Lt,
    ast.LtE: piecewise.Le,
    ast.Gt: piecewise.Gt,
    ast.GtE: piecewise.Ge,
    ast.Eq: piecewise.Eq,
    ast.NotEq: piecewise.Ne,
}

_BINARY_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}


class _Builder:
    """Walks one parsed expression and builds its sympy tree."""

    def __init__(
        self,
        text: str,
        symbols: Mapping[str, sympy.Symbol],
        location: Location,
        style: str,
        unavailable: Mapping[str, str],
    ) -> None:
        self.lines = text.split("\n")
        self.symbols = symbols
        self.unavailable = unavailable
        self.location = location
        self.style = style
        self.node_count = 0
        # The operands built so far under each node being built (innermost last).
        self.operands: list[list[sympy.Basic]] = []
        # How many comparisons are being built around the current node (Note [Index inputs]).
        self.comparing = 0

    def error(self, node: ast.AST | None, message: str) -> SpecError:
        """An error pointing at `node` inside the expression."""
        return SpecError(self.token_location(node), message)

    def token_location(self, node: ast.AST | None) -> Location:
        """Map a position inside the expression text to the spec file."""
        if node is None or self.style == "block" or not hasattr(node, "lineno"):
            return self.location
        line_index = node.lineno - 1
        if line_index != 0:
            return self.location
        # surrogatepass: a lone surrogate is refused with this location, not here.
        raw = self.lines[0].encode(errors="surrogatepass")[: getattr(node, "col_offset", 0)]
        column = len(raw.decode(errors="surrogatepass"))
        return self.location.shifted(0, column + (1 if self.style == "quoted" else 0))

    def build(self, node: ast.AST, depth: int) -> sympy.Expr:
        self.node_count += 1
        if self.node_count > MAX_EXPRESSION_NODES:
            raise self.error(node, f"expression has more than {MAX_EXPRESSION_NODES} parts")
        if depth > MAX_EXPRESSION_DEPTH:
            raise self.error(node, f"expression is nested more than {MAX_EXPRESSION_DEPTH} deep")
        method = getattr(self, f"build_{type(node).__name__}", None)
        if method is None:
            raise self.error(node, f"{_describe(node)} is not allowed in an expression")
        self.operands.append([])
        built: sympy.Expr = method(node, depth + 1)
        # Note [Cancelled shapes] in symgrad.language.broadcasts: x - x keeps x's shape.
        result: sympy.Expr = broadcasts.keep_shape(built, self.operands.pop())
        if self.operands:
            self.operands[-1].append(result)
        return result

    def build_Constant(self, node: ast.Constant, depth: int) -> sympy.Expr:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(node, f"{value!r} is not a number")
        if isinstance(value, float):
            if not math.isfinite(value):
                raise self.error(node, "constant is too large to represent")
            return sympy.Float(repr(value))
        if value.bit_length() > MAX_CONSTANT_BITS:
            raise self.error(node, "constant is too large to represent")
        return sympy.Integer(value)

    def build_Name(self, node: ast.Name, depth: int) -> sympy.Expr:
        name = node.id
        if isinstance(self.symbols.get(name), indexing.IndexSymbol) and not self.comparing:
            message = (
                f"index {name!r} can only be the index of gather(x, dim, {name}) "
                f"or compared, as in where({name} != -100, ...)"
            )
            raise self.error(node, message)
        if isinstance(self.symbols.get(name), ChoiceSymbol):
            raise self.error(node, f'str input {name!r} is only compared: {name} == "choice"')
        if name in self.symbols:
            return self.symbols[name]
        if name in self.unavailable:
            raise self.error(node, f"{name!r} {self.unavailable[name]}")
        if name in CONSTANTS:
            return CONSTANTS[name]
        if is_function_name(name):
            raise self.error(node, f"{name!r} is a function; call it like {name}(...)")
        candidates = [*self.symbols, *CONSTANTS]
        raise self.error(node, f"unknown name {name!r}{did_you_mean(name, candidates)}")

    def value(self, node: ast.AST, depth: int) -> sympy.Expr:
        """Build `node`, which must be a number-valued expression."""
        result = self.build(node, depth)
        if piecewise.is_condition(result) or isinstance(result, OptionCondition):
            raise self.error(node, "a condition is not a value here; use where(cond, a, b)")
        return result

    def condition(self, node: ast.AST, depth: int) -> Boolean:
        """Build `node`, which must be a condition such as x > 0."""
        flag = options.flag_condition(self, node)
        if flag is not None:
            return flag
        result = self.build(node, depth)
        if not (piecewise.is_condition(result) or isinstance(result, OptionCondition)):
            raise self.error(node, "expected a condition such as x > 0")
        return result

    def build_UnaryOp(self, node: ast.UnaryOp, depth: int) -> sympy.Basic:
        if isinstance(node.op, ast.Not):
            return sympy.Not(self.condition(node.operand, depth))
        operand = self.value(node.operand, depth)
        if isinstance(node.op, ast.USub):
            return self.checked_constant(node, -operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        raise self.error(node, _operator_message(node.op))

    def build_Compare(self, node: ast.Compare, depth: int) -> sympy.Basic:
        """A comparison; an index input may be read in its operands (a mask, no gradient);
        a str option compared with a choice is an option condition."""
        choice = options.choice_comparison(self, node)
        if choice is not None:
            return choice
        self.comparing += 1
        try:
            operands = [self.value(node.left, depth)]
            operands += [self.value(item, depth) for item in node.comparators]
        finally:
            self.comparing -= 1
        relations = []
        for left, operator, right in zip(operands, node.ops, operands[1:], strict=False):
            if type(operator) not in _COMPARISONS:
                raise self.error(node, f"{_describe(operator)} is not allowed")
            relations.append(_COMPARISONS[type(operator)](left, right))
        return sympy.And(*relations)  # `a < b < c` means `a < b and b < c`

    def build_BoolOp(self, node: ast.BoolOp, depth: int) -> sympy.Basic:
        conditions = [self.condition(item, depth) for item in node.values]
        return sympy.And(*conditions) if isinstance(node.op, ast.And) else sympy.Or(*conditions)

    def build_BinOp(self, node: ast.BinOp, depth: int) -> sympy.Expr:
        if type(node.op) not in _BINARY_OPERATORS:
            raise self.error(self.operator_position(node), _operator_message(node.op))
        left = self.value(node.left, depth)
        right = self.value(node.right, depth)
        if isinstance(node.op, ast.Add):
            result = left + right
        elif isinstance(node.op, ast.Sub):
            result = left - right
        elif isinstance(node.op, ast.Mult):
            result = left * right
        elif isinstance(node.op, ast.Div):
            if right.is_zero or (isinstance(right, broadcasts.Broadcast) and right.value.is_zero):
                raise self.error(node.right, "division by zero")  # also y - y, a shaped 0
            result = left / right
        else:
            result = self.power(node, left, right)
        return self.checked_constant(node, result)

    def operator_position(self, node: ast.BinOp) -> ast.AST:
        """A node placed at the operator token between the operands of `node`."""
        line = self.lines[0].encode()
        start = getattr(node.left, "end_col_offset", None)
        if node.left.end_lineno != 1 or start is None:
            return node
        offset = start + len(line[start:]) - len(line[start:].lstrip(b" )\t"))
        return ast.Constant(value=0, lineno=1, col_offset=offset)

    def power(self, node: ast.BinOp, base: sympy.Expr, exponent: sympy.Expr) -> sympy.Expr:
        if base == sympy.E:
            return functions.call("exp", exponent)
        if not (base.is_Number and exponent.is_Number):
            return base**exponent
        if base.is_zero and exponent.is_negative:
            raise self.error(node, "division by zero")
        if base.is_Float or exponent.is_Float:
            try:
                value = float(base) ** float(exponent)
            except (OverflowError, ZeroDivisionError):
                raise self.error(node, "constant is too large to represent") from None
            if isinstance(value, complex):
                raise self.error(node, "constant is not a real number")
            return sympy.Float(value)
        # Exact powers: bound the size of the result before sympy computes it.
        rational = sympy.Rational(base)
        size = math.log2(abs(rational.p) + 1) + math.log2(rational.q)
        if size > 0 and abs(float(exponent)) * size > MAX_CONSTANT_BITS:
            raise self.error(node, "constant is too large to represent")
        return base**exponent

    def checked_constant(self, node: ast.AST, value: sympy.Expr) -> sympy.Expr:
        """Refuse a constant part that is infinite, undefined or complex."""
        if not value.is_number:
            return value
        if value.has(sympy.zoo, sympy.nan):
            raise self.error(node, "division by zero")
        if value.has(sympy.oo, -sympy.oo):
            raise self.error(node, "constant is too large to represent")
        if value.is_real is False or value.has(sympy.I):
            raise self.error(node, "constant is not a real number")
        return value

    def build_Call(self, node: ast.Call, depth: int) -> sympy.Expr:
        if isinstance(node.func, ast.Name) and node.func.id == "given":
            return options.given(self, node)
        return calls.build_call(self, node, depth)

    def build_Subscript(self, node: ast.Subscript, depth: int) -> sympy.Expr:
        return views.chunk_piece(self, node, depth)


_DESCRIPTIONS: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Lambda: "a lambda",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.Subscript: "indexing",
    ast.Compare: "a comparison",
    ast.BoolOp: "a boolean operator",
    ast.IfExp: "a conditional expression",
    ast.Starred: "unpacking",
    ast.Tuple: "a tuple",
    ast.List: "a list",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.JoinedStr: "an f-string",
    ast.NamedExpr: "an assignment (:=)",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "a slice",
}

_OPERATOR_SPELLINGS: dict[type[ast.AST], str] = {
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.MatMult: "@",
    ast.BitXor: "^",
    ast.BitOr: "|",
    ast.BitAnd: "&",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.Not: "not",
    ast.Invert: "~",
}


def _describe(node: ast.AST) -> str:
    """A short human name for an AST node type."""
    return _DESCRIPTIONS.get(type(node), f"'{type(node).__name__}'")


def _operator_message(operator: ast.AST) -> str:
    spelling = _OPERATOR_SPELLINGS.get(type(operator), type(operator).__name__)
    hint = "; use ** for powers" if isinstance(operator, ast.BitXor) else ""
    return f"operator {spelling!r} is not allowed{hint}"


def _refuse_control_characters(source: str, builder: _Builder) -> None:
    """Refuse a control character (a null byte, a bell, ...) or a lone surrogate.

    Python's own message for these differs between patch releases; this one does not.
    """
    for index, character in enumerate(source):
        category = unicodedata.category(character)
        if category == "Cs" or (category == "Cc" and character not in "\t\n\r"):
            column = len(source[:index].encode())
            position = ast.Constant(value=0, lineno=1, col_offset=column)
            code = f"U+{ord(character):04X}"
            raise builder.error(position, f"character {code} is not allowed in an expression")


def parse_expression(
    text: str,
    symbols: Mapping[str, sympy.Symbol],
    location: Location,
    style: str = "plain",
    unavailable: Mapping[str, str] | None = None,
) -> sympy.Expr:
    """Parse `text` into a sympy expression over `symbols`; errors point into the spec.

    `location` is where the text starts in the spec and `style` how it is written there
    ("plain", "quoted" or "block"), so that errors can name the column of the bad token.
    `unavailable` maps names declared elsewhere in the spec to why they cannot be used.
    """
    if len(text) > MAX_EXPRESSION_CHARS:
        raise SpecError(location, f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    if not text.strip():
        raise SpecError(location, "expression is empty")
    source = text.strip()
    if "\n" in source:
        # Several lines: parse them as one, and point errors at the start of the value.
        source, style = " ".join(source.split()), "block"
    else:
        # Positions below are in `source`; text stripped from the left shifts them.
        location = (
            location.shifted(0, len(text) - len(text.lstrip())) if style != "block" else location
        )
    builder = _Builder(source, symbols, location, style, unavailable or {})
    _refuse_control_characters(source, builder)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as error:
        # SyntaxError counts characters; AST nodes (and token_location) count UTF-8 bytes.
        characters = max((error.offset or 1) - 1, 0)
        column = len(source[:characters].encode())
        position = ast.Constant(value=0, lineno=error.lineno or 1, col_offset=column)
        raise builder.error(position, f"invalid expression: {error.msg}") from None
    except (RecursionError, MemoryError, ValueError) as error:
        raise SpecError(location, f"invalid expression: {type(error).__name__}") from None
    try:
        return builder.value(tree.body, depth=0)
    except RecursionError:
        raise SpecError(location, "expression is nested too deeply") from None
