"""The generated examples with reductions against torch's own built-in functions.

Each row names a module in generated/, the torch built-in that computes the same thing,
and how to sample its inputs. In float64 the values and vector-Jacobian products must
agree to float64 precision. At inputs of magnitude 100 in float32, where the textbook
formulas of softmax, logsumexp and BCE overflow, the generated function must stay finite
and be as accurate as the built-in: its error against the float64 result at most 4x the
built-in's own (and never more than a small absolute floor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch.nn import functional as F  # noqa: N812

from tests.conftest import as_tuple, load_generated

Builtin = Callable[..., Any]


@dataclass(frozen=True)
class Case:
    module: str
    builtin: Builtin
    # (shape, low, high) of each tensor input, in the function's argument order.
    tensors: tuple[tuple[tuple[int, ...], float, float], ...]
    # Whether the inputs are scaled to magnitude 100 for the float32 check.
    large: bool = True


X = ((4, 10), -2.0, 2.0)
ROWS = ((4, 16), -2.0, 2.0)

CASES = [
    Case("softmax", lambda x: torch.softmax(x, dim=-1), (X,)),
    Case("log_softmax", lambda x: torch.log_softmax(x, dim=-1), (X,)),
    Case("log_sum_exp", lambda x: torch.logsumexp(x, dim=-1), (X,)),
    Case(
        "rms_norm",
        lambda x, w: F.rms_norm(x, (16,), w, eps=1e-6),
        (ROWS, ((16,), 0.5, 2.0)),
    ),
    Case("layer_norm", lambda x: F.layer_norm(x, (16,), eps=1e-5), (ROWS,)),
    Case(
        "layer_norm_affine",
        lambda x, w, b: F.layer_norm(x, (16,), w, b, eps=1e-5),
        (ROWS, ((16,), 0.5, 2.0), ((16,), -1.0, 1.0)),
    ),
    Case(
        "cosine_similarity",
        lambda a, b: F.cosine_similarity(a, b, dim=-1, eps=1e-8),
        (ROWS, ROWS),
    ),
    Case("mse_loss", F.mse_loss, (X, X)),
    Case("huber_loss", lambda x, t: F.huber_loss(x, t, delta=1.0), (X, X), large=False),
    Case(
        "bce_with_logits",
        F.binary_cross_entropy_with_logits,
        (X, ((4, 10), 0.0, 1.0)),
    ),
    Case(
        "gaussian_nll_loss",
        lambda x, t, var: F.gaussian_nll_loss(x, t, var),
        (X, X, ((4, 10), 0.5, 2.0)),
        large=False,
    ),
    Case(
        "dorefa_weight",
        lambda w: torch.tanh(w) / (2 * torch.amax(torch.tanh(w).abs())) + 0.5,
        (((8, 16), -2.0, 2.0),),
    ),
    Case(
        "l2_normalize",
        lambda x: (F.normalize(x, dim=-1), torch.linalg.vector_norm(x, dim=-1, keepdim=True)),
        (ROWS,),
    ),
]
IDS = [case.module for case in CASES]


def _function(case: Case) -> Builtin:
    function: Builtin = getattr(load_generated(case.module), case.module)
    return function


DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
    ),
]


def _inputs(
    case: Case, dtype: torch.dtype, scale: float = 1.0, device: str = "cpu"
) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    inputs = []
    for shape, low, high in case.tensors:
        sample = low + (high - low) * torch.rand(shape, generator=generator, dtype=torch.float64)
        sample = sample * scale if low < 0 else sample
        inputs.append(sample.to(device, dtype).requires_grad_())
    return inputs


def _values_and_grads(
    function: Builtin, inputs: list[torch.Tensor]
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """The outputs, and the gradient of a fixed random weighting of them, per input."""
    outputs = as_tuple(function(*inputs))
    generator = torch.Generator().manual_seed(1)
    weights = [torch.randn(o.shape, generator=generator, dtype=torch.float64) for o in outputs]
    total = sum((o * w.to(o)).sum() for o, w in zip(outputs, weights, strict=True))
    grads = torch.autograd.grad(total, inputs)
    return tuple(o.detach() for o in outputs), grads


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_the_builtin_in_float64(case: Case, device: str) -> None:
    inputs = _inputs(case, torch.float64, device=device)
    values, grads = _values_and_grads(_function(case), inputs)
    want_values, want_grads = _values_and_grads(case.builtin, inputs)
    for actual, expected in zip(values + grads, want_values + want_grads, strict=True):
        torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)


def _error(actual: torch.Tensor, exact: torch.Tensor) -> float:
    """Largest error relative to the size of the exact values."""
    scale = exact.abs().max().clamp_min(1e-30)
    return float(((actual.double() - exact).abs().max() / scale).item())


LARGE = [case for case in CASES if case.large]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", LARGE, ids=[case.module for case in LARGE])
def test_stable_at_magnitude_100_in_float32(case: Case, device: str) -> None:
    exact_values, exact_grads = _values_and_grads(
        case.builtin, _inputs(case, torch.float64, 50.0, device)
    )
    values, grads = _values_and_grads(_function(case), _inputs(case, torch.float32, 50.0, device))
    base_values, base_grads = _values_and_grads(
        case.builtin, _inputs(case, torch.float32, 50.0, device)
    )
    for ours, builtin, exact in zip(
        values + grads, base_values + base_grads, exact_values + exact_grads, strict=True
    ):
        assert torch.isfinite(ours).all()
        assert _error(ours, exact) <= max(4 * _error(builtin, exact), 1e-6)
