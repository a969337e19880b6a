"""Unit tests of symgrad.frontend.loader: YAML into located nodes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symgrad.errors import Location, SpecError
from symgrad.frontend.loader import Node, load_yaml


def load_value(text: str) -> object:
    """The value of key `a` in the one-line document `a: <text>`."""
    root = load_yaml(f"a: {text}\n", "spec.yaml")
    assert isinstance(root.value, dict)
    return root.value["a"].value


def load_error(text: str) -> str:
    with pytest.raises(SpecError) as info:
        load_yaml(text, "spec.yaml")
    return str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1e-6", 1e-6),
        ("1.0e-6", 1e-6),
        ("-2.5E+3", -2500.0),
        (".5", 0.5),
        ("1e6", 1e6),
        ("+1e3", 1000.0),
        ("2.", 2.0),
        ("-0.25", -0.25),
        ("1_000.5", 1000.5),
    ],
)
def test_floats(text: str, expected: float) -> None:
    value = load_value(text)
    assert type(value) is float
    assert value == expected


@pytest.mark.parametrize(
    ("text", "expected"), [(".inf", math.inf), ("-.inf", -math.inf), (".Inf", math.inf)]
)
def test_infinities(text: str, expected: float) -> None:
    assert load_value(text) == expected


def test_nan() -> None:
    value = load_value(".nan")
    assert type(value) is float
    assert math.isnan(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "expected"), [("1", 1), ("-3", -3), ("0", 0), ("1_000", 1000)])
def test_integers(text: str, expected: int) -> None:
    value = load_value(text)
    assert type(value) is int
    assert value == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("false", False), ("True", True), ("yes", True), ("no", False)],
)
def test_booleans(text: str, expected: bool) -> None:
    # YAML 1.1 spellings of booleans are still read as booleans.
    assert load_value(text) is expected


@pytest.mark.parametrize(
    "text", ["x", "x + 1", "sigmoid(x)", "1.5e", "0o17", "y", "abc", "'1.5'", '"true"', "1e"]
)
def test_strings_stay_strings(text: str) -> None:
    value = load_value(text)
    assert type(value) is str
    assert value == text.strip("'\"")


def test_null() -> None:
    assert load_value("") is None
    assert load_value("~") is None


def test_structure_and_positions() -> None:
    text = "name: Foo\ninputs:\n  x: tensor\n  lo: {type: float, default: 0.5}\n"
    root = load_yaml(text, "specs/foo.yaml")
    assert root.location == Location("specs/foo.yaml", 1, 1)
    assert isinstance(root.value, dict)
    assert list(root.value) == ["name", "inputs"]
    assert root.key_locations == {
        "name": Location("specs/foo.yaml", 1, 1),
        "inputs": Location("specs/foo.yaml", 2, 1),
    }
    name = root.value["name"]
    assert name == Node("Foo", Location("specs/foo.yaml", 1, 7), None, "plain")
    inputs = root.value["inputs"]
    assert inputs.location == Location("specs/foo.yaml", 3, 3)
    assert isinstance(inputs.value, dict)
    assert inputs.key_locations == {
        "x": Location("specs/foo.yaml", 3, 3),
        "lo": Location("specs/foo.yaml", 4, 3),
    }
    assert inputs.value["x"].location == Location("specs/foo.yaml", 3, 6)
    lo = inputs.value["lo"]
    assert lo.location == Location("specs/foo.yaml", 4, 7)
    assert isinstance(lo.value, dict)
    assert lo.key_locations == {
        "type": Location("specs/foo.yaml", 4, 8),
        "default": Location("specs/foo.yaml", 4, 21),
    }
    assert lo.value["default"] == Node(0.5, Location("specs/foo.yaml", 4, 30), None, "plain")
    assert str(lo.value["default"].location) == "specs/foo.yaml:4:30"


def test_sequences_keep_positions() -> None:
    root = load_yaml("shape: [4, 6]\nlist:\n  - a\n  - b\n", "s")
    assert isinstance(root.value, dict)
    shape = root.value["shape"]
    assert shape.location == Location("s", 1, 8)
    assert [(n.value, n.location) for n in shape.value] == [  # type: ignore[union-attr]
        (4, Location("s", 1, 9)),
        (6, Location("s", 1, 12)),
    ]
    items = root.value["list"].value
    assert [(n.value, n.location) for n in items] == [  # type: ignore[union-attr]
        ("a", Location("s", 3, 5)),
        ("b", Location("s", 4, 5)),
    ]


def test_non_ascii_columns_count_characters() -> None:
    alpha, beta = "\N{GREEK SMALL LETTER ALPHA}", "\N{GREEK SMALL LETTER BETA}"
    root = load_yaml(f"{alpha}{beta}: {beta}\n{beta}: 1\n", "s")
    assert isinstance(root.value, dict)
    assert root.value[alpha + beta].location == Location("s", 1, 5)
    assert root.key_locations == {alpha + beta: Location("s", 1, 1), beta: Location("s", 2, 1)}


@pytest.mark.parametrize(
    ("text", "style"),
    [
        ("x + 1", "plain"),
        ("'x + 1'", "quoted"),
        ('"x + 1"', "quoted"),
        ("|\n  x + 1", "block"),
        (">\n  x + 1", "block"),
    ],
)
def test_scalar_styles(text: str, style: str) -> None:
    root = load_yaml(f"a: {text}\n", "s")
    assert isinstance(root.value, dict)
    node = root.value["a"]
    assert node.style == style
    assert node.value in ("x + 1", "x + 1\n")


def test_duplicate_key() -> None:
    text = "name: Foo\ninputs:\n  x: tensor\n  y: tensor\n  x: float\n"
    assert load_error(text) == "spec.yaml:5:3: duplicate key 'x' (first given at line 3)"


def test_duplicate_top_level_key() -> None:
    assert load_error("a: 1\nb: 2\na: 3\n") == (
        "spec.yaml:3:1: duplicate key 'a' (first given at line 1)"
    )


def test_alias_refused() -> None:
    text = "a: &anchor {type: tensor}\nb: *anchor\n"
    message = load_error(text)
    assert message == "spec.yaml:2:4: invalid YAML: aliases (*name) are not supported in specs"


def test_billion_laughs_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    message = load_error("\n".join(lines) + "\n")
    assert message.endswith(": invalid YAML: aliases (*name) are not supported in specs")


def test_anchor_without_alias_is_harmless() -> None:
    root = load_yaml("a: &anchor 1\nb: 2\n", "s")
    assert isinstance(root.value, dict)
    assert root.value["a"].value == 1
    assert root.value["b"].value == 2


def test_nesting_within_the_limit() -> None:
    # The root mapping is level 0, its value level 1: 31 lists put the number at level 32.
    depth = 31
    root = load_yaml("a: " + "[" * depth + "1" + "]" * depth + "\n", "s")
    node = root
    for _ in range(depth + 1):
        assert isinstance(node.value, (dict, list))
        node = node.value["a"] if isinstance(node.value, dict) else node.value[0]
    assert node.value == 1


def test_nesting_too_deep() -> None:
    depth = 40
    assert load_error("a: " + "[" * depth + "]" * depth + "\n") == (
        "spec.yaml:1:36: the spec is nested too deeply"
    )


def test_nesting_too_deep_in_mappings() -> None:
    depth = 40
    text = "a: " + "{b: " * depth + "1" + "}" * depth + "\n"
    message = load_error(text)
    assert message.startswith("spec.yaml:1:")
    assert message.endswith(": the spec is nested too deeply")


def test_pathological_nesting_refused_cleanly() -> None:
    # Deep enough that PyYAML's own recursion gives out before our depth check.
    depth = 5000
    assert load_error("a: " + "[" * depth + "]" * depth + "\n") == (
        "spec.yaml: invalid YAML: nested too deeply"
    )


def test_empty_document() -> None:
    assert load_error("") == "spec.yaml:1:1: the spec is empty"
    assert load_error("# only a comment\n\n") == "spec.yaml:1:1: the spec is empty"


def test_invalid_yaml() -> None:
    assert load_error("a: [1, 2\nb: 3\n") == (
        "spec.yaml:2:2: invalid YAML: a `[` is not closed by `]` before this point"
    )


def test_tab_indentation() -> None:
    assert load_error("a:\n\tb: 1\n") == (
        "spec.yaml:2:1: invalid YAML: a tab indents this line: YAML indents with spaces only"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\nb: \x07\n", "spec.yaml:2:4: invalid YAML: character U+0007 is not allowed"),
        ("\x00", "spec.yaml:1:1: invalid YAML: character U+0000 is not allowed"),
        ("a: \x1b[2J\n", "spec.yaml:1:4: invalid YAML: character U+001B is not allowed"),
    ],
)
def test_unprintable_characters_are_located(text: str, message: str) -> None:
    assert load_error(text) == message


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_arbitrary_text_loads_or_raises_spec_error(text: str) -> None:
    """Any document, control characters included, is loaded or refused with a location."""
    try:
        load_yaml(f"a: {text}\nb: [{text}]\n", "spec.yaml")
    except SpecError as error:
        assert str(error).startswith("spec.yaml")


def test_keys_are_read_as_written() -> None:
    root = load_yaml("1: a\non: b\nyes: c\n", "s")
    assert isinstance(root.value, dict)
    assert list(root.value) == ["1", "on", "yes"]


def test_collection_keys_are_refused() -> None:
    assert load_error("[x]: a\n") == "spec.yaml:1:1: keys must be names, got a list"


def test_dates_and_sexagesimal_numbers_stay_text_and_decimal() -> None:
    root = load_yaml("a: 2024-01-01\nb: 1:30\nc: 010\n", "s")
    assert isinstance(root.value, dict)
    assert [root.value[k].value for k in "abc"] == ["2024-01-01", "1:30", 10]


@pytest.mark.parametrize("text", ["!!binary aGVsbG8=", "!!timestamp 2001-12-14"])
def test_unsupported_values(text: str) -> None:
    message = load_error(f"a: {text}\n")
    assert message.startswith("spec.yaml:1:4: unsupported YAML value ")


def test_python_tag_on_scalar_refused() -> None:
    assert load_error("a: !!python/name:os.system x\n").startswith(
        "spec.yaml:1:4: invalid YAML value: could not determine a constructor for the tag "
        "'tag:yaml.org,2002:python/name:os.system'"
    )


def test_python_tag_on_collection_constructs_nothing() -> None:
    # Collections are walked node by node: a tag on them never reaches a constructor.
    root = load_yaml("a: !!python/object/apply:os.system ['echo hi']\n", "s")
    assert isinstance(root.value, dict)
    items = root.value["a"].value
    assert isinstance(items, list)
    assert [item.value for item in items] == ["echo hi"]


def test_byte_order_mark() -> None:
    root = load_yaml("\ufeffname: Foo\n", "s")
    assert isinstance(root.value, dict)
    assert root.value["name"].value == "Foo"


def test_a_key_without_a_colon_is_explained() -> None:
    assert load_error("inputs:\n  x: tensor\n  w\noutputs: 1\n") == (
        "spec.yaml:4:1: invalid YAML: a key without ':', or a value that runs onto the next"
        " line: write `key: value`, and indent a value that continues more than its key,"
        " or quote it"
    )
