"""Gradients of inputs that are broadcast, reduced, or both, against autograd.

Each case is a formula, its input shapes and the same formula in torch. The generated
Function's vector-Jacobian product, with random cotangents on every output (which
catches a term counted once per broadcast row where gradcheck of one output at a time
may not), its jvp along random tangents of every input or only one, and gradcheck and
gradgradcheck must agree with autograd of the torch formula.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch.autograd import forward_ad

import symgrad
from tests.conftest import as_tuple


@dataclass(frozen=True)
class Case:
    outputs: dict[str, str]
    shapes: dict[str, tuple[int, ...]]
    torch_formula: Callable[..., Any]
    where: dict[str, str] | None = None


POSITIVE = {"assume": ["positive"]}

CASES = {
    "broadcast input that also feeds a reduction": Case(
        {"y": "z * x * sum(x, dim=-1, keepdim=True)"},
        {"x": (1, 3), "z": (2, 3)},
        lambda x, z: z * x * x.sum(-1, keepdim=True),
    ),
    "rms norm with x broadcast against w": Case(
        {"y": "x * r * w"},
        {"x": (1, 16), "w": (4, 16)},
        lambda x, w: x * w / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6),
        where={"r": "1 / sqrt(mean(x**2, dim=-1, keepdim=True) + 1e-6)"},
    ),
    "alpha compositing over": Case(
        {"out": "src * a + dst * (1 - a)"},
        {"src": (5, 3), "a": (5, 1), "dst": (5, 3)},
        lambda src, a, dst: src * a + dst * (1 - a),
    ),
    "two outputs of a 0-d input": Case(
        {"y0": "2 * s", "y1": "s + x"},
        {"s": (), "x": (3,)},
        lambda s, x: (2 * s, s + x),
    ),
    "sum of x plus x": Case({"y": "sum(x) + x"}, {"x": (2,)}, lambda x: x.sum() + x),
    "sum of x minus x": Case({"y": "sum(x) - x"}, {"x": (2, 1)}, lambda x: x.sum() - x),
    "sum of x plus a 0-d bias": Case(
        {"y": "sum(x + s)"}, {"x": (4,), "s": ()}, lambda x, s: (x + s).sum()
    ),
    "mean of x plus a 0-d bias": Case(
        {"y": "mean(x + s)"}, {"x": (4,), "s": ()}, lambda x, s: (x + s).mean()
    ),
    "mean over a dim of a broadcast sum": Case(
        {"y": "mean(x1 + x0, dim=-1)"},
        {"x1": (2, 1), "x0": (3,)},
        lambda x1, x0: (x1 + x0).mean(-1),
    ),
    "kl divergence batchmean": Case(
        {"y": "mean(sum(p * log(p / q), dim=-1))"},
        {"p": (4, 3), "q": (4, 3)},
        lambda p, q: (p * torch.log(p / q)).sum(-1).mean(),
    ),
    "mean of a mean": Case(
        {"y": "mean(mean(x, dim=0))"}, {"x": (4, 3)}, lambda x: x.mean(0).mean()
    ),
    "mean of a logsumexp": Case(
        {"y": "mean(logsumexp(x, dim=1))"}, {"x": (4, 3)}, lambda x: torch.logsumexp(x, 1).mean()
    ),
    "sum of a sum over 4": Case(
        {"y": "sum(sum(x, dim=1)) / 4"}, {"x": (4, 3)}, lambda x: x.sum(1).sum() / 4
    ),
    "kept dims then a removed dim": Case(
        {"y": "sum(mean(x, dim=[0, 1], keepdim=True), dim=-1)"},
        {"x": (2, 3, 4)},
        lambda x: x.mean((0, 1), keepdim=True).sum(-1),
    ),
    "softmax of a broadcast sum": Case(
        {"y": "softmax(x + s, dim=-1) * s"},
        {"x": (2, 3), "s": (2, 1)},
        lambda x, s: torch.softmax(x + s, -1) * s,
    ),
    "reduction of a constant-shaped tangent": Case(
        {"y": "sum(x + s, dim=-1)"}, {"x": (2, 4), "s": (2, 1)}, lambda x, s: (x + s).sum(-1)
    ),
    "mean over dim -1 of a 0-d tensor": Case(
        {"y": "mean(x, dim=-1) * 2"}, {"x": ()}, lambda x: x.mean(-1) * 2
    ),
    "kept sum over dim 0 of a 0-d tensor": Case(
        {"y": "sum(x, dim=0, keepdim=True) * x"}, {"x": ()}, lambda x: x.sum(0, keepdim=True) * x
    ),
    "cosine similarity over dim 0 of 0-d inputs": Case(
        {"y": "sum(a * b, dim=0) / (sqrt(sum(a**2, dim=0)) * sqrt(sum(b**2, dim=0)))"},
        {"a": (), "b": ()},
        lambda a, b: (a * b).sum(0) / ((a**2).sum(0).sqrt() * (b**2).sum(0).sqrt()),
    ),
    "cosine similarity over dim 0 of 1-d inputs, clamped": Case(
        {"y": "sum(a * b, dim=0) / max(sqrt(sum(a**2, dim=0)) * sqrt(sum(b**2, dim=0)), 1e-8)"},
        {"a": (5,), "b": (5,)},
        lambda a, b: (a * b).sum(0)
        / torch.clamp_min((a**2).sum(0).sqrt() * (b**2).sum(0).sqrt(), 1e-8),
    ),
    # Over dim -1 the rank decides whether a dim goes, at run time.
    "cosine similarity over dim -1 of 0-d inputs": Case(
        {"y": "sum(a * b, dim=-1) / sqrt(sum(a**2, dim=-1))"},
        {"a": (), "b": ()},
        lambda a, b: (a * b).sum(-1) / (a**2).sum(-1).sqrt(),
    ),
    "mean and logsumexp over dim -1 of 0-d inputs": Case(
        {"y": "mean(a * b, dim=-1) * a + logsumexp(a * b, dim=-1) * b"},
        {"a": (), "b": ()},
        lambda a, b: (a * b).mean(-1) * a + torch.logsumexp(a * b, -1) * b,
    ),
    "kept sum, softmax and log_softmax over dim -1 of 0-d inputs": Case(
        {"y": "sum(a * b, dim=-1, keepdim=True) * softmax(a * b, dim=-1) + log_softmax(a, dim=-1)"},
        {"a": (), "b": ()},
        lambda a, b: (a * b).sum(-1, keepdim=True) * torch.softmax(a * b, -1)
        + torch.log_softmax(a, -1),
    ),
    "logsumexp over dim -1 of a 0-d input and a vector": Case(
        {"y": "logsumexp(a * b, dim=-1) * a"},
        {"a": (), "b": (3,)},
        lambda a, b: torch.logsumexp(a * b, -1) * a,
    ),
    "sum over dims 0 and 2 of a product, times a vector": Case(
        {"y": "sum(x * w, dim=[0, 2]) * v"},
        {"x": (2, 3, 4), "w": (4,), "v": (3,)},
        lambda x, w, v: (x * w).sum((0, 2)) * v,
    ),
    "dice loss with a constant target": Case(
        {"loss": "1 - (2 * sum(p * t, dim=-1) + 1) / (sum(p, dim=-1) + sum(t, dim=-1) + 1)"},
        {"p": (4, 5), "t": (4, 5)},
        lambda p, t: 1 - (2 * (p * t).sum(-1) + 1) / (p.sum(-1) + t.sum(-1) + 1),
    ),
    "sum over a middle dim times a per-channel weight": Case(
        {"z": "sum(x, dim=1) * s"}, {"x": (3, 4, 5), "s": (5,)}, lambda x, s: x.sum(1) * s
    ),
    "an output that is a reduction another output reads": Case(
        {"y0": "sum(w)", "y1": "sum(w) * x"},
        {"x": (3,)},
        lambda x: (torch.tanh(x).sum(), torch.tanh(x).sum() * x),
        where={"w": "tanh(x)"},
    ),
    "a mean over an output that renames a value, a 0-d input": Case(
        {"y0": "w", "y1": "mean(w)"},
        {"x0": (3,), "x1": ()},
        lambda x0, x1: (
            x0.mean(-1, keepdim=True) * (x1 - x0),
            (x0.mean(-1, keepdim=True) * (x1 - x0)).mean(),
        ),
        where={"w": "mean(x0, keepdim=True) * (x1 - x0)"},
    ),
    "infonce": Case(
        {"loss": "mean(logsumexp(logits, dim=-1) - sum(logits * labels, dim=-1))"},
        {"logits": (4, 5), "labels": (4, 5)},
        lambda logits, labels: (torch.logsumexp(logits, -1) - (logits * labels).sum(-1)).mean(),
    ),
}


def _spec(name: str, case: Case) -> symgrad.Spec:
    inputs = {n: {"type": "tensor", "shape": list(s), **POSITIVE} for n, s in case.shapes.items()}
    data: dict[str, Any] = {"name": name, "inputs": inputs, "outputs": case.outputs}
    if case.where:
        data["where"] = case.where
    return symgrad.spec_from_dict(data)


@functools.cache
def _function(name: str) -> Any:
    """The generated function of case `name`, generated once for all the tests below."""
    spec = _spec("Case", CASES[name])
    return getattr(symgrad.load_module(spec), spec.module)


def _inputs(case: Case, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        (0.5 + torch.rand(shape, generator=generator, dtype=torch.float64)).requires_grad_()
        for shape in case.shapes.values()
    ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_with_cotangents_on_every_output(name: str) -> None:
    case = CASES[name]
    function = _function(name)
    inputs = _inputs(case, seed=len(name))
    ours = as_tuple(function(*inputs))
    theirs = as_tuple(case.torch_formula(*inputs))
    generator = torch.Generator().manual_seed(1)
    cotangents = [torch.randn(t.shape, generator=generator, dtype=t.dtype) for t in theirs]
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference)
    got = torch.autograd.grad(ours, inputs, cotangents, allow_unused=True)
    want = torch.autograd.grad(theirs, inputs, cotangents, allow_unused=True)
    for item, g, w in zip(case.shapes, got, want, strict=True):
        assert g is not None and w is not None, item
        assert g.shape == w.shape, item
        torch.testing.assert_close(g, w, msg=lambda m, item=item: f"grad {item}: {m}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_and_gradgradcheck(name: str) -> None:
    case = CASES[name]
    function = _function(name)
    inputs = tuple(_inputs(case, seed=0))
    assert torch.autograd.gradcheck(function, inputs)
    assert torch.autograd.gradgradcheck(function, inputs)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_along_each_input_alone(name: str) -> None:
    """A tangent on one input only: the others' are missing, which must count as zero."""
    case = CASES[name]
    function = _function(name)
    primals = [t.detach() for t in _inputs(case, seed=2)]
    for index in range(len(primals)):
        tangent = torch.randn_like(primals[index])
        results = []
        for formula in (function, case.torch_formula):
            with forward_ad.dual_level():
                arguments = list(primals)
                arguments[index] = forward_ad.make_dual(primals[index], tangent)
                outputs = as_tuple(formula(*arguments))
                results.append([forward_ad.unpack_dual(o).tangent for o in outputs])
        for mine, reference in zip(*results, strict=True):
            if mine is None or reference is None:  # no tangent: a zero one is the same
                present = reference if mine is None else mine
                assert present is None or torch.count_nonzero(present) == 0
                continue
            torch.testing.assert_close(mine, reference)


def test_jvp_of_residual_outputs_with_a_constant_input() -> None:
    """A Dice loss whose target needs no gradient: every differentiable output of the
    Function (the residual sums too) gets a tangent tensor, never None."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Dice",
            "inputs": {"p": "tensor", "t": {"type": "tensor", "requires_grad": False}},
            "outputs": {
                "loss": "1 - (2 * sum(p * t, dim=-1) + 1) / (sum(p, dim=-1) + sum(t, dim=-1) + 1)"
            },
        }
    )
    dice = symgrad.load_module(spec).dice
    p, t = torch.rand(4, 5, dtype=torch.float64), torch.rand(4, 5, dtype=torch.float64)

    def reference(p: torch.Tensor) -> torch.Tensor:
        return 1 - (2 * (p * t).sum(-1) + 1) / (p.sum(-1) + t.sum(-1) + 1)

    tangent = torch.randn_like(p)
    _, mine = torch.func.jvp(lambda p: dice(p, t), (p,), (tangent,))
    _, want = torch.func.jvp(reference, (p,), (tangent,))
    torch.testing.assert_close(mine, want)
    assert torch.autograd.gradcheck(
        lambda p: dice(p, t), (p.requires_grad_(),), check_forward_ad=True
    )


@pytest.mark.parametrize(
    "outputs",
    [
        # A non-differentiable output that the backward would read (a where value).
        {"y0": "1 / (1 + w0**2)", "y2": {"expr": "w0", "differentiable": False}},
        # A non-differentiable output that is also a residual (a reduction).
        {"y0": "mean(-atan(w1))", "y1": {"expr": "w1", "differentiable": False}},
    ],
)
def test_double_backward_through_values_also_returned_non_differentiable(
    outputs: dict[str, Any],
) -> None:
    """A value marked non-differentiable carries no graph: the backward must not read it."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Shared",
            "inputs": {"x0": "tensor"},
            "where": {"w0": "atan(x0)", "w1": "sum(x0 * x0, dim=0)"},
            "outputs": outputs,
        }
    )
    shared = symgrad.load_module(spec).shared
    x = torch.tensor([[-0.9], [0.4]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda x: shared(x)[0], (x,))


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_softmax_of_values_without_tangents() -> None:
    """where(x > 0, k, k) reads x only in its condition: its softmax has zero tangent."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Flat",
            "inputs": {"x": "tensor", "k": {"type": "float", "default": 0.5}},
            "outputs": {"y": "softmax(where(x > 0, k, 2 * k), dim=-1) + x"},
        }
    )
    flat = symgrad.load_module(spec).flat
    x = torch.randn(3, 4, dtype=torch.float64)
    tangent = torch.randn_like(x)
    _, mine = torch.func.jvp(flat, (x,), (tangent,))
    torch.testing.assert_close(mine, tangent)
