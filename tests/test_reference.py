"""docs/spec-reference.md is written from the code's tables and cannot go stale."""

from __future__ import annotations

from symgrad.frontend import checks, parse
from symgrad.language import activations, functions, piecewise, reductions
from symgrad.present.reference import KEY_MEANINGS, spec_reference
from tests.conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "spec-reference.md"


def test_the_committed_page_is_current() -> None:
    """Regenerate with: python -m symgrad.present.reference > docs/spec-reference.md"""
    assert PAGE.read_text() == spec_reference()


def test_every_key_the_parser_reads_has_a_meaning() -> None:
    for section, keys in [
        ("spec", parse.TOP_KEYS),
        ("input", parse.INPUT_KEYS),
        ("output", parse.OUTPUT_KEYS),
        ("test", checks.KEYS),
    ]:
        assert set(KEY_MEANINGS[section]) == set(keys), section


def test_every_function_of_the_language_is_listed() -> None:
    page = spec_reference()
    names = [
        *functions.FUNCTIONS,
        *activations.ACTIVATIONS,
        *piecewise.CONDITIONAL_FUNCTIONS,
        *reductions.REDUCTIONS,
        *reductions.NORMALIZATIONS,
        "layer_norm",
    ]
    for name in names:
        assert f"`{name}(" in page, name
