"""A language node's arguments as a spec writes them, for the formulas `show` prints."""

from __future__ import annotations

from typing import Any

import sympy

from symgrad.language import layer_norms, segments, views


class Listed(sympy.Function):
    """Arguments shown as one bracketed list: a reshape's sizes, a cat's pieces."""

    @classmethod
    def eval(cls, *args: Any) -> None:
        """Keep the list as written."""
        return None


def _keyword(name: str, value: Any) -> sympy.Symbol:
    """`name=value`, a symbol both printers write as a keyword argument."""
    return sympy.Symbol(f"{name}={value}")


def spec_name(expr: Any) -> str | None:
    """The name a spec uses for this function, where it differs from the class name.

    The language's nodes carry it as `name` (reductions, kinks, the backward's shape
    helpers); the docstrings of the Python backend print the same.
    """
    spelled = getattr(type(expr), "name", None)
    return spelled if isinstance(spelled, str) else None


def piece(expr: Any) -> int | None:
    """The subscript written after the call: a chunk's piece, a split's (a cat's adjoint)."""
    if isinstance(expr, views.Chunk):
        return int(expr.args[3])
    if isinstance(expr, views.CatPiece):
        return expr.piece
    return None


def _view_arguments(expr: Any) -> list[sympy.Basic] | None:
    """The arguments of a view, cat, split or segment sum as the spec writes them."""
    if isinstance(expr, views.Reshape):
        return [expr.argument, Listed(*expr.args[1:])]
    if isinstance(expr, views.Unsqueezed):
        return [expr.argument, expr.args[1]]
    if isinstance(expr, views.Chunk):
        return [expr.argument, expr.args[1], _keyword("dim", expr.args[2])]
    if isinstance(expr, views.Cat):
        return [Listed(*expr.pieces), _keyword("dim", expr.dim)]
    if isinstance(expr, views.CatPiece):
        return [expr.args[0], Listed(*expr.sizes), _keyword("dim", expr.dim)]
    if isinstance(expr, views.ReshapeTo):  # to the shape of its second argument
        return list(expr.args)
    if isinstance(expr, segments.SegmentSum):
        return [expr.source, expr.index, _keyword("dim", expr.dim), expr.args[3]]
    if isinstance(expr, layer_norms.NODES):  # over the last dim, always
        return [expr.argument, expr.eps]
    return None


def keywords(expr: Any) -> list[sympy.Basic] | None:
    """The arguments of a language node as a spec writes them: `dim=-1`, `keepdim=True`.

    None for a function the printers write as sympy does. (Duck-typed for reductions and
    softmax: the nodes store dims as plain arguments.)
    """
    shown = _view_arguments(expr)
    if shown is not None:
        return shown
    if not hasattr(expr, "argument") or spec_name(expr) is None:
        return None
    found = []
    dims = getattr(expr, "dims", None) or getattr(expr, "dim", None)
    if isinstance(dims, int) or (isinstance(dims, tuple) and len(dims) == 1):
        found.append(f"dim={dims if isinstance(dims, int) else dims[0]}")
    elif dims:
        found.append(f"dim={list(dims)}")
    if getattr(expr, "keepdim", False):
        found.append("keepdim=True")
    if getattr(expr, "descending", False):  # a sort
        found.append("descending=True")
    if getattr(expr, "index", None) is not None:  # a gather: its index after the dim
        found.append(f"index={expr.index}")
    return [expr.argument, *(sympy.Symbol(k) for k in found)]
