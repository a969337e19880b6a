"""The extreme-value suite (tools/extreme_values.py) on CI's subset, and on every subject
as a slow test: float32 at ±100, ±30, ±10, ±1e-4, 0 and ±1e-30 against torch.

A subject in KNOWN_FAILING must still fail (strict xfail): when its fix is merged, the
entry is taken out and the subject must pass.
"""

from __future__ import annotations

import pytest
import torch

from symgrad.language.names import function_names
from tests.extreme_subjects import (
    EXCEPTIONS,
    KNOWN_FAILING,
    SUBSET,
    all_subjects,
    covered_names,
    excepted,
)
from tests.extreme_suite import Subject, check_subject, format_failures

SUBJECTS = all_subjects()


def _param(name: str, slow: bool = False) -> object:
    marks = [pytest.mark.slow] if slow else []
    if name in KNOWN_FAILING:
        marks.append(pytest.mark.xfail(reason=KNOWN_FAILING[name], strict=True))
    return pytest.param(name, marks=marks, id=name)


def _assert_exact_at_the_edges(name: str, limit: int) -> None:
    judged, failures = check_subject(SUBJECTS[name], limit)
    failures = [f for f in failures if excepted(f) is None]
    assert judged > 0, f"{name}: no point judged"
    assert not failures, f"{name}: {len(failures)} failures\n{format_failures(failures[:20])}"


@pytest.mark.filterwarnings("ignore:`torch.jit.script.*is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", [_param(n) for n in SUBSET])
def test_subset_is_exact_at_the_edges(name: str) -> None:
    _assert_exact_at_the_edges(name, limit=60)


@pytest.mark.filterwarnings("ignore:`torch.jit.script.*is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", [_param(n, slow=True) for n in SUBJECTS if n not in SUBSET])
def test_every_subject_is_exact_at_the_edges(name: str) -> None:
    _assert_exact_at_the_edges(name, limit=200)


def test_every_language_function_is_a_subject() -> None:
    """A new function of the language is checked at the edges as soon as it is added."""
    assert set(function_names()) - covered_names() == set()


def test_the_lists_name_subjects() -> None:
    """Every entry of SUBSET, KNOWN_FAILING and EXCEPTIONS names a subject that exists."""
    named = {*SUBSET, *KNOWN_FAILING, *(subject for subject, _, _ in EXCEPTIONS)}
    assert named - SUBJECTS.keys() == set()


def test_the_check_catches_lost_precision() -> None:
    """exp(x) - 1 against torch.expm1: 0 at x = 1e-30 fails, as x * x against x * x passes."""
    square = {"name": "Square", "inputs": {"x": "tensor"}, "outputs": {"y": "x * x"}}
    judged, failures = check_subject(Subject("square", square, lambda x: x * x, True))
    assert judged > 0 and failures == []
    spec = {"name": "ExpMinusOne", "inputs": {"x": "tensor"}, "outputs": {"y": "exp(x) - 1"}}
    _, failures = check_subject(Subject("exp_minus_one", spec, torch.expm1, True))
    assert {(f.point, f.what) for f in failures} >= {("x=1e-30", "y"), ("x=0.0001", "y")}
