"""Fuzz the whole expression language: conditions, kinks, special functions, NaN traps.

Each drawn expression comes in two spellings: the spec language, and plain torch code
written independently of symgrad's printer. Generation must succeed (unless the README
documents the refusal), with values equal to the plain torch evaluation, gradients finite
wherever the values are, and gradcheck passing. Arbitrary spec data must be generated or
refused with a SpecError. SYMGRAD_FUZZ_EXAMPLES sets the number of cases (25 by default,
so CI stays fast).
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path
from typing import Any

import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import symgrad
from tests.conftest import import_file

EXAMPLES = int(os.environ.get("SYMGRAD_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# (spec spelling, torch spelling) of the leaves.
# Numbers are 0-d tensors on the torch side: torch.maximum and torch.sin take no floats.
LEAVES = st.sampled_from(
    [("x", "x"), ("y", "y"), ("c", "c"), ("0.5", "T(0.5)"), ("2", "T(2.0)"), ("-1.5", "T(-1.5)")]
)

# One-argument functions whose argument can be anything finite: (spec, torch) templates.
UNARY = [
    ("sin({})", "torch.sin({})"),
    ("tanh({})", "torch.tanh({})"),
    ("sigmoid({})", "torch.sigmoid({})"),
    ("softplus({})", "torch.nn.functional.softplus({})"),
    ("exp(tanh({}))", "torch.exp(torch.tanh({}))"),
    ("atan({})", "torch.atan({})"),
    ("erf({})", "torch.erf({})"),
    ("abs({})", "torch.abs({})"),
    ("relu({})", "torch.relu({})"),
    ("sqrt(1 + ({})**2)", "torch.sqrt(1 + ({})**2)"),
    ("log(1 + ({})**2)", "torch.log(1 + ({})**2)"),
    ("lgamma(1 + ({})**2)", "torch.lgamma(1 + ({})**2)"),
    ("erfinv(0.5 * tanh({}))", "torch.erfinv(0.5 * torch.tanh({}))"),
    ("clamp({}, -1, 1)", "torch.clamp({}, -1, 1)"),
    # NaN traps: the untaken branch is not finite everywhere.
    ("where({0} > 0, sqrt({0}), 0)", "torch.where({0} > 0, torch.sqrt({0}), 0.0)"),
    ("where({0} != 0, sin({0}) / {0}, 1)", "torch.where({0} != 0, torch.sin({0}) / {0}, 1.0)"),
    ("where({0} > 0, log({0}), -({0}))", "torch.where({0} > 0, torch.log({0}), -({0}))"),
]
BINARY = [
    ("({}) + ({})", "({}) + ({})"),
    ("({}) - ({})", "({}) - ({})"),
    ("({}) * ({})", "({}) * ({})"),
    ("({}) / (1 + ({})**2)", "({}) / (1 + ({})**2)"),
    ("max({}, {})", "torch.maximum({}, {})"),
    ("min({}, {})", "torch.minimum({}, {})"),
    ("hypot({}, {})", "torch.hypot({}, {})"),
    ("atan2({}, 1 + ({})**2)", "torch.atan2({}, 1 + ({})**2)"),
]
COMPARISONS = [("<", "<"), (">=", ">="), ("!=", "!=")]


def _unary(inner: tuple[str, str], template: tuple[str, str]) -> tuple[str, str]:
    return template[0].format(inner[0]), template[1].format(inner[1])


def _binary(pair: tuple[tuple[str, str], tuple[str, str]], template: tuple[str, str]) -> Any:
    (a, ta), (b, tb) = pair
    return template[0].format(a, b), template[1].format(ta, tb)


def _where(
    parts: tuple[tuple[str, str], tuple[str, str], tuple[str, str], tuple[str, str]],
    comparison: tuple[str, str],
    combine: str,
) -> tuple[str, str]:
    (left, tleft), (right, tright), (a, ta), (b, tb) = parts
    cond = f"({left}) {comparison[0]} ({right})"
    tcond = f"(({tleft}) {comparison[1]} ({tright}))"
    if combine == "not":
        cond, tcond = f"not ({cond})", f"(~{tcond})"
    elif combine == "or":
        cond, tcond = f"({cond}) or (x > 1)", f"({tcond} | (x > 1))"
    return f"where({cond}, {a}, {b})", f"torch.where({tcond}, {ta}, {tb})"


def expressions() -> st.SearchStrategy[tuple[str, str]]:
    return st.recursive(
        LEAVES,
        lambda inner: st.one_of(
            st.builds(_unary, inner, st.sampled_from(UNARY)),
            st.builds(_binary, st.tuples(inner, inner), st.sampled_from(BINARY)),
            st.builds(
                _where,
                st.tuples(inner, inner, inner, inner),
                st.sampled_from(COMPARISONS),
                st.sampled_from(["", "not", "or"]),
            ),
        ),
        max_leaves=8,
    )


# A torch-only function of numbers alone; a constant part that is not a finite real.
DOCUMENTED_REFUSALS = (
    "declare the input as a tensor",
    "constant is not a real number",
    "division by zero",
    "constant is too large",
)

_counter = itertools.count()


def _load(expr: str, folder: Path) -> Any:
    """Generate a Function for `expr` over x, y (tensors) and c (a float) and import it."""
    name = f"Fuzz{next(_counter)}"
    spec = symgrad.spec_from_dict(
        {
            "name": name,
            "inputs": {"x": "tensor", "y": "tensor", "c": {"type": "float", "default": 0.7}},
            "outputs": {"z": f"({expr}) + x"},
        }
    )
    files = symgrad.generate(spec)
    symgrad.write_files(files, folder)
    module = import_file(folder / f"{spec.module}.py", spec.module)
    return getattr(module, spec.module)


def _plain(torch_text: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The torch spelling evaluated directly (tests may eval; symgrad never does)."""

    def number(value: float) -> torch.Tensor:
        return torch.tensor(value, dtype=torch.float64)

    names = {"x": x, "y": y, "c": number(0.7), "T": number}
    value = eval(torch_text, {"torch": torch}, names)
    return torch.as_tensor(value, dtype=torch.float64).expand_as(x) + x


@FUZZ
@given(expression=expressions(), seed=st.integers(0, 2**16))
def test_generated_functions_match_torch_on_the_whole_grammar(
    expression: tuple[str, str], seed: int, tmp_path_factory: Any
) -> None:
    spec_text, torch_text = expression
    # Every drawn expression is in the language, so generation must succeed, except
    # for the refusals the README documents.
    try:
        function = _load(spec_text, tmp_path_factory.mktemp("fuzz"))
    except symgrad.SpecError as error:
        assert any(reason in str(error) for reason in DOCUMENTED_REFUSALS), (spec_text, error)
        return
    generator = torch.Generator().manual_seed(seed)
    x = (4 * torch.rand(6, generator=generator, dtype=torch.float64) - 2).requires_grad_()
    y = (4 * torch.rand(6, generator=generator, dtype=torch.float64) - 2).requires_grad_()
    want = _plain(torch_text, x.detach(), y.detach())
    assume(bool(torch.isfinite(want).all()) and float(want.abs().max()) < 1e3)
    value = function(x, y)
    torch.testing.assert_close(value, want)
    grads = torch.autograd.grad(value.sum(), [x, y], allow_unused=True, materialize_grads=True)
    for grad in grads:
        assert torch.isfinite(grad).all(), (spec_text, grad)
    assume(all(float(g.abs().max()) < 1e3 for g in grads))
    assert torch.autograd.gradcheck(lambda a, b: function(a, b), (x, y))


# --- Arbitrary spec data ---------------------------------------------------------------

_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "x",
            "x + 1",
            "__import__('os').system('true')",
            "x.__class__",
            "lambda: 1",
            "[i for i in x]",
            "where(x > 0, x, 0)",
            "tensor",
            "float",
            "9**9**9",
            "exp(" * 40 + "x" + ")" * 40,
        ]
    ),
)
_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(), _TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
    max_leaves=10,
)


@FUZZ
@given(
    data=st.fixed_dictionaries(
        {"name": st.one_of(st.just("Fuzzed"), _TEXT)},
        optional={
            "inputs": st.one_of(
                st.dictionaries(_TEXT, st.one_of(st.just("tensor"), _VALUES), max_size=3),
                _VALUES,
            ),
            "outputs": st.one_of(st.dictionaries(_TEXT, _TEXT, max_size=2), _VALUES),
            "where": _VALUES,
            "gradients": _VALUES,
            "doc": _VALUES,
        },
    )
)
def test_arbitrary_spec_data_is_generated_or_refused_cleanly(data: dict[str, Any]) -> None:
    with contextlib.suppress(symgrad.SpecError):
        symgrad.generate(symgrad.spec_from_dict(data))
