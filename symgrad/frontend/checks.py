"""Read the spec's `test:` section: how the generated test samples and compares.

```yaml
test:
  dtypes: [float32, bfloat16]       # low-precision dtypes compared with float64
  skip: {bfloat16: "8 bits of mantissa cannot resolve the tails"}
  tolerances: {float32: {rtol: 1e-4, atol: 1e-5}}
  shapes: {x: [8, 16]}              # per tensor input, as inputs.<name>.shape
  domains: {x: [0.1, 4.0]}          # per tensor input, as inputs.<name>.domain
  points: 3                         # input draws for gradcheck and gradgradcheck
```
"""

from __future__ import annotations

import dataclasses

from symgrad.errors import SpecError, did_you_mean
from symgrad.frontend import fields as read
from symgrad.frontend.loader import Node
from symgrad.frontend.model import LOW_PRECISION_DTYPES, TEST_DTYPES, Checks, Input, Tolerance

KEYS = ("dtypes", "skip", "tolerances", "shapes", "domains", "points")
_MAX_POINTS = 20


def parse_checks(node: Node | None, inputs: tuple[Input, ...]) -> tuple[Checks, tuple[Input, ...]]:
    """The test settings, and the inputs with the section's test shapes and domains."""
    if node is None:
        return Checks(), inputs
    section = read.Section(node, "test", KEYS)
    dtypes_node = section.optional("dtypes")
    dtypes = _dtypes(dtypes_node) if dtypes_node else LOW_PRECISION_DTYPES
    skips = _skips(section.optional("skip"), dtypes)
    tolerances = _tolerances(section.optional("tolerances"), dtypes)
    points_node = section.optional("points")
    points = _points(points_node) if points_node else 1
    inputs = _with_sampling(inputs, section.optional("shapes"), "shape", read.shape)
    inputs = _with_sampling(inputs, section.optional("domains"), "domain", read.domain)
    section.finish()
    return Checks(dtypes, skips, tolerances, points), inputs


def _dtype(node: Node, path: str, allowed: tuple[str, ...]) -> str:
    name = node.value
    if not isinstance(name, str) or name not in allowed:
        hint = did_you_mean(str(name), allowed)
        message = f"unknown dtype {name!r}{hint}; expected one of: {', '.join(allowed)}"
        if name == "float64":
            message = "float64 is always checked (gradcheck needs it); list the others"
        elif name in LOW_PRECISION_DTYPES:
            message = f"{name} is not among the dtypes the test checks (test.dtypes)"
        raise SpecError(node.location, message, path)
    return name


def _dtypes(node: Node) -> tuple[str, ...]:
    if not isinstance(node.value, list):
        raise SpecError(node.location, f"expected a list of dtypes, got {read.kind(node)}", "test")
    names = [_dtype(item, "test.dtypes", LOW_PRECISION_DTYPES) for item in node.value]
    return tuple(dict.fromkeys(names))


def _keyed_by_dtype(node: Node, path: str, allowed: tuple[str, ...]) -> list[tuple[str, Node]]:
    """(dtype, value node) for each entry of a mapping keyed by dtype."""
    entries = []
    for key, value in read.mapping_entries(node, path):
        key_node = Node(key, read.key_location(node, key))
        entries.append((_dtype(key_node, path, allowed), value))
    return entries


def _skips(node: Node | None, dtypes: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    if node is None:
        return ()
    skips = []
    for dtype, reason in _keyed_by_dtype(node, "test.skip", dtypes):
        text = read.string(reason, f"test.skip.{dtype}").strip()
        if not text:
            raise SpecError(reason.location, "say why the dtype is skipped", f"test.skip.{dtype}")
        skips.append((dtype, text))
    return tuple(skips)


def _tolerances(node: Node | None, dtypes: tuple[str, ...]) -> tuple[tuple[str, Tolerance], ...]:
    if node is None:
        return ()
    allowed = tuple(d for d in TEST_DTYPES if d == "float64" or d in dtypes)
    tolerances = []
    for dtype, value in _keyed_by_dtype(node, "test.tolerances", allowed):
        path = f"test.tolerances.{dtype}"
        section = read.Section(value, path, ("rtol", "atol"))
        rtol, atol = (_tolerance(section.require(key), f"{path}.{key}") for key in ("rtol", "atol"))
        section.finish()
        tolerances.append((dtype, Tolerance(rtol, atol)))
    return tuple(tolerances)


def _tolerance(node: Node, path: str) -> float:
    value = read.number(node, path)
    if value < 0:
        raise SpecError(node.location, f"expected a tolerance of at least 0, got {value}", path)
    return value


def _points(node: Node) -> int:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_POINTS:
        message = f"expected a number of points from 1 to {_MAX_POINTS}, got {read.kind(node)}"
        raise SpecError(node.location, message, "test.points")
    return value


def _with_sampling(
    inputs: tuple[Input, ...], node: Node | None, key: str, parse: read.Reader
) -> tuple[Input, ...]:
    """`inputs` with the test `shape` or `domain` each named input gets from `node`."""
    if node is None:
        return inputs
    by_name = {item.name: item for item in inputs}
    path = f"test.{key}s"
    for name, value in read.mapping_entries(node, path):
        location = read.key_location(node, name)
        item = by_name.get(name)
        if item is None or not item.is_tensor:
            tensors = [i.name for i in inputs if i.is_tensor]
            hint = did_you_mean(name, tensors)
            raise SpecError(location, f"{name!r} is not a tensor input{hint}", path)
        if getattr(item, key) is not None:
            message = f"inputs.{name}.{key} already gives {name}'s test {key}; give it once"
            raise SpecError(location, message, path)
        by_name[name] = dataclasses.replace(item, **{key: parse(value, f"{path}.{name}")})
    return tuple(by_name[item.name] for item in inputs)
