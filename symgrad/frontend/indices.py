"""Index inputs and their gathers: declared, then checked against the shapes they index.

An index input (`type: index`, Note [Index inputs] in symgrad.language.indexing) needs a
`shape` and takes no other key. Once every expression is built, each gather is checked
where the test shapes tell: the index has the gathered value's rank, `dim` is one of its
dimensions, and every other dimension of the index fits in the value's, as torch.gather
requires. The generated test samples the index below the size of the gathered dim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

import sympy

from symgrad.errors import Location, SpecError
from symgrad.frontend import fields as read
from symgrad.frontend.domains import broadcast_shapes, default_shape
from symgrad.frontend.loader import Node
from symgrad.frontend.model import Input, InputType, Intermediate, Output, Spec
from symgrad.language import arg_extrema, contractions, indexing, reductions, scans, segments, views

Node_ = TypeVar("Node_", bound=sympy.Basic)

# The keys an index input takes.
INDEX_KEYS = ("type", "shape")


def parse_index_input(name: str, location: Location, node: Node) -> Input:
    """`name: {type: index, shape: [...]}`: an int64 tensor of positions, no gradient."""
    path = f"inputs.{name}"
    if isinstance(node.value, str):
        raise SpecError(
            node.location, "an index input needs a shape: {type: index, shape: [...]}", path
        )
    section = read.Section(node, path, INDEX_KEYS)
    section.require("type")
    shape_node = section.optional("shape")
    if shape_node is None:
        raise SpecError(node.location, "an index input needs a shape, e.g. shape: [4, 3]", path)
    shape = read.shape(shape_node, f"{path}.shape")
    section.finish()
    symbol = indexing.index_symbol(name)
    return Input(name, InputType.INDEX, symbol, False, None, shape, None, (), location)


def test_shape(
    expr: sympy.Basic, spec: Spec, values: Mapping[sympy.Basic, sympy.Basic]
) -> tuple[int, ...] | None:
    """The shape `expr` has in the generated test, or None for a number."""
    inputs = {i.symbol: i for i in spec.tensor_inputs}
    fallback = default_shape(spec)

    def visit(node: sympy.Basic) -> tuple[int, ...] | None:
        if node in inputs:
            return inputs[node].shape if inputs[node].shape is not None else fallback
        if node in values:
            return visit(values[node])
        if isinstance(node, indexing.Gather):
            return visit(node.index)
        if isinstance(node, contractions.Einsum):
            return contractions.einsum_shape(node, [visit(o) for o in node.operands])
        if isinstance(node, segments.SegmentSum):
            return _segmented(visit(node.source), node, spec)
        if isinstance(node, segments.IndexSelect):
            return _selected(visit(node.argument), node, visit(node.index))
        if isinstance(node, reductions.Reduction):
            return _reduced(visit(node.argument), node.dims, node.keepdim)
        if isinstance(node, views.View):  # Note [Views]; ValueError where it cannot
            inner = visit(node.argument)
            return None if inner is None else views.view_shape(node, inner)
        if isinstance(node, views.Cat):
            pieces = [visit(piece) for piece in node.pieces]
            known = [p for p in pieces if p is not None]
            return views.cat_shape(node.dim, known) if len(known) == len(pieces) else None
        shapes = [s for s in map(visit, node.args) if s is not None]
        return broadcast_shapes(shapes) if shapes else None

    return visit(expr)


def _reduced(
    shape: tuple[int, ...] | None, dims: tuple[int, ...] | None, keepdim: bool
) -> tuple[int, ...] | None:
    """`shape` reduced over `dims` (all when None), as torch reduces it."""
    if shape is None:
        return None
    rank = len(shape)
    gone = set(range(rank)) if dims is None else {d % rank for d in dims} if rank else set()
    if keepdim:
        return tuple(1 if n in gone else size for n, size in enumerate(shape))
    return tuple(size for n, size in enumerate(shape) if n not in gone)


def gathers(spec: Spec) -> list[tuple[indexing.Gather, Location, str]]:
    """Every gather of the spec's expressions, with where it is written and its path."""
    found = []
    for item, section in named_expressions(spec):
        for node in sorted(item.expr.atoms(indexing.Gather), key=sympy.default_sort_key):
            found.append((node, item.location, f"{section}.{item.name}"))
    return found


def named_expressions(spec: Spec) -> Iterable[tuple[Intermediate | Output, str]]:
    """The spec's named expressions with their section, in order."""
    yield from ((i, "where") for i in spec.intermediates)
    yield from ((o, "outputs") for o in spec.outputs)


def _segmented(
    shape: tuple[int, ...] | None, node: segments.SegmentSum, spec: Spec
) -> tuple[int, ...] | None:
    """The shape of a segment sum of a value of `shape` in the test."""
    if not shape:
        return shape
    dim, size = node.dim % len(shape), _segment_count(node, spec)
    return (*shape[:dim], size, *shape[dim + 1 :])


def _selected(
    shape: tuple[int, ...] | None, node: segments.IndexSelect, index: tuple[int, ...] | None
) -> tuple[int, ...] | None:
    """The shape of an index_select of a value of `shape` by a 1-d index of `index`'s."""
    if not shape or not index or not -len(shape) <= node.dim < len(shape):
        return shape
    dim = node.dim % len(shape)
    return (*shape[:dim], index[0], *shape[dim + 1 :])


def _segment_count(node: segments.SegmentSum, spec: Spec) -> int:
    """The number of segments in the test: the literal, or the int input's test value."""
    if node.size.is_Integer:
        return int(node.size)
    item = next(i for i in spec.inputs if i.symbol == node.size)
    return int(item.default) if item.default is not None else 1


def segment_sums(spec: Spec) -> list[tuple[segments.SegmentSum, Location, str]]:
    """Every segment sum of the spec's expressions, with where it is written and its path."""
    return _written(spec, segments.SegmentSum)


def _written(spec: Spec, kind: type[Node_]) -> list[tuple[Node_, Location, str]]:
    """Every node of `kind` in the spec's expressions, where it is written and its path."""
    found = []
    for item, section in named_expressions(spec):
        for node in sorted(item.expr.atoms(kind), key=sympy.default_sort_key):
            found.append((node, item.location, f"{section}.{item.name}"))
    return found


def check_segment_sums(spec: Spec) -> None:
    """Refuse a segment sum whose index is not one position per slice of its value."""
    values = {i.symbol: i.expr for i in spec.intermediates}
    by_symbol = {i.symbol: i for i in spec.inputs}
    for node, location, path in segment_sums(spec):
        shape = test_shape(node.source, spec, values)
        if not shape:
            raise SpecError(location, f"{node.name}() needs a value with dimensions", path)
        if not -len(shape) <= node.dim < len(shape):
            message = f"{node.name}() dim {node.dim} is out of range for {len(shape)} dimensions"
            raise SpecError(location, message, path)
        if node.size.is_Symbol and by_symbol[node.size].default is None:
            message = f"{node.name}() size {node.size} needs a default, the test's segment count"
            raise SpecError(location, message, path)
        index_shape = list(test_shape(node.index, spec, values) or ())
        if index_shape != [shape[node.dim]]:
            message = (
                f"{node.name}() index {_index_name(node.index)!r} must have shape "
                f"[{shape[node.dim]}], one position per slice along dim {node.dim}, but has "
                f"{index_shape}"
            )
            raise SpecError(location, message, path)


def _index_name(index: sympy.Basic) -> str:
    """How an error names an index: its name, or the call that computes it."""
    return str(index) if index.is_Symbol else f"{getattr(index, 'name', 'index')}(...)"


def check_index_positions(spec: Spec) -> None:
    """Refuse argmax/argmin anywhere but where an index is read, or as a `where` name's
    whole value (Note [Arg extrema]): positions are no value to compute with."""
    for item, section in named_expressions(spec):
        allowed = {item.expr} if section == "where" else set()
        for node in sympy.preorder_traversal(item.expr):
            if isinstance(node, (indexing.Gather, segments.SegmentSum, segments.IndexSelect)):
                # the index, and an argmax inside a view or where of it
                allowed.update(sympy.preorder_traversal(node.index))
            elif isinstance(node, arg_extrema.ArgExtremum) and node not in allowed:
                message = (
                    f"{node.name}() gives positions: use it as the index of gather, "
                    "take_along_dim, segment_sum or index_select, or name it in where"
                )
                raise SpecError(item.location, message, f"{section}.{item.name}")


def check_index_selects(spec: Spec) -> None:
    """Refuse an index_select of a number, along a dim it lacks, or by an index not 1-d."""
    values = {i.symbol: i.expr for i in spec.intermediates}
    for node, location, path in _written(spec, segments.IndexSelect):
        shape = test_shape(node.argument, spec, values)
        index_shape = list(test_shape(node.index, spec, values) or ())
        if not shape:
            raise SpecError(location, "index_select() needs a value with dimensions", path)
        if not -len(shape) <= node.dim < len(shape):
            message = f"index_select() dim {node.dim} is out of range for {len(shape)} dimensions"
            raise SpecError(location, message, path)
        if len(index_shape) != 1:
            message = (
                f"index_select() index {_index_name(node.index)!r} must be 1-d, one position "
                f"per slice selected, but has shape {index_shape}"
            )
            raise SpecError(location, message, path)


def index_bounds(spec: Spec) -> dict[str, int]:
    """For each index input, the size of the smallest dim it indexes in the test."""
    values = {i.symbol: i.expr for i in spec.intermediates}
    bounds: dict[str, int] = {}
    inputs = {i.symbol for i in spec.inputs}
    for summed, _, _ in segment_sums(spec):
        if summed.index not in inputs:
            continue  # computed positions are in range by construction
        name, count = str(summed.index), _segment_count(summed, spec)
        bounds[name] = min(bounds.get(name, count), count)
    read: list[indexing.Gather | segments.IndexSelect] = [node for node, _, _ in gathers(spec)]
    read += [node for node, _, _ in _written(spec, segments.IndexSelect)]
    for node in read:
        shape = test_shape(node.argument, spec, values)
        if not shape:
            continue
        # The index inputs the positions read: an input, or a view or where of inputs.
        for symbol in node.index.free_symbols & inputs:
            if isinstance(symbol, indexing.IndexSymbol):
                name = str(symbol)
                bounds[name] = min(bounds.get(name, shape[node.dim]), shape[node.dim])
    for name, size in _compared_positions(spec, values):
        bounds[name] = min(bounds.get(name, size), size)
    return bounds


def _compared_positions(
    spec: Spec, values: Mapping[sympy.Basic, sympy.Basic]
) -> Iterable[tuple[str, int]]:
    """Each index input compared with position(e, dim), and the size of e's dim in the test:
    `position(x, -1) == unsqueeze(target, -1)` reads target as a class of x's last dim."""
    for item, _ in named_expressions(spec):
        for relation in item.expr.atoms(sympy.Eq, sympy.Ne):
            for position in relation.atoms(scans.Position):
                shape = test_shape(position.argument, spec, values)
                if not shape:
                    continue
                size = shape[int(position.args[1]) % len(shape)]
                for symbol in relation.free_symbols:
                    if isinstance(symbol, indexing.IndexSymbol):
                        yield symbol.name, size


def check_gathers(spec: Spec) -> None:
    """Refuse a gather whose index cannot index its value in the test shapes."""
    values = {i.symbol: i.expr for i in spec.intermediates}
    for node, location, path in gathers(spec):
        shape = test_shape(node.argument, spec, values)
        if shape is None:
            raise SpecError(location, "gather() needs a value that depends on a tensor", path)
        index = (_index_name(node.index), test_shape(node.index, spec, values) or ())
        _check_gather(node, shape, index, location, path)


def _check_gather(
    node: indexing.Gather,
    shape: tuple[int, ...],
    index: tuple[str, tuple[int, ...]],
    location: Location,
    path: str,
) -> None:
    """torch.gather's rules: equal ranks, dim in range, other index sizes within the value's;
    `index` is the index's name and test shape."""
    name, index_shape = index
    if not shape and len(index_shape) == 1:
        shape = (1,)  # torch.gather reads a 0-d value as one of one element
    rank = len(shape)
    if len(index_shape) != rank:
        message = (
            f"gather() index {name!r} has {len(index_shape)} dimensions, "
            f"but the value it indexes has {rank} (shape {list(shape)})"
        )
        raise SpecError(location, message, path)
    if not -max(rank, 1) <= node.dim < max(rank, 1):
        message = f"gather() dim {node.dim} is out of range for a value of {rank} dimensions"
        raise SpecError(location, message, path)
    dim = node.dim % max(rank, 1)
    for n, (size, own) in enumerate(zip(index_shape, shape, strict=True)):
        if n != dim and size > own:
            message = (
                f"gather() index {name!r} has size {size} in dim {n}, larger than "
                f"the value's {own} (shape {list(shape)})"
            )
            raise SpecError(location, message, path)
