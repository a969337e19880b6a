"""The C++ target's fused CPU loops (Note [Fused loops] in symgrad.backends.cpp.fused).

The printer's text, which specs get loops, and what the forward stores for the backward.
The loops themselves are compiled and run by the generated test of
examples/mish_fused.yaml (generated/cpp/, in CI's subset), against autograd of the formula
in float64, float32, float16 and bfloat16, with gradcheck.
"""

from __future__ import annotations

from typing import Any

import pytest
import sympy

import symgrad
from symgrad.ad.derive import derive
from symgrad.backends.base import UnprintableError
from symgrad.backends.cpp.fused import FusedLoops, Summed, fused_loops
from symgrad.backends.cpp.vectorized import VecPrinter
from symgrad.language import functions, piecewise

x, y = sympy.symbols("x y", real=True)


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (x + 2 * y, "(x + (Vec(static_cast<scalar_t>(2.0)) * y))"),
        (x - y, "(x - y)"),
        (-x, "x.neg()"),
        (x**2, "(x * x)"),
        (x**-2, "(x * x).reciprocal()"),
        (sympy.sqrt(x), "x.sqrt()"),
        (1 / sympy.sqrt(x), "x.rsqrt()"),
        (x / y, "(x / y)"),
        (x / (x * y + 1), "(x / ((x * y) + Vec(static_cast<scalar_t>(1.0))))"),
        (functions.call("exp", x), "vec_exp(x)"),
        (functions.call("sigmoid", x), "vec_sigmoid(x)"),
        (
            piecewise.where(piecewise.Gt(x, 0), x, y),
            "Vec::blendv(y, x, (x > Vec(static_cast<scalar_t>(0.0))))",
        ),
        (piecewise.Maximum(x, y), "at::vec::maximum(x, y)"),
    ],
)
def test_vectorized_text(expr: sympy.Expr, text: str) -> None:
    assert VecPrinter().doprint(expr) == text


def test_a_function_without_a_vectorized_form_is_refused() -> None:
    with pytest.raises(UnprintableError, match="polygamma has no fused CPU form"):
        VecPrinter().doprint(functions.call("polygamma", sympy.Integer(1), x))


def _loops(output: str, mode: str = "fused", **inputs: Any) -> FusedLoops | None:
    spec = symgrad.spec_from_dict(
        {"name": "F", "mode": mode, "inputs": {"x": "tensor", **inputs}, "outputs": {"y": output}}
    )
    derived = derive(spec)
    received = [g.input.name for part in derived.backward for g in part.gradients]
    return fused_loops(
        derived,
        {},
        {n: f"grad_{n}" for n in received},
        {n: f"need_{n}" for n in received},
        {n: f"{n}.sizes()" for n in received},
    )


def test_silu_stores_its_derivative_for_the_backward() -> None:
    """One input, one output: the forward stores the derivative, and the backward loop
    reads the gradient and it, and multiplies."""
    loops = _loops("x * sigmoid(x)")
    assert loops is not None
    assert loops.saved == ("saved0",)
    assert [pointer for pointer, _ in loops.forward.stores] == ["y_data", "saved0_data"]
    assert loops.backward.loads == ("grad_y", "saved0")
    assert loops.backward.lines == ()
    assert [value for _, value in loops.backward.stores] == ["(grad_y * saved0)"]
    # ... and may write the gradient over it (where the graph is not kept).
    assert loops.donor == "saved0"


def test_several_inputs_store_the_calls_rather_than_a_derivative_each() -> None:
    """A derivative per input would be a stored tensor per input: the forward stores the
    sigmoid once, and the backward loop computes both gradients from it."""
    loops = _loops("x * sigmoid(b * x)", b="tensor")
    assert loops is not None
    assert loops.saved == ("saved0",)
    assert loops.backward.loads == ("grad_y", "x", "b", "saved0")
    assert not any("sigmoid" in line or "vec_exp" in line for line in loops.backward.lines)
    assert loops.donor is None
    # What is stored is the sigmoid, not the exp(-|u|) it is computed from: the backward
    # does not rebuild it by a division and a blend on the sign.
    backward = [*loops.backward.lines, *(value for _, value in loops.backward.stores)]
    assert not any("/" in text or "blendv" in text for text in backward)


def test_a_cheap_call_is_recomputed_rather_than_stored() -> None:
    loops = _loops("abs(x) * x")
    assert loops is not None
    assert loops.saved == ()
    assert loops.backward.loads == ("grad_y", "x")
    assert loops.donor is None


def test_a_division_by_a_number_is_a_product_with_its_reciprocal_made_before_the_loop() -> None:
    loops = _loops("mean(x**2 / s, dim=-1)", s={"type": "float", "default": 2.0})
    assert loops is not None
    # 2 / (count * s) once, then a product per element
    assert loops.backward.invariants == (
        "const Vec _t2 = (Vec(static_cast<scalar_t>(2.0)) / (_t0 * s));",
    )
    assert loops.forward.invariants == ("const Vec _t1 = (s).reciprocal();",)
    assert not any("/" in value for _, value in loops.backward.stores)
    assert not any("/" in line for line in loops.backward.lines)


def test_gradients_of_several_inputs_and_numbers() -> None:
    loops = _loops("a * x * b + x", b="tensor", a={"type": "float", "default": 2.0})
    assert loops is not None
    assert loops.gradients == (
        ("grad_x", "need_x", "x.sizes()"),
        ("grad_b", "need_b", "b.sizes()"),
    )
    assert loops.forward.numbers == ("a",)


def test_an_output_averaged_over_every_element_is_summed_by_the_forward_loop() -> None:
    loops = _loops("mean(x * sigmoid(x), dim=-1)")
    assert loops is not None
    # The output is summed; the sigmoid stored for the backward has a value per element.
    assert loops.summed == (Summed(dims=(-1,), keepdim=False, mean=True), None)
    # The backward loop reads the output's gradient unsqueezed (unless it is 0-d: the
    # output of a 0-d x is), and the element count.
    assert loops.backward.arguments[0] == "(grad_y.dim() > 0 ? grad_y.unsqueeze(-1) : grad_y)"
    assert loops.required == ("grad_y",)
    assert any(n.startswith("_t") for n in loops.backward.numbers)
    # One input: the forward stores the derivative, which the backward scales.
    assert loops.backward.loads == ("grad_y_unsqueezed", "saved0")
    assert loops.donor == "saved0"


def test_a_loss_of_two_inputs_stores_its_derivative_where_one_gets_a_gradient() -> None:
    """Huber's shape: the backward would read x and the target; the forward stores the
    derivative instead (as torch.compile stores x - target), and the backward loop reads
    it and the gradient, scales it by 1 / count, and may write over it."""
    target = {"type": "tensor", "requires_grad": False}
    loops = _loops("mean((x - t)**2, dim=-1)", t=target)
    assert loops is not None
    assert loops.summed == (Summed(dims=(-1,), keepdim=False, mean=True), None)
    assert loops.backward.loads == ("grad_y_unsqueezed", "saved0")
    assert loops.donor == "saved0"
    # Both inputs wanting a gradient: two gradients, so no single derivative.
    both = _loops("mean((x - t)**2, dim=-1)", t="tensor")
    assert both is not None
    assert both.saved == () and both.donor is None
    assert both.backward.loads == ("grad_y_unsqueezed", "x", "t")


def test_a_loss_of_one_input_without_calls_reads_its_input_again() -> None:
    """Storing the derivative would add a pass over memory to spare none."""
    loops = _loops("mean(x**2, dim=-1)")
    assert loops is not None
    assert loops.saved == () and loops.donor is None
    assert loops.backward.loads == ("grad_y_unsqueezed", "x")


@pytest.mark.parametrize(
    ("output", "mode"),
    [
        ("x * sigmoid(x)", "eager"),  # not asked for
        ("x - mean(x)", "fused"),  # a reduction inside an elementwise output
        ("softmax(x, dim=-1)", "fused"),  # a normalisation
        ("polygamma(1, x)", "fused"),  # no vectorized form
        ("log(1 - exp(x))", "fused"),  # log1mexp, which has none either
    ],
)
def test_specs_without_loops(output: str, mode: str) -> None:
    assert _loops(output, mode) is None


def test_only_the_autograd_forward_stores_what_the_backward_loop_reads() -> None:
    """The kernel below autograd (no_grad, inference, fake tensors) runs the forward
    alone: it asks the loop for no derivative, so it writes one tensor, not two."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Silu",
            "mode": "fused",
            "inputs": {"x": "tensor"},
            "outputs": {"y": "x * sigmoid(x)"},
        }
    )
    source = symgrad.generate(spec, "cpp")["silu.cpp"]
    assert "variable_list outputs = values(x, true);" in source  # under autograd
    assert "Silu::values(x, false);" in source  # below it
    assert "saving ? frame.empty() : at::Tensor()" in source


def test_a_fresh_buffer_of_the_loops_asks_for_huge_pages() -> None:
    """With glibc's defaults a large buffer is mapped afresh and pays a page fault per
    4 KiB page on its first write: the loops' results and stored derivatives (FusedFrame's
    empty) are advised to transparent huge pages first, on Linux."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Silu",
            "mode": "fused",
            "inputs": {"x": "tensor"},
            "outputs": {"y": "x * sigmoid(x)"},
        }
    )
    source = symgrad.generate(spec, "cpp")["silu.cpp"]
    assert "#if defined(__linux__)\n#include <sys/mman.h>" in source
    empty = source[source.index("at::Tensor empty() const {") :].split("\n  }", 1)[0]
    assert "fused_huge_pages(result);" in empty
    advice = source[source.index("inline void fused_huge_pages(") :].split("\n}", 1)[0]
    assert "madvise(" in advice and "MADV_HUGEPAGE" in advice
