"""Calls in a spec's expressions: functions, reductions, activations and conditionals.

Each call is checked argument by argument (count, keywords, dims) and built as the
language's node. The expression walker (`symgrad.frontend.expr`) hands every `ast.Call`
to `build_call`, passing itself as the `Walker` that builds arguments and points errors.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Protocol

import sympy
from sympy.logic.boolalg import Boolean

from symgrad.errors import SpecError, did_you_mean
from symgrad.frontend import views as view_calls
from symgrad.frontend.contractions import contraction_call
from symgrad.language import (
    activations,
    arg_extrema,
    contractions,
    dtypes,
    functions,
    indexing,
    layer_norms,
    piecewise,
    reductions,
    scans,
    segment_extrema,
    segments,
    views,
)
from symgrad.language.names import is_function_name, nearest_functions

# torch tensors have at most 64 dimensions.
_MAX_DIM = 64


class Walker(Protocol):
    """What the call builders need of the expression walker."""

    symbols: Mapping[str, sympy.Symbol]
    # Above 0 while a comparison's operands (or an index's positions) are read.
    comparing: int

    def error(self, node: ast.AST | None, message: str) -> SpecError: ...

    def value(self, node: ast.AST, depth: int) -> sympy.Expr: ...

    def condition(self, node: ast.AST, depth: int) -> Boolean: ...

    def checked_constant(self, node: ast.AST, value: sympy.Expr) -> sympy.Expr: ...


def build_call(walker: Walker, node: ast.Call, depth: int) -> sympy.Expr:
    if not isinstance(node.func, ast.Name):
        raise walker.error(node.func, "only functions of the language can be called")
    spelling = node.func.id
    if spelling in walker.symbols:
        raise walker.error(node.func, f"{spelling!r} is not a function")
    if not is_function_name(spelling):
        hint = did_you_mean(spelling, nearest_functions(spelling), count=3)
        raise walker.error(node.func, f"unknown function {spelling!r}{hint}")
    if spelling in reductions.REDUCTIONS:
        return _reduction_call(walker, node, spelling, depth)
    if spelling in reductions.NORMALIZATIONS:
        return _normalization_call(walker, node, spelling, depth)
    if spelling == layer_norms.LAYER_NORM:
        return _layer_norm_call(walker, node, depth)
    if spelling in indexing.GATHER_SPELLINGS:
        return _gather_call(walker, node, spelling, depth)
    if spelling in views.VIEW_SPELLINGS:
        return view_calls.view_call(walker, node, spelling, depth)
    if spelling in scans.SCANS or spelling in scans.POSITION_SPELLINGS:
        return _scan_call(walker, node, spelling, depth)
    if spelling in contractions.CONTRACTION_SPELLINGS:
        return contraction_call(walker, node, spelling, depth)
    if spelling in (segments.SEGMENT_SUM, segment_extrema.SEGMENT_AMAX):
        return _segment_sum_call(walker, node, spelling, depth)
    if spelling in arg_extrema.ARG_EXTREMA or _is_extremum_along(node, spelling):
        return _arg_extremum_call(walker, node, spelling, depth)
    if spelling == segments.INDEX_SELECT:
        return _index_select_call(walker, node, depth)
    if spelling == dtypes.FINFO_EPS:
        return _finfo_eps_call(walker, node)
    if spelling in activations.ACTIVATIONS or spelling in activations.ACTIVATION_ALIASES:
        return _activation_call(walker, node, spelling, depth)
    if node.keywords:
        raise walker.error(node.keywords[0], f"{spelling}() takes no keyword arguments")
    name = piecewise.CONDITIONAL_ALIASES.get(spelling, spelling)
    if name == "Piecewise":
        return _piecewise_call(walker, node, depth)
    if name in piecewise.CONDITIONAL_FUNCTIONS:
        return _conditional_call(walker, node, name, depth)
    info = functions.FUNCTIONS[functions.SPELLINGS[spelling]]
    if len(node.args) != info.arity:
        raise walker.error(node.func, arity_message(info.name, info.arity, len(node.args)))
    args = [walker.value(arg, depth) for arg in node.args]
    # sympy folds calls on float constants (exp(1.0)); refuse what is out of domain.
    return walker.checked_constant(node, functions.call(spelling, *args))


def _reduction_call(walker: Walker, node: ast.Call, name: str, depth: int) -> sympy.Expr:
    """sum, mean or logsumexp(e, dim=None, keepdim=False), with torch's meaning."""
    parameters = ("dim", "keepdim")
    if not 1 <= len(node.args) <= 3:
        message = f"{name}() takes an expression, then dim and keepdim, got {len(node.args)}"
        raise walker.error(node.func, message + " arguments")
    given: dict[str, ast.AST] = dict(zip(parameters, node.args[1:], strict=False))
    for keyword in node.keywords:
        if keyword.arg not in parameters:
            hint = did_you_mean(str(keyword.arg), parameters) if keyword.arg else ""
            raise walker.error(keyword, f"{name}() has no argument {keyword.arg!r}{hint}")
        if keyword.arg in given:
            raise walker.error(keyword, f"{name}() got {keyword.arg!r} twice")
        given[keyword.arg] = keyword.value
    argument = walker.value(node.args[0], depth)
    dims = _dims(walker, given["dim"], name) if "dim" in given else None
    keepdim = _keepdim(walker, given["keepdim"], name) if "keepdim" in given else False
    return reductions.reduce(name, argument, dims, keepdim)


def _activation_call(walker: Walker, node: ast.Call, spelling: str, depth: int) -> sympy.Expr:
    """An activation: its input, then number parameters by position or torch's keyword."""
    cls = activations.ACTIVATIONS[activations.ACTIVATION_ALIASES.get(spelling, spelling)]
    names = [keyword for keyword, _ in cls.parameters]
    keywords = [k for k in node.keywords if not (cls.name == "gelu" and k.arg == "approximate")]
    for keyword in set(node.keywords) - set(keywords):
        cls = activations.ACTIVATIONS[_gelu_approximation(walker, keyword)]
    if not 1 <= len(node.args) <= 1 + len(names):
        count = f"1 to {1 + len(names)} arguments" if names else "1 argument"
        message = f"{spelling}() takes {count}, got {len(node.args)}"
        raise walker.error(node.func, message)
    given: dict[str, ast.AST] = dict(zip(names, node.args[1:], strict=False))
    for keyword in keywords:
        if keyword.arg not in names:
            hint = did_you_mean(str(keyword.arg), names) if keyword.arg else ""
            raise walker.error(keyword, f"{spelling}() has no argument {keyword.arg!r}{hint}")
        if keyword.arg in given:
            raise walker.error(keyword, f"{spelling}() got {keyword.arg!r} twice")
        given[keyword.arg] = keyword.value
    values = tuple(
        walker.value(given[name], depth) if name in given else sympy.Float(default)
        for name, default in cls.parameters
    )
    problem = cls.check_parameters(values)
    if problem is not None:
        raise walker.error(node, problem)
    return cls(walker.value(node.args[0], depth), *values)


def _gelu_approximation(walker: Walker, keyword: ast.keyword) -> str:
    """gelu's `approximate="none"` or `"tanh"`, as torch spells it."""
    value = keyword.value
    choice = value.value if isinstance(value, ast.Constant) else None
    if choice not in activations.GELU_APPROXIMATIONS:
        raise walker.error(value, 'gelu() approximate must be "none" or "tanh"')
    return activations.GELU_APPROXIMATIONS[choice]


def _normalization_call(walker: Walker, node: ast.Call, name: str, depth: int) -> sympy.Expr:
    """softmax or log_softmax(e, dim), with torch's meaning; dim is required."""
    if len(node.args) not in (1, 2):
        message = f"{name}() takes an expression and a dim, got {len(node.args)} arguments"
        raise walker.error(node.func, message)
    given: dict[str, ast.AST] = dict(zip(("dim",), node.args[1:], strict=False))
    for keyword in node.keywords:
        if keyword.arg != "dim" or "dim" in given:
            raise walker.error(keyword, f"{name}() takes one keyword argument, dim")
        given["dim"] = keyword.value
    if "dim" not in given:
        raise walker.error(node.func, f"{name}() needs a dim, e.g. {name}(x, dim=-1)")
    argument = walker.value(node.args[0], depth)
    return reductions.normalize(name, argument, _small_integer(walker, given["dim"], name))


def _layer_norm_call(walker: Walker, node: ast.Call, depth: int) -> sympy.Expr:
    """layer_norm(e, eps=1e-5): normalised over the last dim (Note [Layer norm])."""
    if len(node.args) not in (1, 2) or any(k.arg != "eps" for k in node.keywords):
        raise walker.error(node.func, "layer_norm() takes an expression and eps")
    given = [*node.args[1:], *(k.value for k in node.keywords)]
    if len(given) > 1:
        raise walker.error(node.func, "layer_norm() got eps twice")
    eps = walker.value(given[0], depth) if given else sympy.Float(1e-5)
    return layer_norms.layer_norm(walker.value(node.args[0], depth), eps)


def _gather_call(walker: Walker, node: ast.Call, spelling: str, depth: int) -> sympy.Expr:
    """gather(e, dim, index) or take_along_dim(e, index, dim), with torch's meaning.

    The index is an index input or a computed one (Note [Arg extrema]); dim is required.
    """
    parameters = ("dim", "index") if spelling == "gather" else ("indices", "dim")
    if not 1 <= len(node.args) <= 3:
        usage = ", ".join(parameters)
        message = f"{spelling}() takes an expression, then {usage}, got {len(node.args)} arguments"
        raise walker.error(node.func, message)
    given: dict[str, ast.AST] = dict(zip(parameters, node.args[1:], strict=False))
    for keyword in node.keywords:
        if keyword.arg not in parameters:
            hint = did_you_mean(str(keyword.arg), parameters) if keyword.arg else ""
            raise walker.error(keyword, f"{spelling}() has no argument {keyword.arg!r}{hint}")
        if keyword.arg in given:
            raise walker.error(keyword, f"{spelling}() got {keyword.arg!r} twice")
        given[keyword.arg] = keyword.value
    for needed in parameters:
        if needed not in given:
            raise walker.error(node.func, f"{spelling}() needs {needed}")
    argument = walker.value(node.args[0], depth)
    index_node = given[parameters[1] if spelling == "gather" else parameters[0]]
    index = _index_input(walker, index_node, depth)
    return indexing.gather(argument, _small_integer(walker, given["dim"], spelling), index)


def _scan_call(walker: Walker, node: ast.Call, name: str, depth: int) -> sympy.Expr:
    """cumsum, flip or position(e, dim), or sort(e, dim=-1, descending=False) (Note [Scans
    and sort]); dim is one integer, required but for sort's."""
    parameters: tuple[str, ...] = ("dim", "descending") if name == "sort" else ("dim",)
    given = _arguments(walker, node, name, parameters, required=())
    if "dim" not in given and name != "sort":
        raise walker.error(node.func, f"{name}() needs a dim, e.g. {name}(x, dim=-1)")
    dim = _small_integer(walker, given["dim"], name) if "dim" in given else -1
    descending = (
        _flag(walker, given["descending"], name, "descending") if "descending" in given else False
    )
    return scans.along(name, walker.value(node.args[0], depth), dim, descending)


def _segment_sum_call(walker: Walker, node: ast.Call, name: str, depth: int) -> sympy.Expr:
    """segment_sum or segment_amax(e, index, dim, size): index_add or index_reduce into
    `size` segments (Notes [Segment sums], [Segment maxima])."""
    parameters = ("index", "dim", "size")
    given = _arguments(walker, node, name, parameters)
    argument = walker.value(node.args[0], depth)
    index = _index_input(walker, given["index"], depth)
    dim = _small_integer(walker, given["dim"], name)
    build = segments.segment_sum if name == segments.SEGMENT_SUM else segment_extrema.segment_amax
    return build(argument, dim, index, _segment_count(walker, given["size"], name))


def _index_select_call(walker: Walker, node: ast.Call, depth: int) -> sympy.Expr:
    """index_select(e, dim, index): torch.index_select by a 1-d index input (Note [Index
    selects])."""
    given = _arguments(walker, node, segments.INDEX_SELECT, ("dim", "index"))
    argument = walker.value(node.args[0], depth)
    index = _index_input(walker, given["index"], depth)
    return segments.index_select(
        argument, _small_integer(walker, given["dim"], "index_select"), index
    )


def _finfo_eps_call(walker: Walker, node: ast.Call) -> sympy.Expr:
    """finfo_eps(x): the eps of the tensor input x's dtype (Note [Dtype constants])."""
    if node.keywords or len(node.args) != 1:
        raise walker.error(node.func, "finfo_eps() takes one argument, a tensor input's name")
    arg = node.args[0]
    symbol = walker.symbols.get(arg.id) if isinstance(arg, ast.Name) else None
    if symbol is None or symbol.is_integer or isinstance(symbol, indexing.IndexSymbol):
        raise walker.error(arg, "finfo_eps() takes the name of a tensor input")
    return dtypes.FinfoEps(symbol)


def _segment_count(walker: Walker, node: ast.AST, name: str) -> sympy.Expr:
    """A positive integer literal, or the name of an int input."""
    if isinstance(node, ast.Constant) and type(node.value) is int and 0 < node.value <= 2**31:
        return sympy.Integer(node.value)
    symbol = walker.symbols.get(node.id) if isinstance(node, ast.Name) else None
    if symbol is None or not symbol.is_integer or isinstance(symbol, indexing.IndexSymbol):
        message = f"{name}() size must be a positive integer or the name of an int input"
        raise walker.error(node, message)
    return symbol


def _arguments(
    walker: Walker,
    node: ast.Call,
    name: str,
    parameters: tuple[str, ...],
    required: tuple[str, ...] | None = None,
) -> dict[str, ast.AST]:
    """The arguments after the first, by parameter name; `required` (all by default) must
    be given."""
    if not 1 <= len(node.args) <= len(parameters) + 1:
        usage = " and ".join(", ".join(parameters).rsplit(", ", 1))
        message = f"{name}() takes an expression, then {usage}, got {len(node.args)} arguments"
        raise walker.error(node.func, message)
    given: dict[str, ast.AST] = dict(zip(parameters, node.args[1:], strict=False))
    for keyword in node.keywords:
        if keyword.arg not in parameters:
            hint = did_you_mean(str(keyword.arg), parameters) if keyword.arg else ""
            raise walker.error(keyword, f"{name}() has no argument {keyword.arg!r}{hint}")
        if keyword.arg in given:
            raise walker.error(keyword, f"{name}() got {keyword.arg!r} twice")
        given[keyword.arg] = keyword.value
    for needed in parameters if required is None else required:
        if needed not in given:
            raise walker.error(node.func, f"{name}() needs {needed}")
    return given


def _positions(walker: Walker, node: ast.AST, depth: int) -> sympy.Expr:
    """The value written where an index is read: index inputs may appear in it, as they
    may in a comparison (they are positions here, not values to compute with)."""
    walker.comparing += 1
    try:
        return walker.value(node, depth)
    finally:
        walker.comparing -= 1


def _index_input(walker: Walker, node: ast.AST, depth: int) -> sympy.Expr:
    """An index: an index input or a `where` name of an argmax/argmin by name, or an
    argmax/argmin call (Note [Arg extrema]); a float value is refused where it is."""
    what = "a float value"
    if isinstance(node, ast.Name):
        symbol = walker.symbols.get(node.id)
        if isinstance(symbol, indexing.IndexSymbol):
            return symbol
    else:
        value = _positions(walker, node, depth)
        if arg_extrema.is_positions(value):
            return value
        if any(isinstance(s, indexing.IndexSymbol) for s in value.free_symbols):
            what = "arithmetic on positions"
    message = (
        "the index must be an input of type: index, argmax/argmin(...), a where name of one,"
        " or unsqueeze/reshape/where of those"
    )
    raise walker.error(node, f"{message}, not {what}")


def _is_extremum_along(node: ast.Call, spelling: str) -> bool:
    """`max(e, dim=d)` or `min(e, dim=d)`: values along a dim, told apart from the
    elementwise `max(a, b)` by the `dim` keyword (Note [Arg extrema])."""
    return spelling in arg_extrema.PICKED_BY and any(k.arg == "dim" for k in node.keywords)


def _arg_extremum_call(walker: Walker, node: ast.Call, name: str, depth: int) -> sympy.Expr:
    """argmax/argmin(e, dim, keepdim=False), or max/min(e, dim=d, keepdim=False)."""
    given = _arguments(walker, node, name, ("dim", "keepdim"), required=("dim",))
    argument = walker.value(node.args[0], depth)
    dim = _small_integer(walker, given["dim"], name)
    keepdim = _keepdim(walker, given["keepdim"], name) if "keepdim" in given else False
    if name in arg_extrema.PICKED_BY:
        return arg_extrema.extremum_along(name, argument, dim, keepdim)
    return arg_extrema.arg_extremum(name, argument, dim, keepdim)


def _dims(walker: Walker, node: ast.AST, name: str) -> tuple[int, ...] | None:
    """`dim=`: None, an integer, or a list or tuple of distinct integers of one sign."""
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    dims = tuple(_small_integer(walker, item, name) for item in items)
    if not dims:
        raise walker.error(node, f"{name}() needs at least one dim (or dim=None for all)")
    if len(set(dims)) != len(dims):
        raise walker.error(node, f"{name}() lists a dim twice")
    if min(dims) < 0 <= max(dims):
        raise walker.error(
            node, f"{name}() dims must be all negative or all non-negative, got {list(dims)}"
        )
    return dims


def _small_integer(walker: Walker, node: ast.AST, name: str) -> int:
    """An integer literal such as 1 or -1, for a dimension."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1, node.operand
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, bool) or not isinstance(value, int) or value > _MAX_DIM:
        raise walker.error(node, f"{name}() dim must be an integer or a list of integers")
    return sign * value


def _keepdim(walker: Walker, node: ast.AST, name: str) -> bool:
    return _flag(walker, node, name, "keepdim")


def _flag(walker: Walker, node: ast.AST, name: str, parameter: str) -> bool:
    """A literal True or False, for `parameter` of `name`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    raise walker.error(node, f"{name}() {parameter} must be True or False")


def _piecewise_call(walker: Walker, node: ast.Call, depth: int) -> sympy.Expr:
    """sympy's Piecewise((a, cond), ..., (z, True)) as nested where()."""
    cases = []
    for case in node.args:
        if not (isinstance(case, ast.Tuple) and len(case.elts) == 2):
            raise walker.error(case, "Piecewise takes (value, condition) pairs")
        value_node, condition_node = case.elts
        is_otherwise = isinstance(condition_node, ast.Constant) and condition_node.value is True
        condition = sympy.true if is_otherwise else walker.condition(condition_node, depth)
        cases.append((walker.value(value_node, depth), condition))
    if not cases or cases[-1][1] is not sympy.true:
        raise walker.error(node.func, "Piecewise needs a last case (value, True)")
    result = cases[-1][0]
    for value, condition in reversed(cases[:-1]):
        result = piecewise.where(condition, value, result)
    return result


def _conditional_call(walker: Walker, node: ast.Call, name: str, depth: int) -> sympy.Expr:
    """where(cond, a, b), relu, max, min or clamp."""
    arity, build = piecewise.CONDITIONAL_FUNCTIONS[name]
    if len(node.args) != arity:
        raise walker.error(node.func, arity_message(name, arity, len(node.args)))
    if name == "where":
        cond = walker.condition(node.args[0], depth)
        values = [walker.value(arg, depth) for arg in node.args[1:]]
        return build(cond, *values)
    return build(*(walker.value(arg, depth) for arg in node.args))


def arity_message(name: str, arity: int, given: int) -> str:
    plural = "s" if arity != 1 else ""
    return f"{name}() takes {arity} argument{plural}, got {given}"
