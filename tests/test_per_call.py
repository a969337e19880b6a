"""What a generated Function does on every eager call stays cheap at small sizes (bench/small.py):
no torch.broadcast_shapes (Python, tens of microseconds) where torch's C++ rule does."""

from __future__ import annotations

import pytest
import torch

import symgrad

RMS_NORM = {
    "name": "RMSNorm",
    "inputs": {"x": "tensor", "w": "tensor", "eps": {"type": "float", "default": 1e-6}},
    "where": {"r": "1 / sqrt(mean(x**2, dim=-1, keepdim=True) + eps)"},
    "outputs": {"y": "x * r * w"},
}


def _refuse(*shapes: object) -> None:
    raise AssertionError("torch.broadcast_shapes ran")


def test_an_eager_step_does_not_call_torch_broadcast_shapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = symgrad.load_module(symgrad.spec_from_dict(RMS_NORM))
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    w = torch.rand(8, dtype=torch.float64, requires_grad=True)
    expected = torch.autograd.grad(module.rms_norm(x, w).sum(), (x, w))
    monkeypatch.setattr(torch, "broadcast_shapes", _refuse)
    got = torch.autograd.grad(module.rms_norm(x, w).sum(), (x, w))
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize(
    "shapes",
    [((8,), (3, 8)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 1, 4), (5, 1), (1,)), ((0, 1), (3,))],
)
def test_the_module_broadcasts_shapes_as_torch_does(shapes: tuple[tuple[int, ...], ...]) -> None:
    module = symgrad.load_module(symgrad.spec_from_dict(RMS_NORM))
    sizes = [torch.Size(s) for s in shapes]
    assert module._broadcast_shapes(*sizes) == torch.broadcast_shapes(*sizes)
