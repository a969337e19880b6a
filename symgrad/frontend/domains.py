"""Where a spec's inputs are sampled: declared domains, defaults from assumptions, shapes."""

from __future__ import annotations

from collections.abc import Sequence

from symgrad.frontend.model import Input, Spec

_DEFAULT_DOMAINS = {
    "positive": (0.5, 2.0),
    "nonnegative": (0.5, 2.0),
    "nonzero": (0.5, 2.0),
    "negative": (-2.0, -0.5),
}


_UNCONSTRAINED_DOMAIN = (-2.0, 2.0)


def default_domain(item: Input) -> tuple[float, float]:
    """The interval the generated test samples `item` from when the spec gives none."""
    if item.domain is not None:
        return item.domain
    for assumption in item.assumptions:
        if assumption in _DEFAULT_DOMAINS:
            return _DEFAULT_DOMAINS[assumption]
    return _UNCONSTRAINED_DOMAIN


def default_shape(spec: Spec) -> tuple[int, ...]:
    """The test shape of tensors declared without one.

    It is the broadcast of the declared shapes, padded on the left to two dimensions, with
    size-1 leading dimensions widened to 3 so that broadcasting is exercised; (3, 4) when
    no input declares a shape with dimensions.
    """
    shapes = [i.shape for i in spec.tensor_inputs if i.shape]
    if not shapes:
        return (3, 4)
    result = broadcast_shapes(shapes, min_rank=2)
    rank = len(result)
    return tuple(3 if size == 1 and index < rank - 1 else size for index, size in enumerate(result))


def broadcast_shapes(shapes: Sequence[tuple[int, ...]], min_rank: int = 0) -> tuple[int, ...]:
    """The broadcast of `shapes` (sizes aligned from the right; the larger one wins)."""
    rank = max(min_rank, *(len(s) for s in shapes))
    result = [1] * rank
    for shape in shapes:
        for index, size in enumerate(shape, start=rank - len(shape)):
            result[index] = max(result[index], size)
    return tuple(result)
