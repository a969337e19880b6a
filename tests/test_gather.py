"""Index inputs and gather: the generated Functions against the originals' mathematics.

ReverseSort is Reformer's (transformers, LSH self-attention): its hand-written backward
gathers the gradient with the forward sort indices, which for a permutation is what the
generated scatter_add computes. The other specs check gathers of expressions against
torch's autograd of the same formula, and gradcheck and gradgradcheck in float64.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from symgrad.api import generate, load_module, load_spec, spec_from_dict
from symgrad.frontend import indices

REPO_ROOT = Path(__file__).resolve().parent.parent


def _reformer_reverse_sort(
    out_vectors: torch.Tensor,
    logits: torch.Tensor,
    sorted_bucket_idx: torch.Tensor,
    undo_sorted_bucket_idx: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' ReverseSort, forward and backward as Reformer writes them."""

    class ReverseSort(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, vectors: torch.Tensor, logits_: torch.Tensor) -> Any:
            expanded = undo_sorted_bucket_idx.unsqueeze(-1).expand(vectors.shape)
            return torch.gather(vectors, 2, expanded), torch.gather(
                logits_, 2, undo_sorted_bucket_idx
            )

        @staticmethod
        def backward(ctx: Any, grad_vectors: torch.Tensor, grad_logits: torch.Tensor) -> Any:
            expanded = sorted_bucket_idx.unsqueeze(-1).expand(grad_vectors.shape)
            return torch.gather(grad_vectors, 2, expanded), torch.gather(
                grad_logits, 2, sorted_bucket_idx
            )

    result: tuple[torch.Tensor, torch.Tensor] = ReverseSort.apply(out_vectors, logits)
    return result


def _permutations(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort indices along dim 2 of [2, 3, 8] and their inverse, as Reformer has them."""
    keys = torch.rand(2, 3, 8, generator=generator)
    sorted_idx = keys.argsort(dim=-1)
    return sorted_idx, sorted_idx.argsort(dim=-1)


def test_reverse_sort_matches_reformers_backward() -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "reverse_sort.yaml"))
    generator = torch.Generator().manual_seed(0)
    sorted_idx, undo = _permutations(generator)
    vectors = torch.randn(2, 3, 8, 4, generator=generator, dtype=torch.float64)
    logits = torch.randn(2, 3, 8, generator=generator, dtype=torch.float64)
    ours = (vectors.clone().requires_grad_(), logits.clone().requires_grad_())
    theirs = (vectors.clone().requires_grad_(), logits.clone().requires_grad_())
    undo_vectors = undo.unsqueeze(-1).expand(2, 3, 8, 4)
    actual = module.reverse_sort(*ours, undo_vectors, undo)
    expected = _reformer_reverse_sort(*theirs, sorted_idx, undo)
    cotangents = [torch.randn(o.shape, generator=generator, dtype=torch.float64) for o in actual]
    for value, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(value, want)
    grads = torch.autograd.grad(actual, ours, cotangents)
    wants = torch.autograd.grad(expected, theirs, cotangents)
    for grad, want in zip(grads, wants, strict=True):
        torch.testing.assert_close(grad, want)
    assert torch.autograd.gradcheck(module.ReverseSort.apply, (*ours, undo_vectors, undo))
    assert torch.autograd.gradgradcheck(module.ReverseSort.apply, (*ours, undo_vectors, undo))


# An entmax-style threshold: values read at positions and compared with a threshold read
# at the same ones; the index repeats positions in a row, so the adjoint must add them,
# not overwrite.
THRESHOLD = {
    "name": "GatheredThreshold",
    "inputs": {
        "z": {"type": "tensor", "shape": [4, 6]},
        "w": {"type": "tensor", "shape": [6]},
        "k": {"type": "index", "shape": [4, 3]},
    },
    "where": {"tau": "take_along_dim(exp(z) * w, k, dim=1)"},
    "outputs": {"y": "softplus(gather(z, 1, k) - tau) * gather(z * z, 1, k)"},
}


def _threshold_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    z = torch.randn(4, 6, generator=generator, dtype=torch.float64).requires_grad_()
    w = torch.rand(6, generator=generator, dtype=torch.float64).requires_grad_()
    k = torch.tensor([[0, 0, 1], [5, 1, 5], [5, 5, 5], [2, 3, 2]])
    return z, w, k


def _threshold_reference(z: torch.Tensor, w: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    tau = torch.take_along_dim(torch.exp(z) * w, k, dim=1)
    gathered = torch.gather(z, 1, k)
    return torch.nn.functional.softplus(gathered - tau) * torch.gather(z * z, 1, k)


def test_gather_of_expressions_matches_autograd() -> None:
    module = load_module(spec_from_dict(THRESHOLD))
    z, w, k = _threshold_inputs()
    actual = module.gathered_threshold(z, w, k)
    expected = _threshold_reference(z, w, k)
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn(actual.shape, dtype=torch.float64)
    grads = torch.autograd.grad(actual, (z, w), cotangent)
    wants = torch.autograd.grad(expected, (z, w), cotangent)
    for grad, want in zip(grads, wants, strict=True):
        torch.testing.assert_close(grad, want)
    assert torch.autograd.gradcheck(module.GatheredThreshold.apply, (z, w, k))
    assert torch.autograd.gradgradcheck(module.GatheredThreshold.apply, (z, w, k))


# Forward AD loads decompositions with torch.jit.script, which warns in torch 2.11+.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_gather_of_expressions_jvp_matches_autograd() -> None:
    module = load_module(spec_from_dict(THRESHOLD))
    z, w, k = (t.detach() for t in _threshold_inputs())
    tangents = (
        torch.randn(z.shape, dtype=torch.float64),
        torch.randn(w.shape, dtype=torch.float64),
    )
    _, actual = torch.func.jvp(lambda a, b: module.gathered_threshold(a, b, k), (z, w), tangents)
    _, expected = torch.func.jvp(lambda a, b: _threshold_reference(a, b, k), (z, w), tangents)
    torch.testing.assert_close(actual, expected)


def test_the_adjoint_is_torchs_scatter_add_without_one_hot() -> None:
    source = generate(spec_from_dict(THRESHOLD))["gathered_threshold.py"]
    assert ".scatter_add(1, k, " in source
    function = source[
        source.index("class GatheredThreshold(") : source.index("# Function.apply binds")
    ]
    assert "one_hot" not in function
    assert not any(line.lstrip().startswith("for ") for line in function.splitlines())


def test_the_generated_test_samples_indices_below_the_gathered_size() -> None:
    spec = spec_from_dict(
        {
            "name": "Rows",
            "inputs": {
                "table": {"type": "tensor", "shape": [3, 5]},
                "rows": {"type": "index", "shape": [7, 5]},
            },
            "outputs": {"y": "gather(table, 0, rows)"},
        }
    )
    assert indices.index_bounds(spec) == {"rows": 3}
    test_source = generate(spec)["test_rows.py"]
    assert '"rows": torch.randint(3, (7, 5), generator=generator).to(device)' in test_source


def test_an_index_gets_no_gradient() -> None:
    module = load_module(spec_from_dict(THRESHOLD))
    z, w, k = _threshold_inputs()
    outputs = _as_tuple(module.GatheredThreshold.apply(z, w, k))
    assert outputs[0].grad_fn is not None
    grads = outputs[0].grad_fn.apply(*(torch.ones_like(o) for o in outputs))
    assert grads[0] is not None and grads[2] is None


def _as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)


@pytest.mark.parametrize("spelling", ["gather(x, 1, i)", "take_along_dim(x, i, 1)"])
def test_both_spellings_build_the_same_gather(spelling: str) -> None:
    data = {
        "name": "G",
        "inputs": {"x": "tensor", "i": {"type": "index", "shape": [3, 2]}},
        "outputs": {"y": spelling},
    }
    assert (
        spec_from_dict(data).outputs[0].expr
        == spec_from_dict({**data, "outputs": {"y": "gather(x, dim=1, index=i)"}}).outputs[0].expr
    )


def test_show_writes_the_index_of_a_gather() -> None:
    from symgrad.present.show import describe

    text = describe(load_spec(REPO_ROOT / "examples" / "reverse_sort.yaml"))
    assert "vectors = gather(out_vectors, dim=2, index=undo_vectors)" in text


def test_a_gather_in_a_guarded_branch_reads_its_argument_unguarded() -> None:
    """The condition at position i is x[i]'s, the gather's value there x[k[i]]'s: the
    guard of the untaken branch treats the gather as a whole (Note [Untaken branches] in
    symgrad.ad.guards), or x[1] < 0 loses the gradient of y[0] = sqrt(x[1] + 2)."""
    spec = {
        "name": "GuardedGather",
        "inputs": {"x": {"type": "tensor", "shape": [3]}, "k": {"type": "index", "shape": [3]}},
        "outputs": {"y": "where(x > 0, gather(sqrt(x + 2), 0, k), 0)"},
    }
    module = load_module(spec_from_dict(spec))
    x = torch.tensor([0.8, -1.2, 0.5], dtype=torch.float64, requires_grad=True)
    k = torch.tensor([1, 2, 0])
    y = module.guarded_gather(x, k)
    expected = torch.where(x > 0, torch.gather(torch.sqrt(x + 2), 0, k), 0)
    torch.testing.assert_close(y, expected)
    grad = torch.tensor([0.3, -0.7, 1.1], dtype=torch.float64)
    torch.testing.assert_close(
        torch.autograd.grad(y, x, grad), torch.autograd.grad(expected, x, grad)
    )


PICK = {
    "name": "PickTarget",
    "inputs": {
        "x": {"type": "tensor", "shape": [4, 10]},
        "target": {"type": "index", "shape": [4]},
        "ignore_index": {"type": "int", "default": -100},
    },
    "outputs": {
        "y": "sum(gather(x, -1, unsqueeze(where(target != ignore_index, target, 0), -1)), "
        "dim=-1) * where(target != ignore_index, 1, 0)"
    },
}


def test_a_gather_of_a_view_of_a_safe_target_picks_the_target_logit() -> None:
    module = load_module(spec_from_dict(PICK))
    x = torch.randn(4, 10, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([3, -100, 9, 0])
    actual = module.pick_target(x, target)
    safe = torch.where(target != -100, target, 0).unsqueeze(-1)
    expected = torch.gather(x, -1, safe).sum(-1) * (target != -100)
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn(4, dtype=torch.float64)
    grad = torch.autograd.grad(actual, x, cotangent)[0]
    torch.testing.assert_close(grad, torch.autograd.grad(expected, x, cotangent)[0])
    apply = lambda a: module.PickTarget.apply(a, target, -100)  # noqa: E731
    assert torch.autograd.gradcheck(apply, (x,))
    assert torch.autograd.gradgradcheck(apply, (x,))


def test_a_gather_of_a_view_of_an_index_reads_one_position_per_row() -> None:
    spec = spec_from_dict(PICK)
    assert indices.index_bounds(spec) == {"target": 10}
    source = "".join(generate(spec)["pick_target.py"].split())  # as black wraps it
    assert "torch.gather(x,-1,torch.where(_t0,target,0).unsqueeze(-1))" in source
    assert ".scatter_add(-1,torch.where(_t0,target,0).unsqueeze(-1)," in source
    assert "broadcast_tensors" not in source  # the gather keeps its index's shape


@pytest.mark.parametrize(
    ("index", "reference"),
    [
        ("reshape(rows, [4, 1])", lambda x, r: torch.gather(x, 1, r.reshape(4, 1))),
        ("view(rows, [4, 1])", lambda x, r: torch.gather(x, 1, r.view(4, 1))),
        (
            "unsqueeze(argmax(x, -1), -1)",
            lambda x, r: torch.gather(x, 1, x.argmax(-1).unsqueeze(-1)),
        ),
    ],
)
def test_views_of_indices_are_indices(index: str, reference: Any) -> None:
    spec = spec_from_dict(
        {
            "name": "Viewed",
            "inputs": {
                "x": {"type": "tensor", "shape": [4, 6]},
                "rows": {"type": "index", "shape": [4]},
            },
            "outputs": {"y": f"exp(gather(x, 1, {index}))"},
        }
    )
    module = load_module(spec)
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    rows = torch.tensor([5, 0, 2, 2])
    actual = module.viewed(x, rows)
    expected = torch.exp(reference(x, rows))
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn(actual.shape, dtype=torch.float64)
    grad = torch.autograd.grad(actual, x, cotangent)[0]
    torch.testing.assert_close(grad, torch.autograd.grad(expected, x, cotangent)[0])
