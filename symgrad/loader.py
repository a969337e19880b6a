"""Read YAML into a tree of values that remember their line and column.

PyYAML composes nodes that carry marks; we turn them into `Node`s so that every later
error can point at the offending value. Duplicate keys are errors, and numbers such as
`1e-6` load as floats (YAML 1.1 resolvers read them as strings).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from symgrad.errors import Location, SpecError

# A float as YAML 1.2 writes it: `1e-6`, `1.0e-6`, `.5`, `-2.`, `inf` and `nan` spellings.
_FLOAT_PATTERN = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class _SpecLoader(yaml.SafeLoader):
    """A safe loader whose float resolver follows YAML 1.2."""


_SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_SpecLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_PATTERN, list("-+0123456789."))

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Node:
    """A YAML value with its location; `value` is a scalar, a list or a dict of nodes."""

    value: Scalar | list[Node] | dict[str, Node]
    location: Location
    # For mappings: the location of each key, so that unknown keys can be pointed at.
    key_locations: dict[str, Location] | None = None
    # For string scalars: how the text sits in the file ("plain", "quoted" or "block").
    style: str = "plain"


def load_yaml(text: str, source: str) -> Node:
    """Parse YAML text into a located `Node` tree; `source` names it in errors."""
    loader = _SpecLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise SpecError(_location(source, mark), f"invalid YAML: {error.problem}") from None
    except yaml.YAMLError as error:
        raise SpecError(Location(source), f"invalid YAML: {error}") from None
    except RecursionError:
        raise SpecError(Location(source), "invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    if root is None:
        raise SpecError(Location(source, 1, 1), "the spec is empty")
    return _convert(root, source, loader, depth=0, seen=set())


_MAX_DEPTH = 32


def _location(source: str, mark: yaml.Mark | None) -> Location:
    if mark is None:
        return Location(source)
    return Location(source, mark.line + 1, mark.column + 1)


def _convert(node: yaml.Node, source: str, loader: _SpecLoader, depth: int, seen: set[int]) -> Node:
    location = _location(source, node.start_mark)
    if depth > _MAX_DEPTH:
        raise SpecError(location, "the spec is nested too deeply")
    if id(node) in seen:
        # An alias re-reads a node: refuse it, which also rules out "billion laughs".
        raise SpecError(location, "YAML anchors and aliases are not supported in specs")
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        return _convert_mapping(node, source, loader, depth, seen)
    if isinstance(node, yaml.SequenceNode):
        items = [_convert(item, source, loader, depth + 1, seen) for item in node.value]
        return Node(items, location)
    assert isinstance(node, yaml.ScalarNode)
    try:
        value = loader.construct_object(node, deep=True)
    except yaml.YAMLError as error:
        raise SpecError(location, f"invalid YAML value: {error}") from None
    if not isinstance(value, (str, int, float, bool, type(None))):
        raise SpecError(location, f"unsupported YAML value {node.value!r}")
    style = {None: "plain", "'": "quoted", '"': "quoted"}.get(node.style, "block")
    return Node(value, location, style=style)


def _convert_mapping(
    node: yaml.MappingNode, source: str, loader: _SpecLoader, depth: int, seen: set[int]
) -> Node:
    items: dict[str, Node] = {}
    key_locations: dict[str, Location] = {}
    for key_node, value_node in node.value:
        key_location = _location(source, key_node.start_mark)
        key = _convert(key_node, source, loader, depth + 1, seen).value
        if not isinstance(key, str):
            raise SpecError(key_location, f"keys must be names, got {key!r}")
        if key in items:
            first = key_locations[key]
            raise SpecError(
                key_location, f"duplicate key {key!r} (first given at line {first.line})"
            )
        items[key] = _convert(value_node, source, loader, depth + 1, seen)
        key_locations[key] = key_location
    return Node(items, _location(source, node.start_mark), key_locations)
