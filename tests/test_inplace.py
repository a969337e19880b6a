"""In-place variants (Note [In-place variants] in symgrad.ad.inplace).

The variant's backward must never read the overwritten input: these tests check what it
saves and reads, and run it against the out-of-place Function with autograd as the
oracle, on formulas it accepts. The refusals and their messages are in
tests/specs/invalid/inplace_*.yaml.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import symgrad
from symgrad.ad.derive import derive
from symgrad.ad.ir import Derived


def _spec(output: str, **inputs: Any) -> dict[str, Any]:
    return {
        "name": "Variant",
        "inplace": True,
        "inputs": {"x": "tensor", **inputs},
        "outputs": {"y": output},
    }


def _inplace(output: str, **inputs: Any) -> Derived:
    derived = derive(symgrad.spec_from_dict(_spec(output, **inputs))).inplace
    assert derived is not None
    return derived


def _reads(derived: Derived) -> set[str]:
    exprs = [g.expr for part in derived.backward for g in part.gradients]
    exprs += [a.expr for block in derived.prelude for a in block.statements]
    return {str(s) for e in exprs for s in e.free_symbols}


@pytest.mark.parametrize("formula", ["sigmoid(x)", "exp(x)", "tanh(x)", "relu(x)"])
def test_the_backward_reads_the_output_not_the_input(formula: str) -> None:
    derived = _inplace(formula)
    assert [str(s) for s in derived.saved_tensors] == ["y"]
    assert "x" not in _reads(derived)
    assert derived.jvp is None


def test_a_kink_condition_is_carried_over_to_the_output() -> None:
    (gradient,) = _inplace("leaky_relu(x, 0.2)").backward[0].gradients
    assert "y > 0" in str(gradient.expr)


def test_a_positive_slope_input_is_accepted_and_an_unknown_one_refused() -> None:
    positive = {"type": "float", "default": 0.1, "assume": ["positive"]}
    assert _inplace("leaky_relu(x, slope)", slope=positive).saved_tensors
    with pytest.raises(symgrad.SpecError, match="the backward reads x"):
        _inplace("leaky_relu(x, slope)", slope={"type": "float", "default": 0.1})


def test_only_the_overwritten_input_is_dropped_from_what_is_saved() -> None:
    derived = _inplace("2 * x + b * b", b="tensor")
    assert [str(s) for s in derived.saved_tensors] == ["b"]


def test_the_out_of_place_function_is_unchanged() -> None:
    spec = symgrad.spec_from_dict(_spec("exp(x)"))
    plain = symgrad.spec_from_dict({k: v for k, v in _spec("exp(x)").items() if k != "inplace"})
    assert derive(spec).backward == derive(plain).backward


@pytest.mark.parametrize(
    ("formula", "inputs"),
    [
        ("sigmoid(x)", {}),
        ("relu(x)", {}),
        ("leaky_relu(x, 0.3)", {}),
        ("2 * x + b * b", {"b": {"type": "tensor", "shape": [4]}}),
        ("scale * x - b", {"b": "tensor", "scale": {"type": "float", "default": 3.0}}),
    ],
)
def test_the_variant_matches_the_out_of_place_function(
    formula: str, inputs: dict[str, Any]
) -> None:
    module = symgrad.load_module(_spec(formula, **inputs))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    others = [
        torch.randn(4, generator=generator, dtype=torch.float64, requires_grad=True)
        for name in inputs
        if name == "b"
    ]
    expected = module.variant(x, *others)
    target = x.clone()
    version = target._version
    actual = module.variant_(target, *others)
    assert actual is target and target._version > version
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn(3, 4, generator=generator, dtype=torch.float64)
    wrt = [x, *others]
    want = torch.autograd.grad(expected, wrt, cotangent)
    torch.testing.assert_close(torch.autograd.grad(actual, wrt, cotangent), want)
