"""The spec's `save:` key: what the backward saves against what it recomputes.

Note [Save choices] in symgrad.ad.saving: `memory` saves the inputs and reduced-shape
residuals only, `balanced` (the default) stays within eager autograd's saved elements,
`speed` saves every value worth saving.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import symgrad
from symgrad.ad.derive import derive
from symgrad.frontend.model import Spec

RMS_NORM = {
    "name": "RMSNorm",
    "inputs": {
        "x": {"type": "tensor", "shape": [3, 8]},
        "weight": {"type": "tensor", "shape": [8]},
    },
    "outputs": {"y": "x / sqrt(mean(x**2, dim=-1, keepdim=True) + 1e-5) * weight"},
}
GELU = {
    "name": "FastGeLU",
    "inputs": {"x": {"type": "tensor", "shape": [3, 8]}},
    "outputs": {"y": "0.5 * x * (1 + tanh(0.79788456 * x * (1 + 0.044715 * x * x)))"},
}
APEX_RMS_NORM = {
    "name": "RMSNorm",
    "inputs": {"x": {"type": "tensor", "shape": [4, 16]}, "w": {"type": "tensor", "shape": [16]}},
    "where": {"r": "1 / sqrt(mean(x**2, dim=-1, keepdim=True) + 1e-6)"},
    "outputs": {"y": "x * r * w"},
}
LAYER_NORM = {
    "name": "LayerNormPlain",
    "inputs": {"x": {"type": "tensor", "shape": [3, 8]}},
    "where": {"xc": "x - mean(x, dim=-1, keepdim=True)"},
    "outputs": {"y": "xc / sqrt(mean(xc**2, dim=-1, keepdim=True) + 1e-5)"},
}
QUANTIZE = {
    "name": "Quantize",
    "inputs": {"x": {"type": "tensor", "shape": [3, 8]}, "scale": "float"},
    "where": {"q": "clamp(round(x / scale), -8, 7)"},
    "outputs": {"y": "q * scale"},
    # Straight through inside the range, as torchao's fake quantiser.
    "gradients": {"y": {"x": "where(round(x / scale) >= -8 and round(x / scale) <= 7, 1, 0)"}},
}


def spec_of(data: dict[str, Any], save: str | None) -> Spec:
    """`data` as a spec, with `save:` set unless None (the default)."""
    return symgrad.spec_from_dict(data if save is None else {**data, "save": save})


def saved_names(data: dict[str, Any], save: str | None) -> tuple[str, ...]:
    """The names of the tensors the backward of `data` saves under `save`."""
    derived = derive(spec_of(data, save))
    return tuple(s.name for s in derived.saved_tensors)


def test_the_default_is_balanced() -> None:
    assert spec_of(GELU, None).save == "balanced"
    assert saved_names(GELU, None) == saved_names(GELU, "balanced")


def test_memory_saves_the_inputs_and_the_per_row_statistic_not_the_output() -> None:
    """apex's RMSNorm saves x and the per-row invvar; the balanced default saves y as well."""
    assert "y" in saved_names(RMS_NORM, "balanced")
    memory = derive(spec_of(RMS_NORM, "memory"))
    assert [s.name for s in memory.saved_tensors] == ["x", "weight", "rsqrt1"]
    assert [r.name for r in memory.residuals] == ["rsqrt1"] and not memory.saved_values


ABS_SIGN = {
    "name": "AbsBinarySign",
    "inputs": {"x": {"type": "tensor", "shape": [3, 8]}},
    "outputs": {"y": "abs(x)"},
    "gradients": {"y": {"x": "where(x >= 0, 1, -1)"}},
}
SQUARED_RELU = {
    "name": "WeightedSquaredRelu",
    "inputs": {
        "x": {"type": "tensor", "shape": [3, 8]},
        "weights": {"type": "tensor", "shape": [3, 1]},
    },
    "outputs": {"y": "tanh(relu(x))**2 * weights"},
}


def test_memory_saves_only_inputs() -> None:
    assert saved_names(GELU, "memory") == ("x",)
    # relu's condition reads x, which the backward reads anyway: no mask beside it.
    assert saved_names(SQUARED_RELU, "memory") == ("x", "weights")


@pytest.mark.parametrize("data", [QUANTIZE, ABS_SIGN], ids=["quantize", "abs_sign"])
def test_memory_saves_a_condition_read_alone_as_a_bool_mask(data: dict[str, Any]) -> None:
    """Note [Saved masks]: torchao's fake quantiser saves one bool mask, brevitas's sign
    gradient one int8 sign: the backward that reads x only through a condition saves the
    condition, one byte an element, not x."""
    assert saved_names(data, "memory") == ("mask",)
    spec = spec_of(data, "memory")
    function = getattr(symgrad.load_module(spec), spec.module)
    x = torch.randn(3, 8, requires_grad=True)
    numbers = [0.1] if "scale" in data["inputs"] else []
    packed: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        function(x, *numbers)
    assert [t.dtype for t in packed] == [torch.bool]


# Forward AD's first use on this torch release scripts a helper, which warns.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("data", [QUANTIZE, ABS_SIGN], ids=["quantize", "abs_sign"])
def test_a_masked_backward_matches_the_balanced_one_to_second_order(data: dict[str, Any]) -> None:
    """The same gradients and jvp, and a double backward through the mask (zero)."""
    numbers = [0.1] if "scale" in data["inputs"] else []
    results = []
    for save in ("balanced", "memory"):
        spec = spec_of(data, save)
        function = getattr(symgrad.load_module(spec), spec.module)
        x = torch.linspace(-2, 2, 24, dtype=torch.float64).reshape(3, 8).requires_grad_()
        grad = torch.linspace(-1, 1, 24, dtype=torch.float64).reshape(3, 8).requires_grad_()
        (first,) = torch.autograd.grad(function(x, *numbers), x, grad, create_graph=True)
        (second,) = torch.autograd.grad(first.sum(), grad)
        with torch.autograd.forward_ad.dual_level():
            dual = torch.autograd.forward_ad.make_dual(x.detach(), grad.detach())
            tangent = torch.autograd.forward_ad.unpack_dual(function(dual, *numbers)).tangent
        results.append((first, second, tangent))
    for balanced, memory in zip(*results, strict=True):
        torch.testing.assert_close(memory, balanced, rtol=0, atol=0)


def test_balanced_recomputes_an_output_that_would_hold_more_than_eager() -> None:
    """Note [Outputs the backward reads]: the derivative of `x * r * w` reads y beside x, w
    and the per-row r; y is recomputed from them, not saved (apex's RMSNorm saves x and r)."""
    derived = derive(spec_of(APEX_RMS_NORM, None))
    assert [s.name for s in derived.saved_tensors] == ["x", "w", "r"]
    assert "y" in saved_names(APEX_RMS_NORM, "speed")


def test_layer_norm_saves_the_centred_input_and_rstd_as_eager_does() -> None:
    """Normalised over dim 0 (no layer_norm), `xc = x - mean(x)` saved spares x and the
    per-column mean (Note [Residuals]); with y recomputed, the backward saves xc and rstd,
    eager autograd's tensors. Over the last dim, layer_norm saves y and its rstd."""
    over_columns = {
        **LAYER_NORM,
        "where": {"xc": "x - mean(x, dim=0, keepdim=True)"},
        "outputs": {"y": "xc / sqrt(mean(xc**2, dim=0, keepdim=True) + 1e-5)"},
    }
    assert saved_names(over_columns, None) == ("xc", "rsqrt2")
    assert saved_names(LAYER_NORM, None) == ("y", "layer_norm_rstd0")


@pytest.mark.parametrize(("formula", "saved"), [("exp(x)", ["y"]), ("softmax(x, dim=-1)", ["y"])])
def test_an_output_that_spares_a_recomputation_is_still_read(
    formula: str, saved: list[str]
) -> None:
    """exp's derivative reads y alone; a softmax would cost more to recompute than to save."""
    data = {"name": "F", "inputs": {"x": {"type": "tensor", "shape": [3, 8]}}}
    derived = derive(spec_of({**data, "outputs": {"y": formula}}, None))
    assert [s.name for s in derived.saved_tensors] == saved


def test_speed_saves_beyond_eager_where_balanced_recomputes() -> None:
    """Eager autograd saves clamp's argument only (round's derivative is zero, it saves
    nothing): balanced saves x alone, speed also the rounded value it would recompute."""
    assert saved_names(QUANTIZE, "balanced") == ("x",)
    speed = derive(spec_of(QUANTIZE, "speed"))
    assert [s.name for s in speed.saved_tensors] == ["x", "round0"]


@pytest.mark.parametrize("save", ["balanced", "memory", "speed"])
@pytest.mark.parametrize(
    "data",
    [RMS_NORM, GELU, ABS_SIGN, SQUARED_RELU, LAYER_NORM, APEX_RMS_NORM],
    ids=["rms_norm", "gelu", "sign", "relu", "layer_norm", "apex_rms_norm"],
)
def test_every_choice_is_exact_to_second_order(data: dict[str, Any], save: str) -> None:
    spec = spec_of(data, save)
    function = getattr(symgrad.load_module(spec), spec.module)
    generator = torch.Generator().manual_seed(0)
    inputs = tuple(
        torch.randn(*item["shape"], dtype=torch.float64, generator=generator).requires_grad_()
        for item in data["inputs"].values()
    )
    assert torch.autograd.gradcheck(function, inputs)
    assert torch.autograd.gradgradcheck(function, inputs)


@pytest.mark.parametrize(
    ("data", "save", "said"),
    [
        (RMS_NORM, "memory", "# save: memory: the backward saves only the inputs it"),
        (ABS_SIGN, "memory", "as bool masks (mask); it recomputes the"),
        (QUANTIZE, "speed", "(save: speed, which may exceed what"),
        (QUANTIZE, "balanced", None),  # nothing saved beyond inputs: nothing to say
    ],
)
def test_the_generated_comment_says_what_is_saved(
    data: dict[str, Any], save: str, said: str | None
) -> None:
    source = "\n".join(symgrad.generate(spec_of(data, save)).values())
    if said is None:
        assert "Saved for the backward" not in source and "save: " not in source
    else:
        assert said in source


def test_a_condition_a_where_of_numbers_also_reads_is_not_masked() -> None:
    """amax's gradient counts ties with sum(where(x == m, 1, 0)), whose 1 takes the
    dtype of the values compared: masked, the backward named x, which it had not saved
    (fuzzer seeds 3000232 and 3000380)."""
    data = {
        "name": "Amax",
        "save": "memory",
        "inputs": {"x": {"type": "tensor", "shape": [3, 8]}},
        "outputs": {"y": "amax(x)"},
    }
    spec = symgrad.spec_from_dict(data)
    function = getattr(symgrad.load_module(spec), spec.module)
    x = torch.tensor([[1.0, 3.0, 2.0], [0.0, -1.0, 2.5]], dtype=torch.float64)
    x.requires_grad_()
    assert torch.autograd.gradcheck(function, (x,))
    assert torch.autograd.gradgradcheck(function, (x,))


def test_speed_saves_a_value_cheap_to_recompute_on_a_cpu() -> None:
    """x * sqrt(x): balanced recomputes sqrt(x), one pass below the CPU's floor; speed
    saves it (on a GPU the recomputation is one more pass through memory)."""
    power = {
        "name": "Power",
        "inputs": {"x": {"type": "tensor", "shape": [4, 8], "domain": [0.5, 2.0]}},
        "outputs": {"y": "x * sqrt(x)"},
    }
    assert saved_names(power, "balanced") == ("x",)
    assert saved_names(power, "speed") == ("x", "sqrt0")
