"""Recognising torch's fused activations (symgrad.ad.fuse), rule by rule.

Whether the fused Function agrees with autograd of the written formula is the generated
tests' job (tests/test_generated.py, the bench specs); here: what matches and what must not.
"""

from __future__ import annotations

import pytest
import sympy

import symgrad
from symgrad.ad import fuse, stable
from symgrad.language import activations

X, Y = "x", "y"

# (formula, the activation it must become, or None)
CASES = [
    ("x * sigmoid(x)", "silu"),
    ("sigmoid(x) * x * y", "silu"),
    ("x * y * sigmoid(x * y)", "silu"),
    ("2 * x**2 * sigmoid(x)", "silu"),
    ("x * tanh(softplus(x))", "mish"),
    ("x * tanh(log(1 + exp(x)))", "mish"),
    ("0.5 * x * (1 + erf(x / sqrt(2)))", "gelu"),
    ("x * (1 + erf(x * 0.7071067811865476)) / 2", "gelu"),
    ("x * (1 + erf(x / sqrt(2)))", "gelu"),  # 2 * gelu(x)
    ("0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))", "gelu_tanh"),
    ("y * 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x**3)))", "gelu_tanh"),
    # Not the activation: another argument, scale or constant.
    ("2 * sigmoid(x)", None),
    ("x * sigmoid(y)", None),
    ("y * sigmoid(x)", None),
    ("x * tanh(softplus(y))", None),
    ("0.5 * x * (1 + erf(x))", None),
    ("0.5 * x * (1 + tanh(0.8 * (x + 0.044715 * x**3)))", None),
    ("0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.05 * x**3)))", None),
    ("0.5 * y * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))", None),
]


def _rewritten(formula: str) -> object:
    spec = symgrad.spec_from_dict(
        {"name": "Case", "inputs": {X: "tensor", Y: "tensor"}, "outputs": {"z": formula}}
    )
    return fuse.fuse_activations(stable.stabilize(spec.outputs[0].expr))


@pytest.mark.parametrize(("formula", "activation"), CASES, ids=[c[0] for c in CASES])
def test_recognises_exactly_the_activations(formula: str, activation: str | None) -> None:
    rewritten = _rewritten(formula)
    found = [a.name for a in rewritten.atoms(activations.Activation)]  # type: ignore[attr-defined]
    assert found == ([activation] if activation else [])


def test_leftover_factors_stay() -> None:
    """2 * x**2 * sigmoid(x) is 2 * x * silu(x): one x joins the activation."""
    x = sympy.Symbol(X, real=True)
    assert _rewritten("2 * x**2 * sigmoid(x)") == 2 * x * activations.Silu(x)
