"""Turn expression strings from a spec into sympy trees, through a fixed whitelist.

A spec is untrusted data, so its strings never reach `eval`, `sympify` or `parse_expr`.
We parse them with Python's `ast` module, accept only arithmetic, numbers, declared
names and calls of language functions, and build the sympy tree node by node.
Size, depth and constant magnitude are bounded so that no input can hang the tool.
"""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import Mapping

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import Boolean

from symgrad.errors import Location, SpecError
from symgrad.language import activations, functions, piecewise, reductions

# Bounds that keep parsing and later symbolic work finite for any input.
MAX_EXPRESSION_CHARS = 20_000
MAX_EXPRESSION_NODES = 10_000
MAX_EXPRESSION_DEPTH = 100
# Largest exact constant (in bits); a float64 holds up to 2**1024.
MAX_CONSTANT_BITS = 1000
# torch tensors have at most 64 dimensions.
_MAX_DIM = 64

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


def did_you_mean(name: str, candidates: object, count: int = 1) -> str:
    """Return ' (did you mean X?)', or ' (did you mean X, Y or Z?)', for the closest
    candidates (at most `count`), or ''."""
    names = sorted(str(c) for c in candidates)  # type: ignore[attr-defined]
    close = [repr(c) for c in difflib.get_close_matches(name, names, n=count)]
    if not close:
        return ""
    listed = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f" (did you mean {listed}?)"


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
            if not math.isfinite(value):
                raise self.error(node, "constant is too large to represent")
            return sympy.Float(repr(value))
        if value.bit_length() > MAX_CONSTANT_BITS:
            raise self.error(node, "constant is too large to represent")
        return sympy.Integer(value)

    def build_Name(self, node: ast.Name, depth: int) -> sympy.Expr:
        name = node.id
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
        if piecewise.is_condition(result):
            raise self.error(node, "a condition is not a value here; use where(cond, a, b)")
        return result

    def condition(self, node: ast.AST, depth: int) -> Boolean:
        """Build `node`, which must be a condition such as x > 0."""
        result = self.build(node, depth)
        if not piecewise.is_condition(result):
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
        operands = [self.value(node.left, depth)]
        operands += [self.value(item, depth) for item in node.comparators]
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
            if right.is_zero:
                raise self.error(node.right, "division by zero")
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
        if not isinstance(node.func, ast.Name):
            raise self.error(node.func, "only functions of the language can be called")
        spelling = node.func.id
        if spelling in self.symbols:
            raise self.error(node.func, f"{spelling!r} is not a function")
        if not is_function_name(spelling):
            hint = did_you_mean(spelling, _distinct_functions(spelling), count=3)
            raise self.error(node.func, f"unknown function {spelling!r}{hint}")
        if spelling in reductions.REDUCTIONS:
            return self.reduction_call(node, spelling, depth)
        if spelling in reductions.NORMALIZATIONS:
            return self.normalization_call(node, spelling, depth)
        if spelling in activations.ACTIVATIONS or spelling in activations.ACTIVATION_ALIASES:
            return self.activation_call(node, spelling, depth)
        if node.keywords:
            raise self.error(node.keywords[0], f"{spelling}() takes no keyword arguments")
        name = piecewise.CONDITIONAL_ALIASES.get(spelling, spelling)
        if name == "Piecewise":
            return self.piecewise_call(node, depth)
        if name in piecewise.CONDITIONAL_FUNCTIONS:
            return self.conditional_call(node, name, depth)
        info = functions.FUNCTIONS[functions.SPELLINGS[spelling]]
        if len(node.args) != info.arity:
            raise self.error(node.func, _arity_message(info.name, info.arity, len(node.args)))
        args = [self.value(arg, depth) for arg in node.args]
        # sympy folds calls on float constants (exp(1.0)); refuse what is out of domain.
        return self.checked_constant(node, functions.call(spelling, *args))

    def reduction_call(self, node: ast.Call, name: str, depth: int) -> sympy.Expr:
        """sum, mean or logsumexp(e, dim=None, keepdim=False), with torch's meaning."""
        parameters = ("dim", "keepdim")
        if not 1 <= len(node.args) <= 3:
            message = f"{name}() takes an expression, then dim and keepdim, got {len(node.args)}"
            raise self.error(node.func, message + " arguments")
        given: dict[str, ast.AST] = dict(zip(parameters, node.args[1:], strict=False))
        for keyword in node.keywords:
            if keyword.arg not in parameters:
                hint = did_you_mean(str(keyword.arg), parameters) if keyword.arg else ""
                raise self.error(keyword, f"{name}() has no argument {keyword.arg!r}{hint}")
            if keyword.arg in given:
                raise self.error(keyword, f"{name}() got {keyword.arg!r} twice")
            given[keyword.arg] = keyword.value
        argument = self.value(node.args[0], depth)
        dims = self.dims(given["dim"], name) if "dim" in given else None
        keepdim = self.keepdim(given["keepdim"], name) if "keepdim" in given else False
        return reductions.reduce(name, argument, dims, keepdim)

    def activation_call(self, node: ast.Call, spelling: str, depth: int) -> sympy.Expr:
        """An activation: its input, then number parameters by position or torch's keyword."""
        cls = activations.ACTIVATIONS[activations.ACTIVATION_ALIASES.get(spelling, spelling)]
        names = [keyword for keyword, _ in cls.parameters]
        keywords = [k for k in node.keywords if not (cls.name == "gelu" and k.arg == "approximate")]
        for keyword in set(node.keywords) - set(keywords):
            cls = activations.ACTIVATIONS[self.gelu_approximation(keyword)]
        if not 1 <= len(node.args) <= 1 + len(names):
            count = f"1 to {1 + len(names)} arguments" if names else "1 argument"
            message = f"{spelling}() takes {count}, got {len(node.args)}"
            raise self.error(node.func, message)
        given: dict[str, ast.AST] = dict(zip(names, node.args[1:], strict=False))
        for keyword in keywords:
            if keyword.arg not in names:
                hint = did_you_mean(str(keyword.arg), names) if keyword.arg else ""
                raise self.error(keyword, f"{spelling}() has no argument {keyword.arg!r}{hint}")
            if keyword.arg in given:
                raise self.error(keyword, f"{spelling}() got {keyword.arg!r} twice")
            given[keyword.arg] = keyword.value
        values = tuple(
            self.value(given[name], depth) if name in given else sympy.Float(default)
            for name, default in cls.parameters
        )
        problem = cls.check_parameters(values)
        if problem is not None:
            raise self.error(node, problem)
        return cls(self.value(node.args[0], depth), *values)

    def gelu_approximation(self, keyword: ast.keyword) -> str:
        """gelu's `approximate="none"` or `"tanh"`, as torch spells it."""
        value = keyword.value
        choice = value.value if isinstance(value, ast.Constant) else None
        if choice not in activations.GELU_APPROXIMATIONS:
            raise self.error(value, 'gelu() approximate must be "none" or "tanh"')
        return activations.GELU_APPROXIMATIONS[choice]

    def normalization_call(self, node: ast.Call, name: str, depth: int) -> sympy.Expr:
        """softmax or log_softmax(e, dim), with torch's meaning; dim is required."""
        if len(node.args) not in (1, 2):
            message = f"{name}() takes an expression and a dim, got {len(node.args)} arguments"
            raise self.error(node.func, message)
        given: dict[str, ast.AST] = dict(zip(("dim",), node.args[1:], strict=False))
        for keyword in node.keywords:
            if keyword.arg != "dim" or "dim" in given:
                raise self.error(keyword, f"{name}() takes one keyword argument, dim")
            given["dim"] = keyword.value
        if "dim" not in given:
            raise self.error(node.func, f"{name}() needs a dim, e.g. {name}(x, dim=-1)")
        argument = self.value(node.args[0], depth)
        return reductions.normalize(name, argument, self.small_integer(given["dim"], name))

    def dims(self, node: ast.AST, name: str) -> tuple[int, ...] | None:
        """`dim=`: None, an integer, or a list or tuple of distinct integers of one sign."""
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
        dims = tuple(self.small_integer(item, name) for item in items)
        if not dims:
            raise self.error(node, f"{name}() needs at least one dim (or dim=None for all)")
        if len(set(dims)) != len(dims):
            raise self.error(node, f"{name}() lists a dim twice")
        if min(dims) < 0 <= max(dims):
            raise self.error(
                node, f"{name}() dims must be all negative or all non-negative, got {list(dims)}"
            )
        return dims

    def small_integer(self, node: ast.AST, name: str) -> int:
        """An integer literal such as 1 or -1, for a dimension."""
        sign = 1
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            sign, node = -1, node.operand
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(value, bool) or not isinstance(value, int) or value > _MAX_DIM:
            raise self.error(node, f"{name}() dim must be an integer or a list of integers")
        return sign * value

    def keepdim(self, node: ast.AST, name: str) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return node.value
        raise self.error(node, f"{name}() keepdim must be True or False")

    def piecewise_call(self, node: ast.Call, depth: int) -> sympy.Expr:
        """sympy's Piecewise((a, cond), ..., (z, True)) as nested where()."""
        cases = []
        for case in node.args:
            if not (isinstance(case, ast.Tuple) and len(case.elts) == 2):
                raise self.error(case, "Piecewise takes (value, condition) pairs")
            value_node, condition_node = case.elts
            is_otherwise = isinstance(condition_node, ast.Constant) and condition_node.value is True
            condition = sympy.true if is_otherwise else self.condition(condition_node, depth)
            cases.append((self.value(value_node, depth), condition))
        if not cases or cases[-1][1] is not sympy.true:
            raise self.error(node.func, "Piecewise needs a last case (value, True)")
        result = cases[-1][0]
        for value, condition in reversed(cases[:-1]):
            result = piecewise.where(condition, value, result)
        return result

    def conditional_call(self, node: ast.Call, name: str, depth: int) -> sympy.Expr:
        """where(cond, a, b), relu, max, min or clamp."""
        arity, build = piecewise.CONDITIONAL_FUNCTIONS[name]
        if len(node.args) != arity:
            raise self.error(node.func, _arity_message(name, arity, len(node.args)))
        if name == "where":
            cond = self.condition(node.args[0], depth)
            values = [self.value(arg, depth) for arg in node.args[1:]]
            return build(cond, *values)
        return build(*(self.value(arg, depth) for arg in node.args))


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


def _arity_message(name: str, arity: int, given: int) -> str:
    plural = "s" if arity != 1 else ""
    return f"{name}() takes {arity} argument{plural}, got {given}"


def function_names() -> list[str]:
    """Every function spelling the language accepts."""
    return [
        *functions.SPELLINGS,
        *piecewise.CONDITIONAL_FUNCTIONS,
        *piecewise.CONDITIONAL_ALIASES,
        *reductions.REDUCTIONS,
        *reductions.NORMALIZATIONS,
        *activations.ACTIVATIONS,
        *activations.ACTIVATION_ALIASES,
        "Piecewise",
    ]


def _distinct_functions(name: str) -> list[str]:
    """The spellings nearest `name`, one per function (not sigmoid's aliases next to it)."""
    aliases = {
        **functions.SPELLINGS,
        **piecewise.CONDITIONAL_ALIASES,
        **activations.ACTIVATION_ALIASES,
    }
    nearest = difflib.get_close_matches(name, function_names(), n=12)
    by_function = {aliases.get(spelling, spelling): spelling for spelling in reversed(nearest)}
    return list(by_function.values())


def is_function_name(name: str) -> bool:
    return name in function_names()


def _describe(node: ast.AST) -> str:
    """A short human name for an AST node type."""
    return _DESCRIPTIONS.get(type(node), f"'{type(node).__name__}'")


def _operator_message(operator: ast.AST) -> str:
    spelling = _OPERATOR_SPELLINGS.get(type(operator), type(operator).__name__)
    hint = "; use ** for powers" if isinstance(operator, ast.BitXor) else ""
    return f"operator {spelling!r} is not allowed{hint}"


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


def from_sympy(
    expr: sympy.Basic, symbols: Mapping[str, sympy.Symbol], location: Location
) -> sympy.Expr:
    """Rebuild a user-given sympy expression over the spec's symbols and functions."""
    if isinstance(expr, (int, float)) and not isinstance(expr, bool):
        expr = sympy.sympify(expr)
    if not isinstance(expr, sympy.Basic):
        raise SpecError(location, f"expected an expression, got {type(expr).__name__}")
    if isinstance(expr, sympy.Symbol):
        if expr.name not in symbols:
            hint = did_you_mean(expr.name, symbols)
            raise SpecError(location, f"unknown name {expr.name!r}{hint}")
        return symbols[expr.name]
    if isinstance(expr, sympy.NumberSymbol) and expr in (sympy.pi, sympy.E):
        return expr
    if isinstance(expr, sympy.Number):
        if not expr.is_finite:
            raise SpecError(location, f"constant {expr} is not a finite number")
        return expr
    if isinstance(expr, sympy.Piecewise):
        return _from_sympy_piecewise(expr, symbols, location)
    if isinstance(expr, (sympy.Max, sympy.Min)) and len(expr.args) == 2:
        kind = piecewise.Maximum if isinstance(expr, sympy.Max) else piecewise.Minimum
        result: sympy.Expr = kind(*(from_sympy(a, symbols, location) for a in expr.args))
        return result
    if isinstance(expr, piecewise.Kink):
        return type(expr)(*(from_sympy(a, symbols, location) for a in expr.args))
    if isinstance(expr, sympy.Function) and type(expr).__name__ in functions.SPELLINGS:
        info = functions.FUNCTIONS[functions.SPELLINGS[type(expr).__name__]]
        if len(expr.args) != info.arity:
            raise SpecError(location, _arity_message(info.name, info.arity, len(expr.args)))
    elif not isinstance(expr, (sympy.Add, sympy.Mul, sympy.Pow)):
        raise SpecError(location, f"unsupported sympy expression {type(expr).__name__}: {expr}")
    args = [from_sympy(arg, symbols, location) for arg in expr.args]
    if isinstance(expr, sympy.Add):
        return sympy.Add(*args)
    if isinstance(expr, sympy.Mul):
        return sympy.Mul(*args)
    if isinstance(expr, sympy.Pow):
        return functions.call("exp", args[1]) if args[0] == sympy.E else sympy.Pow(*args)
    if isinstance(expr, sympy.sinc):  # sympy's is sin(x)/x; the language's is torch's
        return functions.call("sinc", args[0] / sympy.pi)
    return functions.call(type(expr).__name__, *args)


def _from_sympy_piecewise(
    expr: sympy.Piecewise, symbols: Mapping[str, sympy.Symbol], location: Location
) -> sympy.Expr:
    """sympy's Piecewise as nested where(); it must end with a (value, True) case."""
    *cases, (last_value, last_condition) = expr.args
    if last_condition is not sympy.true:
        raise SpecError(location, "Piecewise needs a last case (value, True)")
    result = from_sympy(last_value, symbols, location)
    for value, condition in reversed(cases):
        result = piecewise.where(
            _condition_from_sympy(condition, symbols, location),
            from_sympy(value, symbols, location),
            result,
        )
    return result


def _condition_from_sympy(
    condition: sympy.Basic, symbols: Mapping[str, sympy.Symbol], location: Location
) -> sympy.Basic:
    if isinstance(condition, Relational):
        lhs, rhs = (from_sympy(side, symbols, location) for side in condition.args)
        return piecewise.compare(type(condition), lhs, rhs)
    if isinstance(condition, (sympy.And, sympy.Or, sympy.Not)):
        return type(condition)(
            *(_condition_from_sympy(a, symbols, location) for a in condition.args)
        )
    raise SpecError(location, f"unsupported condition {type(condition).__name__}: {condition}")
