"""Options that select a formula: Liger-Kernel's KL divergence and Megatron-LM's weighted
squared ReLU against their originals' mathematics, and the options' own rules.

LigerKLDivLossFunction (linkedin/Liger-Kernel, src/liger_kernel/ops/kl_div.py) takes
`reduction` (none / sum / mean / batchmean), `log_target` and `eps`; its backward is
-y_true (or -exp(y_true) under log_target) times grad_output, divided by the rows for
batchmean and by the elements for mean. WeightedSquaredReLUFunction (NVIDIA/Megatron-LM,
megatron/core/fusions/fused_weighted_squared_relu.py) is relu(x)**2 * weights, the input
soft-clamped by clamp_scale * tanh(relu(x) / clamp_scale) when clamp_scale is given.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as functional

from symgrad.api import generate, load, load_module, load_spec, spec_from_dict
from symgrad.backends import python
from symgrad.backends.base import Backend
from symgrad.backends.registry import register, unregister
from symgrad.errors import SpecError
from symgrad.frontend.options import variants
from symgrad.present.show import describe

REPO_ROOT = Path(__file__).resolve().parent.parent
REDUCTIONS = ("none", "sum", "mean", "batchmean")


def _liger_forward(
    y_pred: torch.Tensor, y_true: torch.Tensor, reduction: str, log_target: bool, eps: float
) -> torch.Tensor:
    """Liger's kldiv_forward_triton, row by row as its kernel, in plain torch."""
    rows, columns = y_pred.shape
    if log_target:
        loss = torch.exp(y_true) * (y_true - y_pred)
    else:
        loss = y_true * (torch.log(torch.clamp(y_true, min=eps)) - y_pred)
    if reduction == "none":
        return loss
    per_row = loss.sum(dim=1)
    if reduction == "batchmean":
        return per_row.sum() / rows
    if reduction == "sum":
        return per_row.sum(dim=0)
    return per_row.sum() / (rows * columns)


def _liger_backward(
    y_true: torch.Tensor, grad_output: torch.Tensor, reduction: str, log_target: bool
) -> torch.Tensor:
    """Liger's backward: -target (or -exp(target)) times grad_output, then scaled."""
    derivative = -torch.exp(y_true) if log_target else -y_true
    derivative = derivative * grad_output
    if reduction == "batchmean":
        return derivative / y_true.shape[0]
    if reduction == "mean":
        return derivative / (y_true.shape[0] * y_true.shape[1])
    return derivative


@pytest.fixture(scope="module")
def kl_div() -> types.ModuleType:
    return load_module(load_spec(REPO_ROOT / "examples" / "liger_kl_div.yaml"))


def _kl_inputs(log_target: bool) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    y_pred = torch.log_softmax(logits, dim=1).requires_grad_()
    target = torch.softmax(torch.randn(4, 6, generator=generator, dtype=torch.float64), dim=1)
    return y_pred, torch.log(target) if log_target else target


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_kl_div_matches_liger(kl_div: types.ModuleType, reduction: str, log_target: bool) -> None:
    y_pred, y_true = _kl_inputs(log_target)
    output = kl_div.liger_kl_div(y_pred, y_true, reduction=reduction, log_target=log_target)
    expected = _liger_forward(y_pred.detach(), y_true, reduction, log_target, 1e-10)
    torch.testing.assert_close(output, expected)
    assert output.shape == ((4, 6) if reduction == "none" else ())
    grad_output = torch.randn(output.shape, dtype=torch.float64)
    (grad,) = torch.autograd.grad(output, y_pred, grad_output)
    torch.testing.assert_close(grad, _liger_backward(y_true, grad_output, reduction, log_target))


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["none", "sum", "batchmean"])
def test_kl_div_matches_torch(kl_div: types.ModuleType, reduction: str, log_target: bool) -> None:
    """torch's kl_div agrees where its reductions mean Liger's (its `mean` is elementwise)."""
    y_pred, y_true = _kl_inputs(log_target)
    output = kl_div.liger_kl_div(y_pred, y_true, reduction=reduction, log_target=log_target)
    reference = functional.kl_div(y_pred, y_true, reduction=reduction, log_target=log_target)
    torch.testing.assert_close(output, reference)
    grad_output = torch.randn(output.shape, dtype=torch.float64)
    got = torch.autograd.grad(output, y_pred, grad_output)
    torch.testing.assert_close(got, torch.autograd.grad(reference, y_pred, grad_output))


def test_kl_div_defaults_to_batchmean_without_log_target(kl_div: types.ModuleType) -> None:
    y_pred, y_true = _kl_inputs(False)
    expected = _liger_forward(y_pred.detach(), y_true, "batchmean", False, 1e-10)
    torch.testing.assert_close(kl_div.liger_kl_div(y_pred, y_true), expected)


def test_kl_div_refuses_a_reduction_that_is_no_choice(kl_div: types.ModuleType) -> None:
    y_pred, y_true = _kl_inputs(False)
    message = "reduction must be one of 'none', 'sum', 'mean', 'batchmean', got 'avg'"
    with pytest.raises(ValueError, match=message):
        kl_div.liger_kl_div(y_pred, y_true, reduction="avg")


def test_each_kl_div_variant_has_its_own_function(kl_div: types.ModuleType) -> None:
    """No variant computes an untaken branch: `sum`'s Function holds no log of exp."""
    spec = load_spec(REPO_ROOT / "examples" / "liger_kl_div.yaml")
    names = [v.spec.name for v in variants(spec)]
    assert names == [
        f"LigerKLDiv{r.capitalize()}{t}" for r in REDUCTIONS for t in ("", "LogTarget")
    ]
    assert all(hasattr(kl_div, name) for name in names)
    assert "torch.where" not in generate(spec)["liger_kl_div.py"]


def _megatron(
    x: torch.Tensor, weights: torch.Tensor, clamp_scale: float | None, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Megatron's forward and its hand-written backward (input and weights gradients)."""
    if clamp_scale is None:
        output = torch.pow(functional.relu(x), 2) * weights
        input_grad = g * weights * 2 * functional.relu(x)
        weights_grad = torch.sum(torch.pow(functional.relu(x), 2) * g, dim=-1, keepdim=True)
        return output, input_grad, weights_grad
    t = torch.tanh(functional.relu(x) / clamp_scale)
    c = clamp_scale * t
    output = torch.pow(c, 2) * weights
    input_grad = (1 - torch.pow(t, 2)) * (2 * c) * g * weights
    weights_grad = torch.sum(torch.pow(c, 2) * g, dim=-1, keepdim=True)
    return output, input_grad, weights_grad


@pytest.mark.parametrize("clamp_scale", [None, 0.75, 2.0])
def test_weighted_squared_relu_matches_megatron(clamp_scale: float | None) -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "weighted_squared_relu.yaml"))
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4, 6, generator=generator, dtype=torch.float64, requires_grad=True)
    weights = torch.rand(4, 1, generator=generator, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    output = module.weighted_squared_relu(x, weights, clamp_scale)
    expected, input_grad, weights_grad = _megatron(x.detach(), weights.detach(), clamp_scale, g)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(
        torch.autograd.grad(output, (x, weights), g), (input_grad, weights_grad)
    )


def _spec(output: str, **inputs: Any) -> dict[str, Any]:
    return {"name": "Opt", "inputs": {"x": "tensor", **inputs}, "outputs": {"y": output}}


CHOICE = {"type": "str", "choices": ["a", "b"], "default": "a"}


def test_a_spec_without_options_is_its_own_only_variant() -> None:
    spec = spec_from_dict(_spec("where(x > 0, x, 0)", flag={"type": "bool", "default": False}))
    assert [v.spec for v in variants(spec)] == [spec]


def test_not_equal_and_bool_flags_select_their_branches() -> None:
    spec = spec_from_dict(
        _spec(
            'where(mode != "a", 2 * x, where(flag, 3 * x, 4 * x))',
            mode=CHOICE,
            flag={"type": "bool", "default": False},
        )
    )
    module = load_module(spec)
    x = torch.ones(3, dtype=torch.float64)
    assert module.opt(x, mode="b").tolist() == [2.0] * 3
    assert module.opt(x, mode="a", flag=True).tolist() == [3.0] * 3
    assert module.opt(x).tolist() == [4.0] * 3


def test_a_bool_flag_also_read_as_a_number_is_its_value_in_each_variant() -> None:
    flag = {"type": "bool", "default": False}
    module = load_module(spec_from_dict(_spec("where(flag, x, 3 * x) + flag * x", flag=flag)))
    x = torch.ones(2, dtype=torch.float64)
    assert module.opt(x, flag=True).tolist() == [2.0, 2.0]
    assert module.opt(x).tolist() == [3.0, 3.0]


@pytest.mark.parametrize(
    ("inputs", "output", "message"),
    [
        ({"r": {"type": "str", "choices": ["a"], "default": "c"}}, "x", "'c' is not a choice"),
        ({"r": {"type": "str", "choices": ["a", "a"]}}, "x", "choice 'a' is listed twice"),
        ({"r": {"type": "str", "choices": []}}, "x", "expected a non-empty list"),
        ({"r": {"type": "str", "choices": ["1a"]}}, "x", "expected a choice like mean"),
        ({"r": {"type": "str"}}, "x", "missing required key 'choices'"),
        ({"r": CHOICE}, 'where(r == "c", x, 0)', "'c' is not a choice of 'r'"),
        ({"r": CHOICE}, "r * x", "str input 'r' is only compared"),
        ({"r": CHOICE}, 'where(r < "a", x, 0)', "only compared with == or !="),
        ({"r": CHOICE}, 'where(x == "a", x, 0)', "a string is only compared with a str input"),
        ({}, 'x + "a"', "'a' is not a number"),
        ({"f": {"type": "bool"}}, "where(f, x, 0)", "with f=False the output does not depend"),
        ({"s": {"type": "int", "optional": True}}, "x", "only a float input may be optional"),
        ({"s": {"type": "float", "optional": True}}, "s * x", r"guard it with given\(s\)"),
        ({"s": {"type": "float", "default": 1.0}}, "where(given(s), x, 0)", "given takes"),
        ({"s": {"type": "float", "optional": True}}, "given(s) * x", "a condition is not a value"),
    ],
)
def test_options_are_refused_where_they_are_wrong(
    inputs: dict[str, Any], output: str, message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        spec_from_dict(_spec(output, **inputs))


def test_a_backend_without_options_refuses_them_at_the_option() -> None:
    toy = Backend(name="toy_no_options", description="a toy", render=python.BACKEND.render)
    register(toy)
    try:
        spec = spec_from_dict(_spec('where(r == "a", x, 2 * x)', r=CHOICE))
        with pytest.raises(SpecError, match="options are not in the toy_no_options target"):
            generate(spec, "toy_no_options")
    finally:
        unregister(toy.name)


def test_the_cpp_target_dispatches_options_in_cpp() -> None:
    """One source: each variant's namespace and operator, then a dispatcher that checks
    the choice with TORCH_CHECK and calls the selected variant's operator."""
    spec = spec_from_dict(_spec('where(r == "a", x, 2 * x)', r=CHOICE))
    files = generate(spec, "cpp")
    source = files[f"{spec.module}.cpp"]
    variants = [f"{spec.module}_{choice}" for choice in CHOICE["choices"]]
    for variant in variants:
        assert f"namespace symgrad_{variant} {{" in source
        assert f'"symgrad_{variant}::{variant}"' in source
        assert f"test_{variant}.py" in files
    assert "TORCH_CHECK_VALUE(r == " in source and "r must be one of" in source
    assert "c10::string_view r" in source and "str r" in source
    assert source.count("TORCH_LIBRARY(") == len(variants) + 1


def test_show_describes_each_variant_under_its_options() -> None:
    text = describe(load_spec(REPO_ROOT / "examples" / "weighted_squared_relu.yaml"))
    assert "WeightedSquaredReluPlain, where clamp_scale=None:" in text
    assert "WeightedSquaredReluClampScale, where clamp_scale given:" in text
    assert "tanh" in text.split("ClampScale, where")[1]


def test_load_points_a_spec_with_options_to_load_module() -> None:
    spec = spec_from_dict(_spec('where(r == "a", x, 2 * x)', r=CHOICE))
    with pytest.raises(SpecError, match="use load_module"):
        load(spec)
    assert load_module(spec).OptA.__name__ == "OptA"


def test_an_option_beside_a_tensor_condition_leaves_the_tensor_condition() -> None:
    spec = spec_from_dict(_spec('where(x > 0 and r == "a", x, 2 * x)', r=CHOICE))
    module = load_module(spec)
    x = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    assert module.opt(x).tolist() == [-2.0, 1.0]
    assert module.opt(x, r="b").tolist() == [-2.0, 2.0]


# torch.compile's own internals (inductor) use APIs that torch deprecates.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("key", ["custom_op", "mode"])
def test_each_variant_is_an_operator_or_fused(key: str) -> None:
    data = _spec("where(given(s), s * x, x) * x", s={"type": "float", "optional": True})
    data[key] = True if key == "custom_op" else "fused"
    module = load_module(spec_from_dict(data))
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(module.opt(x, 2.0), 2 * x * x)
    (grad,) = torch.autograd.grad(module.opt(x).sum(), x)
    torch.testing.assert_close(grad, 2 * x.detach())


def test_inplace_refuses_options() -> None:
    data = {**_spec('where(r == "a", x, 2 * x)', r=CHOICE), "inplace": True}
    with pytest.raises(SpecError, match="inplace: true does not take options yet"):
        spec_from_dict(data)


def test_a_gradient_override_may_read_an_option() -> None:
    data = _spec("round(x)", r=CHOICE)
    data["gradients"] = {"y": {"x": 'where(r == "a", clamp(grad, -1, 1), grad)'}}
    module = load_module(spec_from_dict(data))
    x = torch.tensor([0.2, 0.7], dtype=torch.float64, requires_grad=True)
    g = torch.tensor([3.0, -0.5], dtype=torch.float64)
    assert torch.autograd.grad(module.opt(x), x, g)[0].tolist() == [1.0, -0.5]
    assert torch.autograd.grad(module.opt(x, r="b"), x, g)[0].tolist() == [3.0, -0.5]


def test_options_that_would_name_two_functions_alike_are_refused() -> None:
    choice = {"type": "str", "choices": ["Sum", "sum"], "default": "sum"}
    with pytest.raises(SpecError, match="both name their Function OptSum"):
        spec_from_dict(_spec('where(r == "sum", x, 2 * x)', r=choice))


def test_options_past_the_bound_of_variants_are_refused() -> None:
    flags = {f"f{n}": {"type": "bool", "default": False} for n in range(6)}
    output = " + ".join(f"where(f{n}, x, 2 * x)" for n in range(6))
    with pytest.raises(SpecError, match="options select 64 formulas; at most 32"):
        spec_from_dict(_spec(output, **flags))


def test_plot_refuses_a_spec_with_options(tmp_path: Path) -> None:
    from symgrad.present.plot import plot

    spec = load_spec(REPO_ROOT / "examples" / "weighted_squared_relu.yaml")
    with pytest.raises(SpecError, match="--plot draws a spec without options"):
        plot(spec, tmp_path / "plot.png")


def test_each_variant_keeps_its_own_helpers_and_registrations() -> None:
    """The merged module keeps a helper once only where the variants' copies agree: the
    call checks of a variant that reads w differ from those of one that does not, and
    each operator registers its own fake."""
    data = _spec("where(given(s), s * x * w, x)", w="tensor", s={"type": "float", "optional": True})
    data["custom_op"] = True
    spec = spec_from_dict(data)
    source = generate(spec)["opt.py"]
    assert "def _explain_call(" in source and "def _explain_call_opt_s(" in source
    assert source.count(".register_fake") == 2
    module = load_module(spec)
    with pytest.raises(Exception, match=r"x \[2\] and w \[3\] do not broadcast"):
        module.opt(torch.ones(2), torch.ones(3), 2.0)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")
def test_the_dispatcher_compiles_without_graph_breaks(kl_div: types.ModuleType) -> None:
    y_pred, y_true = _kl_inputs(False)

    def loss(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return kl_div.liger_kl_div(a, b, reduction="sum") * 2

    result = torch.compile(loss, fullgraph=True, backend="aot_eager")(y_pred, y_true)
    torch.testing.assert_close(
        result, 2 * _liger_forward(y_pred.detach(), y_true, "sum", False, 1e-10)
    )
    (grad,) = torch.autograd.grad(result, y_pred)
    torch.testing.assert_close(grad, -2 * y_true)
