"""Views in a spec's expressions: reshape / view, unsqueeze, chunk pieces and cat.

Each call is read with torch's meaning (Note [Views] in symgrad.language.views) and
checked argument by argument where it is written. Once every expression is built,
`check_views` computes each view's shape in the test shapes and refuses, located, a
reshape whose sizes cannot hold its value, a chunk count that does not divide its
dim, a dim out of range, and pieces of a cat that do not fit together.
"""

from __future__ import annotations

import ast
from typing import Protocol

import sympy

from symgrad.errors import SpecError
from symgrad.frontend import indices
from symgrad.frontend.model import Spec
from symgrad.language import views

# torch tensors have at most 64 dimensions, and a size is at most 2**62.
_MAX_DIM = 64
_MAX_SIZE = 2**62


class Walker(Protocol):
    """What the view builders need of the expression walker."""

    def error(self, node: ast.AST | None, message: str) -> SpecError: ...

    def value(self, node: ast.AST, depth: int) -> sympy.Expr: ...


def view_call(walker: Walker, node: ast.Call, spelling: str, depth: int) -> sympy.Expr:
    """reshape(e, shape), view(e, shape), unsqueeze(e, dim) or cat([a, b, ...], dim)."""
    if spelling == "chunk":
        message = "chunk() gives several pieces: take one, as in chunk(x, 2, dim=-1)[0]"
        raise walker.error(node.func, message)
    second = "dim" if spelling in ("unsqueeze", "cat") else "shape"
    given = _arguments(walker, node, spelling, (second,))
    if spelling == "cat":
        return views.cat(_pieces(walker, node.args[0], depth), _integer(walker, given["dim"]))
    argument = walker.value(node.args[0], depth)
    if spelling == "unsqueeze":
        return views.unsqueeze(argument, _integer(walker, given["dim"]))
    return views.reshape(argument, _sizes(walker, given["shape"], spelling))


def chunk_piece(walker: Walker, node: ast.Subscript, depth: int) -> sympy.Expr:
    """chunk(e, chunks, dim)[i]: piece i of torch.chunk, the only indexing there is."""
    call = node.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        raise walker.error(node, "indexing is only for a piece of chunk(x, n, dim)[i]")
    if call.func.id != "chunk":
        raise walker.error(node, "indexing is only for a piece of chunk(x, n, dim)[i]")
    given = _arguments(walker, call, "chunk", ("chunks", "dim"))
    chunks = _integer(walker, given["chunks"], limit=_MAX_SIZE)
    if chunks < 1:
        raise walker.error(given["chunks"], f"chunk() needs at least 1 chunk, got {chunks}")
    piece = _integer(walker, node.slice, limit=_MAX_SIZE)
    if not -chunks <= piece < chunks:
        message = f"chunk() piece {piece} is out of range for {chunks} chunks"
        raise walker.error(node.slice, message)
    argument = walker.value(call.args[0], depth)
    return views.chunk(argument, chunks, _integer(walker, given["dim"]), piece % chunks)


def _arguments(
    walker: Walker, node: ast.Call, name: str, parameters: tuple[str, ...]
) -> dict[str, ast.AST]:
    """The call's arguments after the first, by parameter name; each one required."""
    if not node.args or len(node.args) > len(parameters) + 1:
        usage = ", ".join(parameters)
        message = f"{name}() takes a value, then {usage}, got {len(node.args)} arguments"
        raise walker.error(node.func, message)
    given: dict[str, ast.AST] = dict(zip(parameters, node.args[1:], strict=False))
    for keyword in node.keywords:
        if keyword.arg not in parameters:
            raise walker.error(keyword, f"{name}() has no argument {keyword.arg!r}")
        if keyword.arg in given:
            raise walker.error(keyword, f"{name}() got {keyword.arg!r} twice")
        given[keyword.arg] = keyword.value
    for needed in parameters:
        if needed not in given:
            raise walker.error(node.func, f"{name}() needs {needed}")
    return given


def _integer(walker: Walker, node: ast.AST, limit: int = _MAX_DIM) -> int:
    """An integer literal such as 1 or -1."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1, node.operand
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, bool) or not isinstance(value, int) or value > limit:
        raise walker.error(node, f"expected an integer of at most {limit}")
    return sign * value


def _sizes(walker: Walker, node: ast.AST, name: str) -> tuple[int, ...]:
    """A shape: a list or tuple of positive sizes, at most one of them -1."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        raise walker.error(node, f"{name}() takes its shape as a list, e.g. [1, -1, 1, 1]")
    sizes = tuple(_integer(walker, item, limit=_MAX_SIZE) for item in node.elts)
    if len(sizes) > _MAX_DIM:
        raise walker.error(node, f"{name}() shape has more than {_MAX_DIM} dimensions")
    if any(s < 1 and s != -1 for s in sizes) or sizes.count(-1) > 1:
        message = f"{name}() sizes must be positive, with at most one -1, got {list(sizes)}"
        raise walker.error(node, message)
    return sizes


def _pieces(walker: Walker, node: ast.AST, depth: int) -> list[sympy.Expr]:
    """cat's pieces: a list or tuple of values, at least one."""
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        raise walker.error(node, "cat() takes its pieces as a list, e.g. cat([a, b], dim=-1)")
    return [walker.value(item, depth) for item in node.elts]


def check_views(spec: Spec) -> None:
    """Refuse a view or cat that cannot take its value in the test shapes, located."""
    values = {i.symbol: i.expr for i in spec.intermediates}
    for item, section in indices.named_expressions(spec):
        path = f"{section}.{item.name}"
        nodes = item.expr.atoms(*views.SHAPED)
        for node in sorted(nodes, key=lambda n: (sympy.count_ops(n), sympy.default_sort_key(n))):
            read = node.pieces if isinstance(node, views.Cat) else (node.argument,)
            if any(indices.test_shape(r, spec, values) is None for r in read):
                message = f"{node.name}() needs a value that depends on a tensor"
                raise SpecError(item.location, message, path)
            try:
                indices.test_shape(node, spec, values)
            except ValueError as error:
                raise SpecError(item.location, f"{node.name}(): {error}", path) from None
