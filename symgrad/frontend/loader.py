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


# A decimal integer: YAML 1.1 would read 010 as 8 and 1:30 as 90.
_INT_PATTERN = re.compile(r"^[-+]?[0-9][0-9_]*$")
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
# Resolvers replaced below (numbers) or dropped (dates are plain strings in a spec).
_REPLACED_TAGS = {_INT_TAG, _FLOAT_TAG, "tag:yaml.org,2002:timestamp"}


class _SpecLoader(yaml.SafeLoader):
    """A safe loader that reads numbers as YAML 1.2 does and refuses aliases."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            # Refusing aliases also rules out exponential "billion laughs" documents.
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not supported in specs", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_decimal_int(self, node: yaml.ScalarNode) -> int:
        return int(str(self.construct_scalar(node)).replace("_", ""))


_SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_SpecLoader.add_implicit_resolver(_INT_TAG, _INT_PATTERN, list("-+0123456789"))
_SpecLoader.add_implicit_resolver(_FLOAT_TAG, _FLOAT_PATTERN, list("-+0123456789."))
_SpecLoader.add_constructor(_INT_TAG, _SpecLoader.construct_decimal_int)

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Node:
    """A YAML value with its location; `value` is a scalar, a list or a dict of nodes."""

    value: Scalar | list[Node] | dict[str, Node]
    location: Location
    # For mappings: the location of each key, so that unknown keys can be pointed at.
    key_locations: dict[str, Location] | None = None
    # For string scalars: how the text sits in the file. "plain" and "quoted" text is on
    # one line exactly as written (so columns inside it can be mapped); anything else
    # (block scalars, several lines, escapes) is "block". For mappings: "flow" for one
    # written `{key: value, ...}`, where a comma ends a plain value.
    style: str = "plain"


def load_yaml(text: str, source: str) -> Node:
    """Parse YAML text into a located `Node` tree; `source` names it in errors."""
    try:
        loader = _SpecLoader(text)
    except yaml.reader.ReaderError as error:
        # Raised before parsing, for characters YAML does not allow (a bell, a null byte).
        location = _location_of_index(source, text, error.position)
        code = f"U+{error.character:04X}" if isinstance(error.character, int) else "?"
        raise SpecError(location, f"invalid YAML: character {code} is not allowed") from None
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise SpecError(_location(source, mark), f"invalid YAML: {_describe(error)}") from None
    except yaml.YAMLError as error:
        raise SpecError(Location(source), f"invalid YAML: {error}") from None
    except RecursionError:
        raise SpecError(Location(source), "invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    if root is None:
        raise SpecError(Location(source, 1, 1), "the spec is empty")
    return _convert(root, source, text, loader, depth=0)


# PyYAML's problems that mistakes of indentation and quoting cause, said in a spec's
# terms (by how the problem starts); others keep PyYAML's words.
_EXPLAINED = {
    "mapping values are not allowed here": (
        "a ':' where no key can start here: indent this line like the keys beside it,"
        " or quote a value that holds ': '"
    ),
    "expected <block end>": (
        "this line is indented less than the line above it but more than their parent"
        " key: indent it like the keys of the mapping it belongs to"
    ),
    "could not find expected ':'": (
        "a key without ':', or a value that runs onto the next line: write `key: value`,"
        " and indent a value that continues more than its key, or quote it"
    ),
    "found character '\\t' that cannot start any token": (
        "a tab indents this line: YAML indents with spaces only"
    ),
    "expected ',' or '}'": "a `{` is not closed by `}` before this point",
    "expected ',' or ']'": "a `[` is not closed by `]` before this point",
}


def _describe(error: yaml.MarkedYAMLError) -> str:
    """The error's context and problem on one line, without PyYAML's source excerpt."""
    if isinstance(error, yaml.composer.ComposerError) and error.context:
        # e.g. "expected a single document in the stream: but found another document"
        return f"{error.context}: {error.problem}"
    problem = error.problem or "unreadable YAML"
    for start, explanation in _EXPLAINED.items():
        if problem.startswith(start):
            return explanation
    return problem


_MAX_DEPTH = 32


def _location_of_index(source: str, text: str, index: int) -> Location:
    """The line and column of character `index` of `text`."""
    before = text[:index]
    line = before.count("\n") + 1
    return Location(source, line, index - (before.rfind("\n") + 1) + 1)


def _location(source: str, mark: yaml.Mark | None) -> Location:
    if mark is None:
        return Location(source)
    return Location(source, mark.line + 1, mark.column + 1)


def _convert(node: yaml.Node, source: str, text: str, loader: _SpecLoader, depth: int) -> Node:
    location = _location(source, node.start_mark)
    if depth > _MAX_DEPTH:
        raise SpecError(location, "the spec is nested too deeply")
    if isinstance(node, yaml.MappingNode):
        return _convert_mapping(node, source, text, loader, depth)
    if isinstance(node, yaml.SequenceNode):
        items = [_convert(item, source, text, loader, depth + 1) for item in node.value]
        return Node(items, location)
    assert isinstance(node, yaml.ScalarNode)
    try:
        value = loader.construct_object(node, deep=True)
    except yaml.MarkedYAMLError as error:
        raise SpecError(location, f"invalid YAML value: {_describe(error)}") from None
    except (yaml.YAMLError, ValueError) as error:
        raise SpecError(location, f"invalid YAML value: {error}") from None
    if not isinstance(value, (str, int, float, bool, type(None))):
        raise SpecError(location, f"unsupported YAML value {node.value!r}")
    return Node(value, location, style=_style(node, text))


def _style(node: yaml.ScalarNode, text: str) -> str:
    """How a scalar sits in the file; see `Node.style`."""
    raw = text[node.start_mark.index : node.end_mark.index]
    if node.style is None and raw == node.value:
        return "plain"
    if node.style in ("'", '"') and raw == f"{node.style}{node.value}{node.style}":
        return "quoted"
    return "block"


def _convert_mapping(
    node: yaml.MappingNode, source: str, text: str, loader: _SpecLoader, depth: int
) -> Node:
    items: dict[str, Node] = {}
    key_locations: dict[str, Location] = {}
    for key_node, value_node in node.value:
        key_location = _location(source, key_node.start_mark)
        if not isinstance(key_node, yaml.ScalarNode):
            kind = "a list" if isinstance(key_node, yaml.SequenceNode) else "a mapping"
            raise SpecError(key_location, f"keys must be names, got {kind}")
        # Keys are names: read them as written, so `on:` or `1:` is not a bool or an int.
        key = str(key_node.value)
        if key in items:
            first = key_locations[key]
            raise SpecError(
                key_location, f"duplicate key {key!r} (first given at line {first.line})"
            )
        items[key] = _convert(value_node, source, text, loader, depth + 1)
        key_locations[key] = key_location
    style = "flow" if node.flow_style else "plain"
    return Node(items, _location(source, node.start_mark), key_locations, style)
