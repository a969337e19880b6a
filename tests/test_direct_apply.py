"""A generated function calls torch's C++ apply directly where no transform runs (Note
[direct apply] in templates/python/function.py.jinja), and Function.apply where one does."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.autograd import forward_ad

from generated.mish import Mish, mish

# Forward AD loads torch's jvp decompositions with torch.jit.script, which warns once.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)


def _plain_mish(x: torch.Tensor) -> torch.Tensor:
    """Mish in plain torch operations, the reference."""
    return x * torch.tanh(torch.log1p(torch.exp(x)))


@pytest.fixture
def wrapper_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the Functions whose Python apply wrapper ran, in order."""
    calls: list[str] = []
    original = torch.autograd.Function.apply.__func__  # type: ignore[attr-defined]

    def counted(cls: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(cls.__name__)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(torch.autograd.Function, "apply", classmethod(counted))
    return calls


def test_an_eager_call_skips_the_python_wrapper(wrapper_calls: list[str]) -> None:
    """Binding arguments per call is the wrapper's cost at small sizes; eager needs none."""
    x = torch.randn(8, dtype=torch.float64, requires_grad=True)
    y = mish(x)
    assert wrapper_calls == []
    assert y.grad_fn is not None and type(y.grad_fn).__name__ == "MishBackward"
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, torch.func.grad(lambda t: Mish.apply(t).sum())(x))


def test_a_transform_goes_through_function_apply(wrapper_calls: list[str]) -> None:
    """vmap and torch.func.jvp need the wrapper's custom_function_call."""
    x = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(torch.func.vmap(mish)(x), _plain_mish(x))
    assert wrapper_calls[:1] == ["Mish"]  # then vmap's own Functions
    wrapper_calls.clear()
    _, tangent = torch.func.jvp(mish, (x,), (torch.ones_like(x),))
    assert wrapper_calls[:1] == ["Mish"]
    expected = torch.func.jvp(_plain_mish, (x,), (torch.ones_like(x),))[1]
    torch.testing.assert_close(tangent, expected)


def test_forward_mode_dual_tensors_reach_the_jvp() -> None:
    """Forward-mode AD outside torch.func is the C++ apply's: the Function's jvp runs."""
    x = torch.randn(5, dtype=torch.float64)
    with forward_ad.dual_level():
        y = mish(forward_ad.make_dual(x, torch.ones_like(x)))
        tangent = forward_ad.unpack_dual(y).tangent
    expected = torch.func.jvp(_plain_mish, (x,), (torch.ones_like(x),))[1]
    torch.testing.assert_close(tangent, expected)


def test_an_eager_call_keeps_nothing_for_the_jvp() -> None:
    """What the jvp reads is kept only under forward-mode AD, not on every call."""
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert not hasattr(mish(x).grad_fn, "tangent_shapes")
    with forward_ad.dual_level():
        y = mish(forward_ad.make_dual(x, torch.ones_like(x)))
        assert y.grad_fn.tangent_shapes == (x.shape,)
