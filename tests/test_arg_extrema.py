"""argmax/argmin as indices, and max/min values along a dim (Note [Arg extrema]).

The values and gradients of `max(x, dim=d)` are checked against torch.max's own, ties
included (the gradient goes to the first index only, unlike amax's); computed indices
feed gather and segment_sum; the backward reads the forward's int64 positions.
"""

from __future__ import annotations

import re

import pytest
import torch

from symgrad.ad.saving import eager_saved_elements
from symgrad.api import derive, load_module, spec_from_dict
from symgrad.errors import SpecError


def _spec(output: str, where: dict[str, str] | None = None) -> dict[str, object]:
    """A spec of one output over x [4, 3] and w [4, 3]."""
    return {
        "name": "Picked",
        "inputs": {
            "x": {"type": "tensor", "shape": [4, 3]},
            "w": {"type": "tensor", "shape": [4, 3]},
        },
        "where": where or {},
        "outputs": {"y": output},
    }


def _tied(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """x and w in float64 with ties in every row and column of x."""
    x = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    x[:, 2] = x[:, 0]
    x[3] = x[1]
    w = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    return x.requires_grad_(), w.requires_grad_()


@pytest.mark.parametrize(
    ("output", "reference"),
    [
        ("max(x * w, dim=1)", lambda x, w: torch.max(x * w, 1).values),
        ("min(x * w, dim=0) * 2", lambda x, w: torch.min(x * w, 0).values * 2),
        ("max(x, dim=-1, keepdim=True) * w", lambda x, w: torch.max(x, -1, True).values * w),
        ("min(sin(x), dim=1) ** 2", lambda x, w: torch.min(torch.sin(x), 1).values ** 2),
    ],
)
def test_values_along_a_dim_match_torch(output: str, reference: object) -> None:
    """Values, first and second order gradients, ties going to torch's one index."""
    module = load_module(spec_from_dict(_spec(output)))
    x, w = _tied(torch.Generator().manual_seed(0))
    got, want = module.picked(x, w), reference(x, w)  # type: ignore[operator]
    torch.testing.assert_close(got, want)
    wrt = (x, w) if "w" in output else (x,)
    probe = torch.randn_like(want)
    grads = torch.autograd.grad(got, wrt, probe, create_graph=True)
    wants = torch.autograd.grad(want, wrt, probe, create_graph=True)
    for grad, expected in zip(grads, wants, strict=True):
        torch.testing.assert_close(grad, expected)
    second = torch.autograd.grad(sum((g**3).sum() for g in grads), wrt)
    expected_second = torch.autograd.grad(sum((g**3).sum() for g in wants), wrt)
    for grad, expected in zip(second, expected_second, strict=True):
        torch.testing.assert_close(grad, expected)


@pytest.mark.parametrize(
    ("output", "where", "reference"),
    [
        (
            "gather(w, 1, argmax(x, 1, keepdim=True))",
            {},
            lambda x, w: w.gather(1, x.argmax(1, keepdim=True)),
        ),
        (
            "take_along_dim(w * x, k, 0)",
            {"k": "argmin(x, 0, keepdim=True)"},
            lambda x, w: torch.take_along_dim(w * x, x.argmin(0, keepdim=True), 0),
        ),
        (
            "index_select(w * x, 1, k) * 2",
            {"k": "argmax(x, dim=0)"},
            lambda x, w: torch.index_select(w * x, 1, x.argmax(0)) * 2,
        ),
        (
            "segment_sum(exp(w), k, 0, 3)",
            {"k": "argmax(x, dim=1)"},
            lambda x, w: torch.zeros(3, 3, dtype=w.dtype).index_add(0, x.argmax(1), w.exp()),
        ),
    ],
)
def test_computed_indices_match_torch(
    output: str, where: dict[str, str], reference: object
) -> None:
    """argmax/argmin positions, in the call or by a where name, read by index readers."""
    module = load_module(spec_from_dict(_spec(output, where)))
    x, w = _tied(torch.Generator().manual_seed(1))
    got, want = module.picked(x, w), reference(x, w)  # type: ignore[operator]
    torch.testing.assert_close(got, want)
    probe = torch.randn_like(want)
    (grad,) = torch.autograd.grad(got, (w,), probe)
    torch.testing.assert_close(grad, torch.autograd.grad(want, (w,), probe)[0])
    # Away from ties, where finite differences do not cross one.
    generator = torch.Generator().manual_seed(5)
    untied = [torch.randn(4, 3, generator=generator, dtype=torch.float64) for _ in "xw"]
    assert torch.autograd.gradgradcheck(module.picked, [t.requires_grad_() for t in untied])


def test_the_backward_reads_the_saved_int64_positions() -> None:
    """The forward computes the index once and returns it to save, int64; no float
    value it came from is saved for the backward."""
    spec = spec_from_dict(_spec("segment_sum(w, k, 0, 3)", {"k": "argmin(x * w, 1)"}))
    derived = derive(spec)
    extra = [o.name for o in derived.residuals + derived.saved_values]
    assert extra == ["k"]
    assert not [o for o in derived.residuals if o.differentiable]
    module = load_module(spec)
    x, w = _tied(torch.Generator().manual_seed(2))
    outputs = module.Picked.forward(x, w)
    assert outputs[1].dtype == torch.int64
    torch.testing.assert_close(outputs[1], (x * w).argmin(1))


def test_max_of_two_values_stays_elementwise() -> None:
    """`max(a, b)` and `max(x, 0)` are elementwise; only `dim=` reduces."""
    module = load_module(spec_from_dict(_spec("max(x, 0) + min(x, w)")))
    x, w = _tied(torch.Generator().manual_seed(3))
    want = torch.clamp(x, min=0) + torch.minimum(x, w)
    torch.testing.assert_close(module.picked(x, w), want)


@pytest.mark.parametrize(
    ("output", "where", "message"),
    [
        ("gather(x, 1, w)", {}, "the index must be an input of type: index, argmax/argmin"),
        ("gather(x, 1, sin(w))", {}, "not a float value"),
        ("segment_sum(x, k * 2, 0, 3)", {"k": "argmax(x, 1)"}, "not arithmetic on positions"),
        ("gather(x, 1, argmax(x, 1))", {}, "has 1 dimensions, but the value it indexes has 2"),
        ("segment_sum(x, argmax(x, 0), 0, 3)", {}, "must have shape [4]"),
        ("argmax(x, 1) + x", {}, "argmax() gives positions: use it as the index"),
        ("argmin(x, 1)", {}, "argmin() gives positions"),
        ("max(x, dim=1.5)", {}, "dim must be an integer"),
        ("argmin(x)", {}, "argmin() needs dim"),
    ],
)
def test_misuses_are_refused(output: str, where: dict[str, str], message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        spec_from_dict(_spec(output, where))


def test_eager_saves_the_positions_not_the_values_argmax_reads() -> None:
    """torch.argmax saves nothing; the gather reading it saves the positions (reduced, so
    counted as small), and the product x * w its factors (12 each), not the product."""
    assert eager_saved_elements(spec_from_dict(_spec("max(x * w, dim=1)"))) == 24
