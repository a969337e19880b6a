"""`where` against torch autograd of the same formula written by hand (issue 11).

Each case generates a Function from a spec and compares its values and gradients with
torch.autograd applied to the plain formula, at points chosen to trip the conditional:
NaN inputs, integer conditions, conditions decided without tensors, removable
singularities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

from symgrad import api

NAN = float("nan")


def _function(expr: str, inputs: dict[str, Any], where: dict[str, str] | None = None) -> Any:
    """The generated convenience function of a one-output spec."""
    data: dict[str, Any] = {"name": "WhereCase", "inputs": inputs, "outputs": {"y": expr}}
    if where:
        data["where"] = where
    module = api.load_module(api.spec_from_dict(data))
    return module.where_case


def _value_and_grads(
    fn: Callable[..., torch.Tensor], args: Sequence[Any]
) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    """fn(*args) and the gradients of its sum with respect to the float tensors."""
    leaves = [
        (
            a.detach().clone().requires_grad_()
            if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a
        )
        for a in args
    ]
    value = fn(*leaves)
    wanted = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
    grads = torch.autograd.grad(value.sum(), wanted, allow_unused=True) if wanted else ()
    return value.detach(), list(grads)


def _check(
    generated: Callable[..., torch.Tensor], plain: Callable[..., torch.Tensor], *args: Any
) -> None:
    got_value, got_grads = _value_and_grads(generated, args)
    want_value, want_grads = _value_and_grads(plain, args)
    assert got_value.dtype == want_value.dtype
    assert got_value.shape == want_value.shape
    assert got_value.device == want_value.device
    torch.testing.assert_close(got_value, want_value, equal_nan=True, rtol=1e-12, atol=0)
    for got, want in zip(got_grads, want_grads, strict=True):
        want = torch.zeros_like(got) if want is None else want
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-12, atol=0)


POINTS = torch.tensor([NAN, -2.0, -0.5, 0.0, 0.5, 2.0], dtype=torch.float64)


# --- item 4: conditions on tensors are never folded --------------------------------------


@pytest.mark.parametrize(
    ("expr", "plain"),
    [
        ("where(x != x, 0.0, x)", lambda x: torch.where(x != x, 0.0, x)),
        ("where(x == x, x**2, -1.0)", lambda x: torch.where(x == x, x**2, -1.0)),
        ("where(x >= x, 3 * x, 0.5)", lambda x: torch.where(x >= x, 3 * x, 0.5)),
        ("where(x**2 >= 0, x, -1.0)", lambda x: torch.where(x**2 >= 0, x, -1.0)),
        ("where(exp(x) > 0, x, 7.0)", lambda x: torch.where(torch.exp(x) > 0, x, 7.0)),
        ("where(not x > 0, x, 2 * x)", lambda x: torch.where(~(x > 0), x, 2 * x)),
        ("where(x > 0 or x <= 0, x, 2 * x)", lambda x: torch.where((x > 0) | (x <= 0), x, 2 * x)),
    ],
)
def test_nan_tests_on_tensors_are_kept(expr: str, plain: Callable[..., torch.Tensor]) -> None:
    _check(_function(expr, {"x": "tensor"}), plain, POINTS)
