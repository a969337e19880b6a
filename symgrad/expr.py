"""Turn expression strings from a spec into sympy trees, through a fixed whitelist.

A spec is untrusted data, so its strings never reach `eval`, `sympify` or `parse_expr`.
We parse them with Python's `ast` module, accept only arithmetic, numbers, declared
names and calls of language functions, and build the sympy tree node by node.
Size, depth and constant magnitude are bounded so that no input can hang the tool.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Mapping

import sympy

from symgrad import functions
from symgrad.errors import Location, SpecError

# Bounds that keep parsing and later symbolic work finite for any input.
MAX_EXPRESSION_CHARS = 20_000
MAX_EXPRESSION_NODES = 10_000
MAX_EXPRESSION_DEPTH = 100
# Largest integer power of a number literal that is folded into a constant (in bits).
_MAX_CONSTANT_BITS = 4096

# Constants of the language; a declared name of the same spelling shadows them.
CONSTANTS: dict[str, sympy.Expr] = {"pi": sympy.pi, "e": sympy.E}

_BINARY_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}


def did_you_mean(name: str, candidates: object) -> str:
    """Return ' (did you mean X?)' for the closest candidate, or ''."""
    names = sorted(str(c) for c in candidates)  # type: ignore[attr-defined]
    close = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Builder:
    """Walks one parsed expression and builds its sympy tree."""

    def __init__(
        self, text: str, symbols: Mapping[str, sympy.Symbol], location: Location, style: str
    ) -> None:
        self.lines = text.split("\n")
        self.symbols = symbols
        self.location = location
        self.style = style
        self.node_count = 0

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
        raw = self.lines[0].encode()[: getattr(node, "col_offset", 0)]
        column = len(raw.decode(errors="replace"))
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
        result: sympy.Expr = method(node, depth + 1)
        return result

    def build_Constant(self, node: ast.Constant, depth: int) -> sympy.Expr:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(node, f"{value!r} is not a number")
        if isinstance(value, float):
            return sympy.Float(repr(value))
        return sympy.Integer(value)

    def build_Name(self, node: ast.Name, depth: int) -> sympy.Expr:
        name = node.id
        if name in self.symbols:
            return self.symbols[name]
        if name in CONSTANTS:
            return CONSTANTS[name]
        if name in functions.SPELLINGS:
            raise self.error(node, f"{name!r} is a function; call it like {name}(...)")
        candidates = [*self.symbols, *CONSTANTS]
        raise self.error(node, f"unknown name {name!r}{did_you_mean(name, candidates)}")

    def build_UnaryOp(self, node: ast.UnaryOp, depth: int) -> sympy.Expr:
        operand = self.build(node.operand, depth)
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.UAdd):
            return operand
        raise self.error(node, f"operator {_describe(node.op)} is not allowed")

    def build_BinOp(self, node: ast.BinOp, depth: int) -> sympy.Expr:
        if type(node.op) not in _BINARY_OPERATORS:
            raise self.error(node, f"operator {_describe(node.op)} is not allowed")
        left = self.build(node.left, depth)
        right = self.build(node.right, depth)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.Div):
            if right == 0:
                raise self.error(node.right, "division by zero")
            return left / right
        return self.power(node, left, right)

    def power(self, node: ast.BinOp, base: sympy.Expr, exponent: sympy.Expr) -> sympy.Expr:
        if base == sympy.E:
            return functions.call("exp", exponent)
        if base.is_Number and exponent.is_Number:
            if base == 0 and exponent.is_negative:
                raise self.error(node, "division by zero")
            if exponent.is_Integer and abs(base) > 1:
                bits = abs(int(exponent)) * float(sympy.log(abs(base), 2).evalf())
                if bits > _MAX_CONSTANT_BITS:
                    raise self.error(node, "constant is too large to represent")
        return base**exponent

    def build_Call(self, node: ast.Call, depth: int) -> sympy.Expr:
        if not isinstance(node.func, ast.Name):
            raise self.error(node.func, "only functions of the language can be called")
        spelling = node.func.id
        if spelling in self.symbols:
            raise self.error(node.func, f"{spelling!r} is not a function")
        if spelling not in functions.SPELLINGS:
            hint = did_you_mean(spelling, functions.SPELLINGS)
            raise self.error(node.func, f"unknown function {spelling!r}{hint}")
        if node.keywords:
            raise self.error(node.keywords[0].value, f"{spelling}() takes no keyword arguments")
        info = functions.FUNCTIONS[functions.SPELLINGS[spelling]]
        if len(node.args) != info.arity:
            plural = "s" if info.arity != 1 else ""
            given = len(node.args)
            raise self.error(
                node.func, f"{spelling}() takes {info.arity} argument{plural}, got {given}"
            )
        args = [self.build(arg, depth) for arg in node.args]
        return functions.call(spelling, *args)


def _describe(node: ast.AST) -> str:
    """A short human name for an AST node type."""
    names = {
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
        ast.FloorDiv: "'//'",
        ast.Mod: "'%'",
        ast.MatMult: "'@'",
        ast.Not: "'not'",
        ast.Invert: "'~'",
    }
    return names.get(type(node), f"'{type(node).__name__}'")


def parse_expression(
    text: str,
    symbols: Mapping[str, sympy.Symbol],
    location: Location,
    style: str = "plain",
) -> sympy.Expr:
    """Parse `text` into a sympy expression over `symbols`; errors point into the spec.

    `location` is where the text starts in the spec and `style` how it is written there
    ("plain", "quoted" or "block"), so that errors can name the column of the bad token.
    """
    if len(text) > MAX_EXPRESSION_CHARS:
        raise SpecError(location, f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    if not text.strip():
        raise SpecError(location, "expression is empty")
    builder = _Builder(text, symbols, location, style)
    try:
        tree = ast.parse(text.strip("\n"), mode="eval")
    except SyntaxError as error:
        column = (error.offset or 1) - 1
        position = ast.Constant(value=0, lineno=error.lineno or 1, col_offset=column)
        raise builder.error(position, f"invalid expression: {error.msg}") from None
    except (RecursionError, MemoryError, ValueError) as error:
        raise SpecError(location, f"invalid expression: {type(error).__name__}") from None
    try:
        return builder.build(tree.body, depth=0)
    except RecursionError:
        raise SpecError(location, "expression is nested too deeply") from None


def from_sympy(
    expr: sympy.Basic, symbols: Mapping[str, sympy.Symbol], location: Location
) -> sympy.Expr:
    """Rebuild a user-given sympy expression over the spec's symbols and functions."""
    if isinstance(expr, (int, float)) and not isinstance(expr, bool):
        return sympy.sympify(expr)
    if not isinstance(expr, sympy.Basic):
        raise SpecError(location, f"expected an expression, got {type(expr).__name__}")
    if isinstance(expr, sympy.Symbol):
        if expr.name not in symbols:
            hint = did_you_mean(expr.name, symbols)
            raise SpecError(location, f"unknown name {expr.name!r}{hint}")
        return symbols[expr.name]
    if isinstance(expr, (sympy.Number, sympy.NumberSymbol)):
        return expr
    args = [from_sympy(arg, symbols, location) for arg in expr.args]
    if isinstance(expr, sympy.Add):
        return sympy.Add(*args)
    if isinstance(expr, sympy.Mul):
        return sympy.Mul(*args)
    if isinstance(expr, sympy.Pow):
        if args[0] == sympy.E:
            return functions.call("exp", args[1])
        return sympy.Pow(*args)
    if isinstance(expr, sympy.Function):
        name = type(expr).__name__
        if name in functions.SPELLINGS:
            return functions.call(name, *args)
    raise SpecError(location, f"unsupported sympy expression {type(expr).__name__}: {expr}")
