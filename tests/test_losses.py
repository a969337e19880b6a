"""huber and smooth_l1: torch's loss kernels forward, clamp times the gradient backward."""

from __future__ import annotations

import inspect
import re
import warnings
from typing import Any

import pytest
import sympy
import torch
import torch.nn.functional as nnf

from symgrad import api

_TORCH = {"huber": nnf.huber_loss, "smooth_l1": nnf.smooth_l1_loss}
_KEYWORD = {"huber": "delta", "smooth_l1": "beta"}
_WRITTEN = {
    "huber": "where(abs(d) < p, 0.5 * d**2, p * (abs(d) - 0.5 * p))",
    "smooth_l1": "where(abs(d) < p, 0.5 * d**2 / p, abs(d) - 0.5 * p)",
}


def _module(
    loss: str, parameter: dict[str, Any], shapes: tuple[list[int], list[int]], named: bool = True
) -> Any:
    """A spec of `loss` (an expression in d = x - target and p) as a loaded module."""
    spec = {
        "name": "Loss",
        "inputs": {
            "x": {"type": "tensor", "shape": shapes[0]},
            "target": {"type": "tensor", "shape": shapes[1]},
            "p": parameter,
        },
        "where": {"d": "x - target"} if named else {},
        "outputs": {"loss": loss},
    }
    return api.load_module(api.spec_from_dict(spec))


def _inputs(shape: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Differences on both sides of |d| = 1 and 0.5, at 0 and exactly on the bounds."""
    x = torch.linspace(-3, 3, 25, dtype=torch.float64).reshape(shape).requires_grad_()
    target = torch.zeros(shape, dtype=torch.float64).requires_grad_()
    return x, target


def _source(module: Any) -> str:
    return inspect.getsource(module)


# A named difference is computed, then saved alone; one written in the call goes to the
# kernel as its two tensors (Note [Losses of a difference]).
_KERNEL_ARGUMENTS = {
    "named": "d, d.new_zeros(()).expand_as(d)",
    "inline": "*torch.broadcast_tensors(x, target)",
}


@pytest.mark.parametrize("name", ["huber", "smooth_l1"])
@pytest.mark.parametrize("value", [1.0, 0.5])
@pytest.mark.parametrize("written", [False, True])
@pytest.mark.parametrize("difference", ["named", "inline"])
def test_loss_matches_torch_forward_backward_and_double_backward(
    name: str, value: float, written: bool, difference: str
) -> None:
    """Values, gradients and second derivatives are torch's, written as a call or a where."""
    loss = _WRITTEN[name] if written else f"{name}(d, p)"
    if difference == "inline":
        loss = re.sub(r"\bd\b", "(x - target)", loss)
    parameter = {"type": "float", "assume": ["positive"]}
    module = _module(loss, parameter, ([25], [25]), named=difference == "named")
    arguments = _KERNEL_ARGUMENTS[difference]
    assert f"torch.ops.aten.{_TORCH[name].__name__}({arguments}, 0, p)" in _source(module)
    assert "torch.where" not in _source(module)
    x, target = _inputs([25])
    got = module.loss(x, target, value)
    expected = _TORCH[name](x, target, reduction="none", **{_KEYWORD[name]: value})
    torch.testing.assert_close(got, expected)
    weights = torch.linspace(0.5, 2, 25, dtype=torch.float64)
    grads = torch.autograd.grad((got * weights).sum(), (x, target), create_graph=True)
    expected_grads = torch.autograd.grad((expected * weights).sum(), (x, target), create_graph=True)
    for g, e in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e)
    # clamp's mask: 1 on the bounds |d| = p themselves, where torch's kernel gives 0.
    (second,) = torch.autograd.grad(grads[0].sum(), x)
    (expected_second,) = torch.autograd.grad(expected_grads[0].sum(), x)
    off_bounds = x.detach().abs() != value
    torch.testing.assert_close(second[off_bounds], expected_second[off_bounds])


@pytest.mark.parametrize("reduce", ["mean", "sum"])
def test_a_named_difference_is_saved_alone(reduce: str) -> None:
    """A loss of d = x - target saves d, one tensor of x's elements: not x and target
    (eager autograd of the written `where` saves d and a mask)."""
    module = _module(f"{reduce}(smooth_l1(d, p))", {"type": "float"}, ([25], [25]))
    x, target = _inputs([25])
    saved: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        got = module.loss(x, target, 0.5)
    assert [t.shape for t in saved] == [torch.Size([25])]
    torch.testing.assert_close(saved[0], (x - target).detach())
    expected = nnf.smooth_l1_loss(x, target, reduction=reduce, beta=0.5)
    torch.testing.assert_close(got, expected)
    for g, e in zip(
        torch.autograd.grad(got, (x, target)),
        torch.autograd.grad(expected, (x, target)),
        strict=True,
    ):
        torch.testing.assert_close(g, e)


def test_smooth_l1_at_beta_zero_is_torchs_l1() -> None:
    """beta = 0: torch's smooth_l1 is |d| with gradient sign(d) (0 at d = 0)."""
    module = _module("smooth_l1(d, 0.0)", {"type": "float"}, ([25], [25]))
    x, target = _inputs([25])
    got = module.loss(x, target, 1.0)
    expected = nnf.smooth_l1_loss(x, target, reduction="none", beta=0.0)
    torch.testing.assert_close(got, expected)
    (grad,) = torch.autograd.grad(got.sum(), x)
    torch.testing.assert_close(grad, torch.sign(x.detach()))


@pytest.mark.parametrize("name", ["huber", "smooth_l1"])
@pytest.mark.parametrize("value", [1.0, 0.0, -1.0])
def test_a_float_input_outside_torchs_domain_gets_the_where(name: str, value: float) -> None:
    """An unbounded float p: torch's kernel where it takes p (delta > 0, beta >= 0), the
    written formula's values and gradients elsewhere, chosen in Python (torch raises)."""
    module = _module(_WRITTEN[name], {"type": "float"}, ([25], [25]))
    source = _source(module)
    assert "torch.ops.aten" in source and "torch.tensor(" not in source
    x, target = _inputs([25])
    got = module.loss(x, target, value)
    d = x - target
    p = torch.tensor(value, dtype=torch.float64)
    quadratic = 0.5 * d**2 if name == "huber" else 0.5 * d**2 / torch.where(p > 0, p, 1.0)
    linear = p * (d.abs() - 0.5 * p) if name == "huber" else d.abs() - 0.5 * p
    expected = torch.where(d.abs() < p, quadratic, linear)
    torch.testing.assert_close(got, expected)
    weights = torch.linspace(0.5, 2, 25, dtype=torch.float64)
    for g, e in zip(
        torch.autograd.grad((got * weights).sum(), (x, target)),
        torch.autograd.grad((expected * weights).sum(), (x, target)),
        strict=True,
    ):
        torch.testing.assert_close(g, e)


def test_a_constant_outside_torchs_domain_keeps_the_where() -> None:
    module = _module(_WRITTEN["huber"].replace("p", "(-1.0)"), {"type": "float"}, ([25], [25]))
    assert "huber_loss" not in _source(module)


def test_tensor_delta_prints_the_definition_with_its_gradient() -> None:
    """A tensor delta: the piecewise formula forward, and d loss / d delta."""
    module = _module("huber(d, p)", {"type": "tensor", "shape": [25]}, ([25], [25]))
    x, target = _inputs([25])
    delta = torch.full([25], 1.0, dtype=torch.float64, requires_grad=True)
    got = module.loss(x, target, delta)
    d = x - target
    expected = torch.where(d.abs() < delta, 0.5 * d**2, delta * (d.abs() - 0.5 * delta))
    torch.testing.assert_close(got, expected)
    for g, e in zip(
        torch.autograd.grad(got.sum(), (x, delta)),
        torch.autograd.grad(expected.sum(), (x, delta)),
        strict=True,
    ):
        torch.testing.assert_close(g, e)


def test_a_difference_with_broadcast_matches_torch() -> None:
    """x - target with x the smaller: broadcast first (torch's op sizes its result as x)."""
    module = _module("huber(d, 1.0)", {"type": "float"}, ([5], [5, 5]))
    target = torch.linspace(-3, 3, 25, dtype=torch.float64).reshape(5, 5).requires_grad_()
    x = torch.linspace(-1, 1, 5, dtype=torch.float64).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        got = module.loss(x, target, 1.0)
    expected = nnf.huber_loss(x.expand(5, 5), target, reduction="none")
    torch.testing.assert_close(got, expected)
    for g, e in zip(
        torch.autograd.grad(got.sum(), (x, target)),
        torch.autograd.grad(expected.sum(), (x, target)),
        strict=True,
    ):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize(
    ("expr", "message"),
    [("huber(d, 0.0)", "delta must be positive"), ("smooth_l1(d, -1.0)", "at least 0")],
)
def test_parameters_outside_torchs_domain_are_refused(expr: str, message: str) -> None:
    with pytest.raises(Exception, match=message):
        _module(expr, {"type": "float"}, ([25], [25]))


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_smooth_l1_by_a_float_input_decides_beta_zero_in_python(beta: float) -> None:
    """beta a float input: the backward chooses clamp(d / beta) or sign(d) in Python, no
    tensor made of the condition; values, gradients and second derivatives are torch's."""
    module = _module("smooth_l1(d, p)", {"type": "float"}, ([25], [25]))
    backward = _source(module).split("def backward")[1].split("def jvp")[0]
    assert "if (p > 0)" in backward
    assert "torch.tensor" not in backward and "torch.where" not in backward
    x, target = _inputs([25])
    got = module.loss(x, target, beta)
    expected = nnf.smooth_l1_loss(x, target, reduction="none", beta=beta)
    torch.testing.assert_close(got, expected)
    (grad,) = torch.autograd.grad(got.sum(), x, create_graph=True)
    (expected_grad,) = torch.autograd.grad(expected.sum(), x, create_graph=True)
    torch.testing.assert_close(grad, expected_grad)
    if beta > 0:
        off_bounds = x.detach().abs() != beta
        (second,) = torch.autograd.grad(grad.sum(), x)
        (expected_second,) = torch.autograd.grad(expected_grad.sum(), x)
        torch.testing.assert_close(second[off_bounds], expected_second[off_bounds])


def test_fused_loops_and_triton_spell_the_piecewise_formula() -> None:
    """No torch call inside a loop or a kernel: the loss and its slopes written out."""
    from symgrad.backends.cpp.vectorized import VecPrinter
    from symgrad.backends.triton.printer import TritonPrinter
    from symgrad.language import losses

    d, p = sympy.symbols("d p", real=True)
    for expr in (losses.Huber(d, p), losses.SmoothL1(d, p), losses.HuberSlope(d, p)):
        assert "blendv" in VecPrinter().doprint(expr)
        assert "tl.where" in TritonPrinter().doprint(expr)
