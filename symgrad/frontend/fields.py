"""Typed values read from located YAML nodes, each error naming file, line and column.

The readers every section of a spec shares: a mapping's keys taken one by one with
leftovers refused, and strings, flags, numbers, shapes and intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from symgrad.errors import Location, SpecError, did_you_mean
from symgrad.frontend.loader import Node

# A reader of one typed value: (node, path for errors) -> value.
Reader = Callable[[Node, str], Any]

# Bounds on a test shape, so that generated tests stay small.
MAX_TEST_ELEMENTS = 4096
MAX_TEST_DIMENSIONS = 8


class Section:
    """The keys of one mapping, taken one at a time; leftovers are reported."""

    def __init__(self, node: Node, path: str, allowed: tuple[str, ...]) -> None:
        if not isinstance(node.value, dict):
            what = path or "the spec"
            raise SpecError(node.location, f"expected a mapping, got {kind(node)}", what)
        self.node = node
        self.items = dict(node.value)
        self.path = path
        self.allowed = allowed
        # Unknown keys first: a misspelt key would otherwise read as a missing one.
        self._refuse_unknown(key for key in self.items if key not in allowed)

    def require(self, key: str) -> Node:
        if key not in self.items:
            raise SpecError(self.node.location, f"missing required key {key!r}", self.path)
        return self.items.pop(key)

    def optional(self, key: str) -> Node | None:
        return self.items.pop(key, None)

    def finish(self) -> None:
        self._refuse_unknown(self.items)

    def _refuse_unknown(self, keys: Iterable[str]) -> None:
        for key in keys:
            assert self.node.key_locations is not None
            location = self.node.key_locations[key]
            hint = did_you_mean(key, self.allowed)
            allowed = ", ".join(self.allowed)
            message = f"unknown key {key!r}{hint}; allowed keys are: {allowed}"
            refuse_split_expression(self.node, key, f"unknown key {key!r}", self.path)
            emptied = None if self.path else emptied_section(self.node, location)
            if emptied is not None:
                message = (
                    f"unknown key {key!r}: `{emptied.value}:` (line {emptied.location.line})"
                    f" is empty, and {key!r} went to the top level of the spec instead:"
                    f" indent it under `{emptied.value}:`"
                )
            raise SpecError(location, message, self.path)


# The sections of a spec whose entries are named by the user.
_NAMED_SECTIONS = ("inputs", "where", "outputs", "gradients")


def refuse_split_expression(node: Node, key: str, what: str, path: str) -> None:
    """Raise at `key` if it is the tail of an unquoted expression that `{...}` split."""
    split = split_expression(node, key)
    if split is not None:
        assert node.key_locations is not None
        quotes = f'so this expression needs quotes: "{split}"'
        message = f"{what}: inside {{...}} a comma ends a value, {quotes}"
        raise SpecError(node.key_locations[key], message, path)


def split_expression(node: Node, key: str) -> str | None:
    """The expression a `{...}` mapping split at its commas into a value and `key`, if so.

    `{expr: mean(abs(x), dim=1)}` reads as expr: "mean(abs(x)" and a key "dim=1)"
    without a value: the value before `key` opens more parentheses than it closes.
    """
    if node.style != "flow" or not isinstance(node.value, dict):
        return None
    items = list(node.value.items())
    start = [name for name, _ in items].index(key)
    value = items[start - 1][1].value if start else None
    if not isinstance(value, str) or value.count("(") <= value.count(")"):
        return None
    parts = [value]
    for name, item in items[start:]:
        parts.append(name)
        if item.value is not None or sum(p.count("(") - p.count(")") for p in parts) <= 0:
            break
    return ", ".join(parts)


def emptied_section(node: Node, location: Location) -> Node | None:
    """The empty section above an unknown top-level key at `location`: its key as a Node.

    `outputs:` with nothing under it, then `loss: ...` at the left margin: the output was
    meant to be indented under `outputs:`.
    """
    if not isinstance(node.value, dict) or node.key_locations is None:
        return None
    line = location.line or 0
    above = [
        Node(name, node.key_locations[name])
        for name in _NAMED_SECTIONS
        if name in node.value
        and node.value[name].value is None
        and (node.key_locations[name].line or 0) < line
    ]
    return max(above, key=lambda n: n.location.line or 0, default=None)


def kind(node: Node) -> str:
    value = node.value
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def string(node: Node, path: str) -> str:
    if not isinstance(node.value, str):
        raise SpecError(node.location, f"expected a string, got {kind(node)}", path)
    return node.value


def flag(node: Node, path: str) -> bool:
    if not isinstance(node.value, bool):
        raise SpecError(node.location, f"expected true or false, got {kind(node)}", path)
    return node.value


def shape(node: Node, path: str) -> tuple[int, ...]:
    if not isinstance(node.value, list):
        raise SpecError(node.location, f"expected a list of sizes, got {kind(node)}", path)
    if len(node.value) > MAX_TEST_DIMENSIONS:
        raise SpecError(
            node.location,
            f"expected at most {MAX_TEST_DIMENSIONS} sizes, got {len(node.value)}",
            path,
        )
    sizes = []
    for item in node.value:
        size = item.value
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise SpecError(item.location, f"expected a positive size, got {kind(item)}", path)
        sizes.append(size)
    if math.prod(sizes) > MAX_TEST_ELEMENTS:
        raise SpecError(
            node.location, f"test shapes are limited to {MAX_TEST_ELEMENTS} elements", path
        )
    return tuple(sizes)


def number(node: Node, path: str) -> float:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(node.location, f"expected a finite number, got {kind(node)}", path)
    return float(value)


def domain(node: Node | None, path: str) -> tuple[float, float] | None:
    if node is None:
        return None
    if not isinstance(node.value, list) or len(node.value) != 2:
        raise SpecError(node.location, f"expected [low, high], got {kind(node)}", path)
    low, high = (number(item, path) for item in node.value)
    if not low < high:
        raise SpecError(node.location, f"expected low < high, got [{low}, {high}]", path)
    return (low, high)


def mapping_entries(node: Node, path: str) -> list[tuple[str, Node]]:
    if not isinstance(node.value, dict):
        raise SpecError(node.location, f"expected a mapping, got {kind(node)}", path)
    return list(node.value.items())


def key_location(node: Node, key: str) -> Location:
    assert node.key_locations is not None
    return node.key_locations[key]
