"""Segment sums by an index: the generated Functions against the originals' mathematics.

GatherScatter is pytorch3d's (pytorch3d.ops.graph_conv): its reference forward
`gather_scatter_python` gathers each edge's features and scatter-adds them into the
other end, and its backward is the same operation with the ends swapped. The generated
Function must match both, with gradcheck and gradgradcheck in float64.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from symgrad.api import load_module, load_spec, spec_from_dict
from symgrad.errors import SpecError

REPO_ROOT = Path(__file__).resolve().parent.parent


def _gather_scatter(features: torch.Tensor, edges: torch.Tensor, backward: bool) -> torch.Tensor:
    """pytorch3d's gather_scatter_python, undirected; `backward` swaps the ends as its
    C++ kernel does for the gradient."""
    num_edges, feature_dim = edges.shape[0], features.shape[1]
    first, second = (1, 0) if backward else (0, 1)
    idx0 = edges[:, first].view(num_edges, 1).expand(num_edges, feature_dim)
    idx1 = edges[:, second].view(num_edges, 1).expand(num_edges, feature_dim)
    output = torch.zeros_like(features)
    output = output.scatter_add(0, idx0, features.gather(0, idx1))
    return output.scatter_add(0, idx1, features.gather(0, idx0))


def _graph(generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Nine edges between six vertices, a repeated edge and a self-loop among them."""
    edges = torch.randint(6, (9, 2), generator=generator)
    edges[3] = edges[2]
    edges[5, 1] = edges[5, 0]
    return edges, edges[:, 0], edges[:, 1]


def test_gather_scatter_matches_pytorch3d() -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "gather_scatter.yaml"))
    generator = torch.Generator().manual_seed(0)
    edges, start, end = _graph(generator)
    features = torch.randn(6, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    rows = (start.unsqueeze(1).expand(9, 4), end.unsqueeze(1).expand(9, 4))
    inputs = (features, start, end, *rows)
    output = module.gather_scatter(*inputs)
    torch.testing.assert_close(output, _gather_scatter(features.detach(), edges, False))
    grad_output = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    (grad,) = torch.autograd.grad(output, features, grad_output)
    torch.testing.assert_close(grad, _gather_scatter(grad_output, edges, True))
    assert torch.autograd.gradcheck(module.GatherScatter.apply, inputs)
    assert torch.autograd.gradgradcheck(module.GatherScatter.apply, inputs)


def _segment_spec(output: str, **inputs: object) -> dict[str, object]:
    """A spec of one output over x [5, 3] and a 1-d index of five positions."""
    return {
        "name": "Segments",
        "inputs": {
            "x": {"type": "tensor", "shape": [5, 3]},
            "index": {"type": "index", "shape": [5]},
            **inputs,
        },
        "outputs": {"y": output},
    }


# torch.func.jvp loads torch's jvp decompositions through torch.jit.script once.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize(
    "output",
    [
        "segment_sum(sin(x) * x, index, 0, 4)",
        "segment_sum(x**2, index, dim=0, size=n) * 2",
        "sum(segment_sum(exp(x), index, 0, 3) ** 2, dim=1)",
    ],
)
def test_segment_sums_against_autograd(output: str) -> None:
    spec = spec_from_dict(_segment_spec(output, n={"type": "int", "default": 4}))
    module = load_module(spec)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(5, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 2, 0, 1, 2])
    args = (x, index, 4) if "size=n" in output else (x, index)
    assert torch.autograd.gradcheck(module.Segments.apply, args)
    assert torch.autograd.gradgradcheck(module.Segments.apply, args)
    tangent = torch.randn(5, 3, generator=generator, dtype=torch.float64)
    _, jvp = torch.func.jvp(lambda v: module.segments(v, *args[1:]), (x.detach(),), (tangent,))
    # The reverse mode twice (J^T u, then d<J^T u, t>/du) gives the same J t.
    value = module.Segments.apply(x, *args[1:])
    probe = torch.zeros_like(value, requires_grad=True)
    (pulled,) = torch.autograd.grad(value, x, probe, create_graph=True)
    (want,) = torch.autograd.grad(pulled, probe, tangent)
    torch.testing.assert_close(jvp, want)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("segment_sum(x, index, 1, 4)", "index 'index' must have shape [3]"),
        ("segment_sum(x, index, 0, 0)", "size must be a positive integer"),
        ("segment_sum(x, index, 2, 4)", "dim 2 is out of range"),
        ("segment_sum(x, x, 0, 4)", "the index must be an input of type: index"),
        ("segment_sum(x, index, 0)", "segment_sum() needs size"),
    ],
)
def test_segment_sum_misuses_are_refused(output: str, message: str) -> None:
    with pytest.raises(
        SpecError,
        match=message.replace("(", r"\(")
        .replace(")", r"\)")
        .replace("[", r"\[")
        .replace("]", r"\]"),
    ):
        spec_from_dict(_segment_spec(output))
