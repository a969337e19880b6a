"""Class targets: index inputs compared, as conditions, and class losses against their originals.

LigerCrossEntropy is Liger-Kernel's LigerCrossEntropyFunction (liger_kernel.ops.cross_entropy):
its Triton kernel computes, per row not ignored, the loss and the gradient of the logits
written out below in plain torch (`_liger`), and divides both by the number of rows not
ignored. With lse_square_scale 0 it is functional.cross_entropy with ignore_index and
label_smoothing, mean reduction. SigmoidFocalLoss is mmcv's SigmoidFocalLossFunction
(mmcv.ops.focal_loss): `_mmcv_focal` transcribes its CUDA kernels' forward and backward;
with unit weights the forward is torchvision.ops.sigmoid_focal_loss's of one-hot targets.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch.nn import functional

from symgrad.api import generate, load_module, load_spec, spec_from_dict
from symgrad.errors import SpecError

REPO_ROOT = Path(__file__).resolve().parent.parent


def _liger(
    x: torch.Tensor, target: torch.Tensor, ignore: int, smoothing: float, z_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Liger's cross-entropy kernel, forward loss and gradient of the logits, in torch."""
    classes = x.shape[1]
    valid = target != ignore
    count = valid.sum()
    lse = torch.logsumexp(x, dim=-1)
    picked = x.gather(1, target.clamp(0, classes - 1).unsqueeze(1)).squeeze(1)
    eps = smoothing / classes
    loss = lse - picked
    loss = loss * (1 - smoothing) + (-eps * x.sum(-1) + smoothing * lse)
    loss = loss + z_scale * lse**2
    loss = torch.where(valid, loss, 0).sum() / count
    # dx = (softmax * (1 + 2 z lse) - eps - (1 - smoothing) one_hot) / count, 0 if ignored
    softmax = torch.softmax(x, dim=-1)
    grad = softmax * (1 + 2 * z_scale * lse).unsqueeze(1) - eps
    one_hot = functional.one_hot(target.clamp(0, classes - 1), classes).to(x.dtype)
    grad = grad - (1 - smoothing) * one_hot
    grad = torch.where(valid.unsqueeze(1), grad, 0) / count
    return loss, grad


def _targets(generator: torch.Generator) -> torch.Tensor:
    """Four class targets of ten classes, the second one ignored."""
    target = torch.randint(10, (4,), generator=generator)
    target[1] = -100
    return target


@pytest.mark.parametrize("smoothing, z_scale", [(0.0, 0.0), (0.1, 0.0), (0.1, 0.01), (0.0, 1e-4)])
def test_liger_cross_entropy_matches_liger(smoothing: float, z_scale: float) -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "liger_cross_entropy.yaml"))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 10, generator=generator, dtype=torch.float64, requires_grad=True)
    target = _targets(generator)
    inputs = (x, target, -100, smoothing, z_scale)
    loss = module.liger_cross_entropy(*inputs)
    expected, expected_grad = _liger(x.detach(), target, -100, smoothing, z_scale)
    torch.testing.assert_close(loss, expected)
    (grad,) = torch.autograd.grad(loss, x)
    torch.testing.assert_close(grad, expected_grad)
    if z_scale == 0:
        reference = functional.cross_entropy(
            x, target, ignore_index=-100, label_smoothing=smoothing
        )
        torch.testing.assert_close(loss, reference)
        torch.testing.assert_close(grad, torch.autograd.grad(reference, x)[0])
    assert torch.autograd.gradcheck(module.LigerCrossEntropy.apply, inputs)
    assert torch.autograd.gradgradcheck(module.LigerCrossEntropy.apply, inputs)


def test_liger_cross_entropy_of_no_valid_row_is_nan_as_torch() -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "liger_cross_entropy.yaml"))
    x = torch.randn(4, 10, dtype=torch.float64, requires_grad=True)
    target = torch.full((4,), -100)
    loss = module.liger_cross_entropy(x, target, -100, 0.0, 0.0)
    assert math.isnan(loss.item())
    assert math.isnan(functional.cross_entropy(x, target).item())


def _class_spec(output: str) -> dict[str, object]:
    """A spec of one output over logits x [4, 5] and a class target [4]."""
    return {
        "name": "Classes",
        "inputs": {
            "x": {"type": "tensor", "shape": [4, 5]},
            "target": {"type": "index", "shape": [4]},
        },
        "outputs": {"y": output},
    }


# gradcheck's forward AD loads torch's jvp decompositions through torch.jit.script once.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_count_of_valid_rows_is_an_int_recomputed_not_returned() -> None:
    """The count reads the target only: returned for the backward, it would be an int
    output whose tangent torch refuses (and gradcheck's forward AD trips on)."""
    output = "sum(where(target != 2, sum(x, dim=-1), 0)) / sum(where(target != 2, 1, 0))"
    module = load_module(spec_from_dict(_class_spec(output)))
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2, 4, 1])
    expected = x.detach()[[0, 2, 3]].sum() / 3
    torch.testing.assert_close(module.classes(x, target), expected)
    assert torch.autograd.gradcheck(module.Classes.apply, (x, target), check_forward_ad=True)


def test_a_row_sum_beside_a_row_condition_is_guarded_in_its_own_shape() -> None:
    """where(target != 2, logsumexp(x, -1), 0): the condition is per row, the branch's
    reduction reads whole rows; its guard must not broadcast the condition against x."""
    module = load_module(
        spec_from_dict(_class_spec("sum(where(target != 2, logsumexp(x, dim=-1), 0))"))
    )
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2, 4, 1])
    expected = torch.logsumexp(x.detach(), -1)[[0, 2, 3]].sum()
    torch.testing.assert_close(module.classes(x, target), expected)
    assert torch.autograd.gradcheck(module.Classes.apply, (x, target))


def test_the_one_hot_condition_picks_the_target_logit() -> None:
    output = "sum(where(position(x, -1) == unsqueeze(target, -1), x, 0), dim=-1)"
    module = load_module(spec_from_dict(_class_spec(output)))
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2, 4, 1])
    torch.testing.assert_close(
        module.classes(x, target), x.detach().gather(1, target[:, None])[:, 0]
    )
    assert torch.autograd.gradcheck(module.Classes.apply, (x, target))
    assert torch.autograd.gradgradcheck(module.Classes.apply, (x, target))


def test_the_one_hot_condition_is_exact_past_bfloat16s_integers() -> None:
    """Positions compared with a class index are int64: in x's bfloat16, arange rounds
    257 to 256, and the mask picked two classes or none."""
    output = "sum(where(position(x, -1) == unsqueeze(target, -1), x, 0), dim=-1)"
    module = load_module(spec_from_dict(_class_spec(output)))
    x = torch.randn(3, 300).to(torch.bfloat16)
    target = torch.tensor([257, 299, 3])
    torch.testing.assert_close(module.classes(x, target), x.gather(1, target[:, None])[:, 0])


_SAFE_PICK = "sum(gather(x, -1, unsqueeze(where(target != -100, target, 0), -1)), dim=-1)"


def test_a_gather_of_a_safe_unsqueezed_target_picks_the_target_logit() -> None:
    """gather takes a view and a where of an index: the target's logit by torch.gather and
    its gradient by scatter_add, an ignored row gathering at class 0, no [N, C] mask."""
    spec = spec_from_dict(_class_spec(f"where(target != -100, {_SAFE_PICK}, 0)"))
    module = load_module(spec)
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, -100, 4, 1])
    expected = x.detach().gather(1, target.clamp(min=0)[:, None])[:, 0] * (target != -100)
    torch.testing.assert_close(module.classes(x, target), expected)
    assert torch.autograd.gradcheck(module.Classes.apply, (x, target))
    assert torch.autograd.gradgradcheck(module.Classes.apply, (x, target))
    source = generate(spec)["classes.py"]
    assert "torch.gather(" in source and ".scatter_add(" in source
    assert "torch.arange" not in source


def test_the_liger_example_gathers_the_target_logit() -> None:
    source = (REPO_ROOT / "generated" / "liger_cross_entropy.py").read_text(encoding="utf-8")
    assert "torch.gather(" in source and "torch.arange" not in source


def test_a_gathered_targets_bound_is_the_class_count() -> None:
    from symgrad.frontend import indices

    assert indices.index_bounds(spec_from_dict(_class_spec(_SAFE_PICK))) == {"target": 5}


def test_the_generated_test_samples_targets_below_the_class_count() -> None:
    from symgrad.frontend import indices

    spec = spec_from_dict(_class_spec("sum(where(position(x, -1) == unsqueeze(target, -1), x, 0))"))
    assert indices.index_bounds(spec) == {"target": 5}


@pytest.mark.parametrize(
    "output, message",
    [
        ("x + target", "index 'target' can only be the index of gather"),
        ("where(x > 0, target, 0)", "index 'target' can only be the index of gather"),
    ],
)
def test_an_index_outside_a_comparison_is_refused_where_written(output: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        spec_from_dict(_class_spec(output))


def _mmcv_focal(
    x: torch.Tensor, target: torch.Tensor, weight: torch.Tensor, gamma: float, alpha: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """mmcv's sigmoid focal loss kernels (forward and backward), mean over rows, in torch."""
    rows, classes = x.shape
    p = torch.sigmoid(x)
    tiny = torch.finfo(torch.float32).tiny
    flag_p = torch.arange(classes)[None, :] == target[:, None]
    term_p = (1 - p) ** gamma * torch.log(p.clamp_min(tiny))
    term_n = p**gamma * torch.log((1 - p).clamp_min(tiny))
    row_weight = weight[target][:, None]
    loss = torch.where(flag_p, -alpha * term_p, -(1 - alpha) * term_n) * row_weight
    grad_p = (1 - p) ** gamma * (1 - p - gamma * p * torch.log(p.clamp_min(tiny)))
    grad_n = p**gamma * (gamma * (1 - p) * torch.log((1 - p).clamp_min(tiny)) - p)
    grad = torch.where(flag_p, -alpha * grad_p, -(1 - alpha) * grad_n) * row_weight
    return loss.sum() / rows, grad / rows


def _torchvision_focal(
    x: torch.Tensor, target: torch.Tensor, gamma: float, alpha: float
) -> torch.Tensor:
    """torchvision.ops.sigmoid_focal_loss of one-hot targets, summed per row, mean over rows."""
    one_hot = functional.one_hot(target, x.shape[1]).to(x.dtype)
    p = torch.sigmoid(x)
    ce = functional.binary_cross_entropy_with_logits(x, one_hot, reduction="none")
    p_t = p * one_hot + (1 - p) * (1 - one_hot)
    loss = ce * ((1 - p_t) ** gamma)
    loss = (alpha * one_hot + (1 - alpha) * (1 - one_hot)) * loss
    return loss.sum() / x.shape[0]


@pytest.mark.parametrize("gamma, alpha", [(2.0, 0.25), (1.5, 0.5)])
def test_sigmoid_focal_loss_matches_mmcv(gamma: float, alpha: float) -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "sigmoid_focal_loss.yaml"))
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4, 5, generator=generator, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 3, 3, 4])
    weight = torch.rand(5, generator=generator, dtype=torch.float64) + 0.5
    inputs = (x, target, weight, gamma, alpha)
    loss = module.sigmoid_focal_loss(*inputs)
    expected, expected_grad = _mmcv_focal(x.detach(), target, weight, gamma, alpha)
    torch.testing.assert_close(loss, expected)
    (grad,) = torch.autograd.grad(loss, x)
    torch.testing.assert_close(grad, expected_grad)
    plain = module.sigmoid_focal_loss(x, target, torch.ones(5, dtype=torch.float64), gamma, alpha)
    torch.testing.assert_close(plain, _torchvision_focal(x.detach(), target, gamma, alpha))
    assert torch.autograd.gradcheck(module.SigmoidFocalLoss.apply, inputs)
    assert torch.autograd.gradgradcheck(module.SigmoidFocalLoss.apply, inputs)


def test_a_number_beside_a_class_condition_takes_the_logits_dtype() -> None:
    """where(position(x, -1) == unsqueeze(target, -1), 2.5, 1) in float16: the 2.5 takes
    x's dtype, not the index's int64 (nor the float32 default a float beside it gives)."""
    output = "x * where(position(x, -1) == unsqueeze(target, -1), 2.5, 1)"
    module = load_module(spec_from_dict(_class_spec(output)))
    x = torch.randn(4, 5, dtype=torch.float16)
    target = torch.tensor([0, 2, 4, 1])
    value = module.classes(x, target)
    assert value.dtype == torch.float16
    expected = x * torch.where(torch.arange(5) == target[:, None], 2.5, 1).to(torch.float16)
    torch.testing.assert_close(value, expected)
