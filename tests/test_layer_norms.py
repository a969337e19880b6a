"""layer_norm: torch's native_layer_norm forward, xhat and rstd read backward, and the
layer norm written out recognised as it (Note [Layer norm])."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
import torch.nn.functional as nnf
from torch.autograd import forward_ad

from symgrad import api
from symgrad.ad.derive import derive
from symgrad.language import layer_norms

# torch's kernel over the last dim, without weight and bias (black may break the line).
_KERNEL = "torch.native_layer_norm("
_OPERANDS = "x, x.shape[-1:], None, None, eps"
# The mean and the variance of the written forms, over the last dim, kept.
_MEAN = {"mu": "mean(x, dim=-1, keepdim=True)", "xc": "x - mu"}
_VAR = "mean(xc**2, dim=-1, keepdim=True)"


def _spec(outputs: dict[str, str], where: dict[str, str] | None = None) -> dict[str, Any]:
    """A spec of x [3, 8], a per-channel w and b, and a float eps."""
    return {
        "name": "Norm",
        "inputs": {
            "x": {"type": "tensor", "shape": [3, 8]},
            "w": {"type": "tensor", "shape": [8]},
            "b": {"type": "tensor", "shape": [8]},
            "eps": {"type": "float", "default": 1e-5},
        },
        "where": where or {},
        "outputs": outputs,
    }


def _inputs() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    x = torch.randn(3, 8, dtype=torch.float64) * 2 + 1
    w = torch.rand(8, dtype=torch.float64) + 0.5
    b = torch.randn(8, dtype=torch.float64)
    return tuple(t.requires_grad_() for t in (x, w, b))


@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_call_is_torchs_and_its_derivatives_are_exact(affine: bool) -> None:
    """Values and gradients are F.layer_norm's; first and second order pass gradcheck."""
    y = "layer_norm(x, eps) * w + b" if affine else "layer_norm(x, eps)"
    module = api.load_module(api.spec_from_dict(_spec({"y": y})))
    assert _KERNEL in inspect.getsource(module) and _OPERANDS in inspect.getsource(module)
    # One kernel call gives the forward both xhat and the rstd it saves.
    assert inspect.getsource(module.Norm.forward).count("native_layer_norm") == 1
    x, w, b = _inputs()
    got = module.norm(x, w, b, 1e-3)
    expected = nnf.layer_norm(x, [8], w if affine else None, b if affine else None, 1e-3)
    torch.testing.assert_close(got, expected)
    weights = torch.randn(3, 8, dtype=torch.float64)
    grads = torch.autograd.grad((got * weights).sum(), (x, w, b), allow_unused=True)
    want = torch.autograd.grad((expected * weights).sum(), (x, w, b), allow_unused=True)
    for g, e in zip(grads, want, strict=True):
        assert (g is None) == (e is None)
        if g is not None:
            torch.testing.assert_close(g, e)

    def function(*tensors: torch.Tensor) -> torch.Tensor:
        return module.norm(*tensors, 1e-3)

    assert torch.autograd.gradcheck(function, (x, w, b))
    assert torch.autograd.gradgradcheck(function, (x, w, b))


# Forward AD loads decompositions with torch.jit.script, which warns in torch 2.11+.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_layer_norm_jvp_is_autograds() -> None:
    """Forward mode: the tangent of xhat and of the affine output, against torch's."""
    module = api.load_module(api.spec_from_dict(_spec({"y": "layer_norm(x, eps) * w + b"})))
    x, w, b = (t.detach() for t in _inputs())
    tangents = tuple(torch.randn_like(t) for t in (x, w, b))
    results = []
    for function in (module.norm, lambda x, w, b, eps: nnf.layer_norm(x, [8], w, b, eps)):
        with forward_ad.dual_level():
            duals = [forward_ad.make_dual(t, d) for t, d in zip((x, w, b), tangents, strict=True)]
            results.append(forward_ad.unpack_dual(function(*duals, 1e-3)).tangent)
    torch.testing.assert_close(results[0], results[1])


def test_the_backward_saves_xhat_and_rstd_not_x() -> None:
    """The no-affine layer norm saves its output and the per-row rstd: eager's bytes."""
    derived = derive(api.spec_from_dict(_spec({"y": "layer_norm(x, eps)"})))
    assert sorted(str(s) for s in derived.saved_tensors) == ["layer_norm_rstd0", "y"]


_WRITTEN = {
    "rstd named": (
        {**_MEAN, "rstd": f"1 / sqrt({_VAR} + eps)"},
        "xc * rstd * w + b",
    ),
    "divided by sqrt": ({**_MEAN, "var": _VAR}, "xc / sqrt(var + eps) * w + b"),
    "rsqrt": ({**_MEAN}, f"xc * rsqrt({_VAR} + eps)"),
    "power -0.5": ({**_MEAN}, f"(x - mu) * ({_VAR} + eps) ** -0.5"),
    "inline": (
        {},
        "(x - mean(x, -1, True)) / sqrt(mean((x - mean(x, -1, True))**2, -1, True) + eps)",
    ),
    "no eps": ({**_MEAN, "var": _VAR}, "xc / sqrt(var)"),
}

_NEAR_MISSES = {
    "dim 0": (
        {"mu": "mean(x, dim=0, keepdim=True)", "xc": "x - mu"},
        "xc / sqrt(mean(xc**2, dim=0, keepdim=True) + eps)",
    ),
    "mean without keepdim": (
        {"mu": "mean(x, dim=-1)", "xc": "x - unsqueeze(mu, -1)"},
        "xc / sqrt(mean(xc**2, dim=-1, keepdim=True) + eps)",
    ),
    "variance without keepdim": (
        {**_MEAN},
        "xc / unsqueeze(sqrt(mean(xc**2, dim=-1) + eps), -1)",
    ),
    "variance of another value": (
        {**_MEAN, "var": "mean((w * xc)**2, dim=-1, keepdim=True)"},
        "xc / sqrt(var + eps)",
    ),
    "centred by another mean": (
        {**_MEAN, "var": _VAR},
        "(x - mean(w * x, dim=-1, keepdim=True)) / sqrt(var + eps)",
    ),
    "an eps that is a tensor": ({**_MEAN, "var": _VAR}, "xc / sqrt(var + b)"),
    "eps outside the square root": ({**_MEAN, "var": _VAR}, "xc / (sqrt(var) + eps)"),
    "a shifted centred value": (
        {**_MEAN, "var": _VAR, "r": "rsqrt(var + eps)"},
        "(xc + eps) * r",
    ),
}


def _forward_nodes(where: dict[str, str], y: str) -> set[type]:
    derived = derive(api.spec_from_dict(_spec({"y": y}, where)))
    return {type(n) for a in derived.forward for n in a.expr.atoms(*layer_norms.NODES)}


@pytest.mark.parametrize("case", sorted(_WRITTEN))
def test_the_layer_norm_written_out_is_recognised(case: str) -> None:
    """Each spelling becomes layer_norm (xhat reading its rstd), values unchanged."""
    where, y = _WRITTEN[case]
    assert _forward_nodes(where, y) == {layer_norms.LayerNorm, layer_norms.LayerNormRstd}
    module = api.load_module(api.spec_from_dict(_spec({"y": y}, where)))
    assert _KERNEL in inspect.getsource(module)
    x, w, b = _inputs()
    eps = 0.0 if case == "no eps" else 1e-3
    got = module.norm(x, w, b, eps)
    affine = "w + b" in y
    expected = nnf.layer_norm(x, [8], w if affine else None, b if affine else None, eps)
    torch.testing.assert_close(got, expected)
    torch.autograd.gradcheck(lambda *t: module.norm(*t, eps), (x, w, b))


@pytest.mark.parametrize("case", sorted(_NEAR_MISSES))
def test_near_misses_stay_as_written(case: str) -> None:
    """Another dim, a reduction without keepdim, another value or a tensor eps: no
    layer norm (a variance of x alone may still be its rstd)."""
    where, y = _NEAR_MISSES[case]
    assert layer_norms.LayerNorm not in _forward_nodes(where, y)


def test_the_rstd_alone_is_the_kernels_and_differentiates_exactly() -> None:
    """An rstd used without xc (here times x) is the kernel's, its derivative reading xhat."""
    where = {**_MEAN, "rstd": f"rsqrt({_VAR} + eps)"}
    module = api.load_module(api.spec_from_dict(_spec({"y": "x * rstd"}, where)))
    x, w, b = _inputs()
    got = module.norm(x, w, b, 1e-3)
    expected = x / torch.sqrt(x.var(-1, correction=0, keepdim=True) + 1e-3)
    torch.testing.assert_close(got, expected)
    assert torch.autograd.gradgradcheck(lambda x: module.norm(x, w, b, 1e-3), (x,))
