"""The points and calls of the extreme-value suite: float32 values at ±100, ±30, ±10, ±1,
±1e-4, 0 and ±1e-30 inside each input's domain, on a grid or in rows of a shape."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from symgrad.frontend.model import Input

# The points every input is tried at, as float32 values.
STANDARD = (100.0, 30.0, 10.0, 1.0, 1e-4, 1e-30, 0.0, -1e-30, -1e-4, -1.0, -10.0, -30.0, -100.0)
# Beside them for the language's own functions, whose domains are (-1, 1) or (0, 1) at times.
NEAR_ONE = (0.5, 1 - 1e-4, 1 - 2**-24, -(1 - 1e-4), -(1 - 2**-24))


def _f32(value: float) -> float:
    return float(torch.tensor(value, dtype=torch.float32))


def _near_ends(low: float, high: float) -> list[float]:
    """Points just inside [low, high]: 1e-30 and 1e-4 (relative) in from each end."""
    points = []
    for end, inward in ((low, 1.0), (high, -1.0)):
        for step in (1e-30, 1e-4 * max(1.0, abs(end))):
            value = _f32(end + inward * step)
            if value == end:
                value = float(
                    torch.nextafter(
                        torch.tensor(end, dtype=torch.float32),
                        torch.tensor(end + inward, dtype=torch.float32),
                    )
                )
            points.append(value)
    return points


def input_points(item: Input, extra: Sequence[float] = ()) -> list[float]:
    """The points tried for `item`: inside its declared domain (near both ends too) or
    its assumed sign, as the generated test samples it; float32 values, each once."""
    candidates = [*STANDARD, *extra]
    if item.domain is not None:
        low, high = item.domain
        candidates = [p for p in candidates if low <= p <= high]
        candidates += [low, high, (low + high) / 2, *_near_ends(low, high)]
    keep: dict[str, Callable[[float], bool]] = {
        "positive": lambda p: p > 0,
        "nonnegative": lambda p: p >= 0,
        "negative": lambda p: p < 0,
        "nonzero": lambda p: p != 0,
    }
    for assumption in item.assumptions:
        if assumption in keep:
            candidates = [p for p in candidates if keep[assumption](p)]
    return list(dict.fromkeys(_f32(p) for p in candidates))


@dataclass(frozen=True)
class Case:
    """One call: a name and the float64 value of every tensor input."""

    name: str
    tensors: tuple[torch.Tensor, ...]
    # For elementwise subjects: the point of each element, as `x=1e-30, z=0`.
    labels: tuple[str, ...] | None = None


def elementwise_cases(
    points: list[list[float]], names: list[str], limit: int, rng: random.Random
) -> list[Case]:
    """Every combination of the inputs' points (a sample past `limit`), in one call."""
    grid = list(itertools.product(*points))
    if len(grid) > limit:
        grid = rng.sample(grid, limit)
    columns = list(zip(*grid, strict=True)) if grid else [()] * len(points)
    tensors = tuple(torch.tensor(c, dtype=torch.float64) for c in columns)
    labels = tuple(", ".join(f"{n}={v:g}" for n, v in zip(names, p, strict=True)) for p in grid)
    return [Case("grid", tensors, labels)]


def _row_patterns(points: list[float], width: int) -> list[list[float]]:
    """Rows of one input: each point across a whole row, then rows mixing the points."""
    rows = [[p] * width for p in points]
    rows += [[points[(j + s) % len(points)] for j in range(width)] for s in range(3)]
    rows += [[max(points)] + [min(points)] * (width - 1), [min(points)] * (width - 1) + [0.0]]
    return rows


def _patterned(shape: torch.Size, points: list[float], shift: int) -> torch.Tensor:
    """A tensor of `shape` whose rows (along its last dim) take the patterns in turn."""
    width = shape[-1] if len(shape) else 1
    count = math.prod(shape[:-1]) if len(shape) else 1
    patterns = _row_patterns(points, width)
    rows = [patterns[(shift * count + r) % len(patterns)] for r in range(count)]
    return torch.tensor(rows, dtype=torch.float64).reshape(shape)


def shaped_cases(
    shapes: list[torch.Size],
    points: list[list[float]],
    names: list[str],
    limit: int,
    rng: random.Random,
) -> list[Case]:
    """Each input filled with one point (every combination, a sample past `limit`), then
    rows of a point each and of mixed points (rows at +100, at -100, of zeros...)."""
    grid = list(itertools.product(*points))
    if len(grid) > limit:
        grid = rng.sample(grid, limit)
    cases = [
        Case(
            ", ".join(f"{n}={v:g}" for n, v in zip(names, p, strict=True)),
            tuple(torch.full(s, v, dtype=torch.float64) for s, v in zip(shapes, p, strict=True)),
        )
        for p in grid
    ]
    rounds = max(
        -(-len(_row_patterns(p, 1)) // max(1, math.prod(s[:-1]) if len(s) else 1))
        for s, p in zip(shapes, points, strict=True)
    )
    for shift in range(rounds):
        tensors = tuple(_patterned(s, p, shift) for s, p in zip(shapes, points, strict=True))
        cases.append(Case(f"rows#{shift}", tensors))
    return cases
