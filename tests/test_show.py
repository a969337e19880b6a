"""`symgrad.describe` (symgrad show): formulas, derivatives and saves, pretty and LaTeX."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import symgrad
import symgrad.present.show
from symgrad.ad.derive import derive
from symgrad.ad.ir import Derived
from symgrad.frontend.options import variants
from symgrad.present.show import LONG_PARTIAL

EXAMPLES = Path(__file__).parent.parent / "examples"


def _describe(name: str, latex: bool = False) -> str:
    return symgrad.describe(symgrad.load_spec(EXAMPLES / name), latex=latex)


def test_soft_clamp_in_unicode() -> None:
    text = _describe("soft_clamp.yaml")
    assert text.endswith(
        "Inputs\n"
        "  x: tensor\n"
        "  lo: float = 0.0\n"
        "  hi: float = 1.0\n"
        "\n"
        "Forward\n"
        "  s = sigmoid(x)\n"
        "  y = lo + s⋅(hi - lo)\n"
        "\n"
        "Derivatives\n"
        "  ∂y/∂x = s⋅(1 - s)⋅(hi - lo)\n"
        "\n"
        "Backward saves\n"
        "  tensors (save_for_backward): x\n"
        "  numbers (ctx.numbers): lo, hi\n"
        "  shapes only: none\n"
        "  residuals (extra forward outputs): none\n"
        "  saved values (extra non-differentiable outputs): none\n"
        "  recomputed in the backward: s\n"
    )


def test_soft_clamp_in_latex() -> None:
    text = _describe("soft_clamp.yaml", latex=True)
    assert (
        "\\begin{align*}\n"
        "\\frac{\\partial y}{\\partial x} &= s \\left(1 - s\\right) "
        "\\left(\\mathit{hi} - \\mathit{lo}\\right)\n"
        "\\end{align*}\n"
    ) in text
    assert "s &= \\operatorname{sigmoid}{\\left(x \\right)} \\\\\n" in text
    assert "%   lo: float = 0.0\n" in text  # no alias: lo is shown as the word lo
    assert "%   numbers (ctx.numbers): lo, hi\n" in text
    # Everything outside the formulas is a comment, so the text pastes into a document.
    prose = [line for line in text.splitlines() if not line.startswith("%")]
    assert all("&=" in line or line.startswith("\\") for line in prose), prose


# (example, fragments of the unicode text, fragments of the LaTeX text)
CASES = [
    (
        "polar.yaml",
        [
            "  ∂radius/∂x = ──────\n",
            "  ∂angle/∂y = ──────────\n",
            "save_for_backward): x, y, radius",
        ],
        ["\\frac{\\partial \\mathit{radius}}{\\partial x} &= \\frac{x}{\\mathit{radius}}"],
    ),
    (
        "swish.yaml",  # beta is drawn as β, and the inputs say so
        ["  beta (β): tensor", "  ∂y/∂β = x ⋅(1 - sigmoid(β⋅x))⋅sigmoid(β⋅x)\n"],
        ["\\frac{\\partial y}{\\partial \\beta} &= ", "%   beta ($\\beta$): tensor"],
    ),
    (
        "replace_grad.yaml",  # underscores are names, not subscripts
        ["  y = forward_value\n", "  ∂y/∂backward_value = 1\n", "gradients.y.backward_value"],
        ["y &= \\mathit{forward\\_value}", "shapes only: backward_value"],
    ),
    (
        "quantize.yaml",  # a gradient given in the spec; an output without a gradient
        ["(given in the spec: gradients.value.x)", "index: not differentiable", "⎧1  for -4"],
        ["\\begin{cases} 1 & \\text{for}\\: -4 \\leq x", "% index: not differentiable"],
    ),
    (
        "kinked_activation.yaml",  # the spec's names for kinked functions
        ["y = clamp(slope⋅min(x, 0) + relu(x), -1, cap) + max(x, floor_)\n"],
        ["\\operatorname{clamp}{\\left(", "\\operatorname{relu}", "\\mathit{floor\\_}"],
    ),
    (
        "special_functions.yaml",
        ["xlogy(p, a)", "atan2(z, a)"],
        ["\\operatorname{atan2}{\\left(z,a \\right)}", "\\operatorname{xlogy}"],
    ),
]


@pytest.mark.parametrize(("example", "pretty", "latex"), CASES, ids=[c[0] for c in CASES])
def test_examples_show_their_formulas(example: str, pretty: list[str], latex: list[str]) -> None:
    text = _describe(example)
    for fragment in pretty:
        assert fragment in text
    latex_text = _describe(example, latex=True)
    for fragment in latex:
        assert fragment in latex_text


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_shows_each_partial_and_no_trailing_spaces(example: str) -> None:
    spec = symgrad.load_spec(EXAMPLES / example)
    text = symgrad.describe(spec, width=80)
    assert all(line == line.rstrip() and len(line) <= 80 for line in text.splitlines())
    labels = text.count("∂") // 2 + text.count(" from ")  # partials and gradient products
    assert labels == sum(len(derive(v.spec).partials) for v in variants(spec))


def test_a_long_partial_points_to_the_backward(monkeypatch: pytest.MonkeyPatch) -> None:
    def too_long(spec: symgrad.Spec) -> Derived:
        return dataclasses.replace(derive(spec), partials={("y", "x"): None})

    monkeypatch.setattr(symgrad.present.show, "derive", too_long)
    assert f"  ∂y/∂x = {LONG_PARTIAL}\n" in _describe("soft_clamp.yaml")
    assert f"&= \\text{{{LONG_PARTIAL}}}\n" in _describe("soft_clamp.yaml", latex=True)


def test_partials_that_are_absent_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    def without(spec: symgrad.Spec) -> Derived:
        return dataclasses.replace(derive(spec), partials={})

    monkeypatch.setattr(symgrad.present.show, "derive", without)
    assert "Derivatives\n  none\n" in _describe("soft_clamp.yaml")
    assert "% Derivatives\n% none\n" in _describe("soft_clamp.yaml", latex=True)


def test_where_is_drawn_as_cases_and_chains_flatten() -> None:
    spec = symgrad.spec_from_dict(
        {
            "name": "Steps",
            "inputs": {"x": "tensor"},
            "outputs": {"y": "where(x < -1, -1, where(x > 1, 1, x))"},
        }
    )
    text = symgrad.describe(spec, latex=True)
    assert "\\begin{cases} -1 & \\text{for}\\: x < -1 \\\\1 & \\text{for}\\: x > 1" in text
    assert text.count("\\begin{cases}") == 2  # the forward and its derivative, one each


@pytest.mark.parametrize(
    ("formula", "pretty", "latex"),
    [
        (
            "x - mean(x, dim=-1, keepdim=True)",
            "y = x - mean(x, dim=-1, keepdim=True)",
            "\\operatorname{mean}{\\left(x, \\mathrm{dim}=-1, \\mathrm{keepdim}=True \\right)}",
        ),
        (
            "sum(sin(x))",
            "y = sum(sin(x))",
            "\\operatorname{sum}{\\left(\\sin{\\left(x \\right)} \\right)}",
        ),
        (
            "logsumexp(x, dim=[0, 1])",
            "y = logsumexp(x, dim=[0, 1])",
            "\\operatorname{logsumexp}{\\left(x, \\mathrm{dim}=[0, 1] \\right)}",
        ),
        (
            "x - amax(x, dim=-1, keepdim=True)",
            "y = x - amax(x, dim=-1, keepdim=True)",
            "\\operatorname{amax}{\\left(x, \\mathrm{dim}=-1, \\mathrm{keepdim}=True \\right)}",
        ),
        (
            "amin(x, dim=[0, 1])",
            "y = amin(x, dim=[0, 1])",
            "\\operatorname{amin}{\\left(x, \\mathrm{dim}=[0, 1] \\right)}",
        ),
    ],
)
def test_reductions_are_written_as_in_a_spec(formula: str, pretty: str, latex: str) -> None:
    spec = symgrad.spec_from_dict(
        {"name": "Reduced", "inputs": {"x": {"type": "tensor"}}, "outputs": {"y": formula}}
    )
    assert pretty in symgrad.describe(spec)
    assert latex in symgrad.describe(spec, latex=True)


@pytest.mark.parametrize(
    ("formula", "pretty", "latex"),
    [
        (
            "reshape(x, [1, -1])",
            "y = reshape(x, [1, -1])",
            "\\operatorname{reshape}{\\left(x, \\left[1, -1\\right] \\right)}",
        ),
        (
            "unsqueeze(x, 0)",
            "y = unsqueeze(x, 0)",
            "\\operatorname{unsqueeze}{\\left(x, 0 \\right)}",
        ),
        (
            "chunk(x, 2, dim=-1)[1]",
            "y = chunk(x, 2, dim=-1)[1]",
            "\\operatorname{chunk}{\\left(x, 2, \\mathrm{dim}=-1 \\right)}\\left[1\\right]",
        ),
        (
            "cat([x, sin(x)], 0)",
            "y = cat([x, sin(x)], dim=0)",
            "\\operatorname{cat}{\\left(\\left[x, \\sin{\\left(x \\right)}\\right], "
            "\\mathrm{dim}=0 \\right)}",
        ),
    ],
)
def test_views_are_written_with_their_arguments(formula: str, pretty: str, latex: str) -> None:
    """A view's sizes, dim, chunk piece and cat pieces are shown, not dropped."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Viewed",
            "inputs": {"x": {"type": "tensor", "shape": [2, 4]}},
            "outputs": {"y": formula},
        }
    )
    assert pretty in symgrad.describe(spec)
    assert latex in symgrad.describe(spec, latex=True)


def test_a_chunks_gradient_is_a_cat_of_its_pieces_gradients() -> None:
    spec = symgrad.spec_from_dict(
        {
            "name": "Halves",
            "inputs": {"x": {"type": "tensor", "shape": [2, 4]}},
            "outputs": {"y": "chunk(x, 2, dim=-1)[0] * chunk(x, 2, dim=-1)[1]"},
        }
    )
    text = symgrad.describe(spec)
    assert "grad_x from y = cat([" in text and "], dim=-1)" in text


def test_gradients_through_a_reduction_are_products_written_as_sums() -> None:
    spec = symgrad.spec_from_dict(
        {
            "name": "Rms",
            "inputs": {"x": "tensor", "w": "tensor"},
            "where": {"r": "1 / sqrt(mean(x**2, dim=-1, keepdim=True) + 1e-6)"},
            "outputs": {"y": "x * r * w"},
        }
    )
    text = symgrad.describe(spec, width=200)
    assert "grad_x from y = " in text  # not ∂y/∂x: it reads grad_y
    # w may broadcast x: its term is summed to x's shape, and the reduction's to its own.
    assert "sum_to(grad_y⋅r⋅w, x)" in text
    assert "sum" in text and "dim=-1, keepdim=True" in text and "numel" in text
    assert "SumTo" not in text and "ShapeOf" not in text and "Count" not in text
    assert "∂y/∂w = r⋅x\n" in text
    assert "residuals (extra forward outputs): r\n" in text
    latex = symgrad.describe(spec, latex=True)
    assert "\\text{grad of } x \\text{ from } y &= " in latex
    assert "\\operatorname{sum\\_to}{\\left(\\mathit{grad\\_y} r w, x \\right)}" in latex
