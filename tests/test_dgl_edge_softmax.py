"""DGL's EdgeSoftmax as a spec: the generated Function against DGL's own mathematics.

DGL (python/dgl/backend/pytorch/sparse.py, class EdgeSoftmax) normalises each edge's
score over the edges into the same destination: the largest score into each node
subtracted, exp, the sum into each node, a division. Its hand-written backward is
`sds - out * accum[dst]` with `sds = out * grad_out` and `accum` the sum of `sds` into
each node. Both are written here in plain torch, the graph's sparse kernels as
index_add and scatter_reduce by dst, and the generated Function must match them, with
gradcheck and gradgradcheck in float64 and its jvp.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from symgrad.api import load_module, load_spec

REPO_ROOT = Path(__file__).resolve().parent.parent

# Nine edges into six nodes: in-degrees 3, 2, 1 (node 2, one in-edge), 3, 0 and 0.
DST = torch.tensor([0, 3, 1, 0, 2, 3, 1, 0, 3])
NODES = 6


def _dst_max(score: torch.Tensor, dst: torch.Tensor, nodes: int) -> torch.Tensor:
    """DGL's gspmm(copy_rhs, max): the largest score into each node (0 with none)."""
    expanded = dst.unsqueeze(1).expand_as(score)
    zeros = score.new_zeros(nodes, *score.shape[1:])
    return zeros.scatter_reduce(0, expanded, score, "amax", include_self=False)


def _dst_sum(value: torch.Tensor, dst: torch.Tensor, nodes: int) -> torch.Tensor:
    """DGL's gspmm(copy_rhs, sum): the sum of the edges' values into each node."""
    return value.new_zeros(nodes, *value.shape[1:]).index_add(0, dst, value)


def _dgl_forward(score: torch.Tensor, dst: torch.Tensor, nodes: int) -> torch.Tensor:
    """EdgeSoftmax.forward: edge_sub_dst of the max, exp, dst sum, edge_div_dst."""
    score = torch.exp(score - _dst_max(score, dst, nodes)[dst])
    return score / _dst_sum(score, dst, nodes)[dst]


def _dgl_backward(
    out: torch.Tensor, grad_out: torch.Tensor, dst: torch.Tensor, nodes: int
) -> torch.Tensor:
    """EdgeSoftmax.backward: sds = out * grad_out; grad_score = sds - out * accum[dst]."""
    sds = out * grad_out
    accum = _dst_sum(sds, dst, nodes)
    return sds - out * accum[dst]


@pytest.fixture(scope="module")
def module() -> object:
    return load_module(load_spec(REPO_ROOT / "examples" / "edge_softmax.yaml"))


def _score(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(9, 2, generator=generator, dtype=torch.float64, requires_grad=True)


def test_edge_softmax_matches_dgl_forward_and_backward(module: object) -> None:
    score = _score(0)
    out = module.edge_softmax(score, DST, NODES)  # type: ignore[attr-defined]
    expected = _dgl_forward(score.detach(), DST, NODES)
    torch.testing.assert_close(out, expected)
    # Each node's in-edges sum to one; node 2's one in-edge has weight 1.
    sums = _dst_sum(out.detach(), DST, NODES)
    torch.testing.assert_close(sums[:4], torch.ones(4, 2, dtype=torch.float64))
    torch.testing.assert_close(out[4].detach(), torch.ones(2, dtype=torch.float64))
    grad_out = torch.randn(9, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (grad,) = torch.autograd.grad(out, score, grad_out)
    torch.testing.assert_close(grad, _dgl_backward(expected, grad_out, DST, NODES))
    assert not grad[4].any()  # a lone edge's weight is 1 whatever its score


def test_edge_softmax_is_shift_invariant_within_a_node_with_tied_maxima(module: object) -> None:
    """Tied largest scores into a node (the max's gradient shared) still give DGL's."""
    score = _score(2).detach()
    score[[0, 3, 7], 0] = 1.5  # the three edges into node 0 tie
    score.requires_grad_()
    out = module.edge_softmax(score, DST, NODES)  # type: ignore[attr-defined]
    grad_out = torch.randn(9, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (grad,) = torch.autograd.grad(out, score, grad_out)
    expected = _dgl_forward(score.detach(), DST, NODES)
    torch.testing.assert_close(grad, _dgl_backward(expected, grad_out, DST, NODES))


# torch.func.jvp loads torch's jvp decompositions through torch.jit.script once.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_edge_softmax_second_order_and_jvp(module: object) -> None:
    score = _score(4)
    apply = module.edge_softmax  # type: ignore[attr-defined]
    assert torch.autograd.gradcheck(apply, (score, DST, NODES))
    assert torch.autograd.gradgradcheck(apply, (score, DST, NODES))
    tangent = torch.randn(9, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    _, jvp = torch.func.jvp(lambda s: apply(s, DST, NODES), (score.detach(),), (tangent,))
    _, want = torch.func.jvp(lambda s: _dgl_forward(s, DST, NODES), (score.detach(),), (tangent,))
    torch.testing.assert_close(jvp, want)


def test_the_node_count_is_an_input(module: object) -> None:
    """Nodes past the largest dst (no in-edges) change nothing."""
    score = _score(6).detach()
    wider = module.edge_softmax(score, DST, 10)  # type: ignore[attr-defined]
    torch.testing.assert_close(wider, _dgl_forward(score, DST, 10))


def test_vmap_batches_the_edge_softmax(module: object) -> None:
    """A batch of score tensors over one graph: values and gradients per sample."""
    apply = module.edge_softmax  # type: ignore[attr-defined]
    scores = torch.randn(4, 9, 2, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    weights = torch.arange(18, dtype=torch.float64).view(9, 2)
    actual = torch.func.vmap(apply, in_dims=(0, None, None))(scores, DST, NODES)
    torch.testing.assert_close(actual, torch.stack([_dgl_forward(s, DST, NODES) for s in scores]))
    grads = torch.func.vmap(torch.func.grad(lambda s: (apply(s, DST, NODES) * weights).sum()))(
        scores
    )
    for score, grad in zip(scores, grads, strict=True):
        out = _dgl_forward(score, DST, NODES)
        torch.testing.assert_close(grad, _dgl_backward(out, weights, DST, NODES))
