"""The shared forms (symgrad.backends.forms): one choice of operation, one spelling per backend.

Each row is an expression and the torch operation the forms choose for it, as the Python
and the C++ printers spell it: the same operation in both, or the table shows where a
backend chose on its own. The last test checks that each backend spells every form.
"""

from __future__ import annotations

import inspect

import pytest
import sympy

from symgrad.ad.ir import Assignment
from symgrad.backends.cpp.printer import AtenPrinter
from symgrad.backends.forms.arg_extrema import ArgExtremumForms
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.backends.forms.constructs import ConstructForms
from symgrad.backends.forms.contractions import ContractionForms
from symgrad.backends.forms.dtypes import DtypeForms
from symgrad.backends.forms.layer_norms import LayerNormForms
from symgrad.backends.forms.losses import LossForms
from symgrad.backends.forms.products import ProductForms
from symgrad.backends.forms.scans import ScanForms
from symgrad.backends.forms.segment_extrema import SegmentExtremaForms
from symgrad.backends.forms.segments import SegmentForms
from symgrad.backends.forms.selects import SelectForms
from symgrad.backends.forms.views import ViewForms
from symgrad.backends.python.printer import TorchPrinter
from symgrad.language import (
    arg_extrema,
    contractions,
    dtypes,
    layer_norms,
    losses,
    piecewise,
    scans,
    segment_extrema,
    segments,
    views,
)
from symgrad.language.indexing import index_symbol

a, b, c, x = sympy.symbols("a b c x", real=True)
k = sympy.Symbol("k", real=True)
i = index_symbol("i")
TENSORS = frozenset({a, b, c, x, i})

FORMS = {
    "a name where a condition holds, its negation elsewhere: times the condition's sign": (
        piecewise.Where(piecewise.Gt(x, 0), a, -a),
        "(a*(x > 0).to(a.dtype).mul_(2).add_(-1))",
        "(a*(x > 0).to(a.scalar_type()).mul_(2).add_(-1))",
    ),
    "that sign select squared: all of it (found by the fuzzer, seed 2692)": (
        piecewise.Where(piecewise.Gt(x, 0), a, -a) ** 2,
        "(a*(x > 0).to(a.dtype).mul_(2).add_(-1))**2",
        "at::pow((a*(x > 0).to(a.scalar_type()).mul_(2).add_(-1)), 2)",
    ),
    "zero where a tensor is at most a number, else a tensor: relu's threshold_backward": (
        piecewise.Where(piecewise.Le(x, 1), 0, a * b),
        "torch.ops.aten.threshold_backward(a*b, x, 1)",
        "at::threshold_backward(a*b, x, 1)",
    ),
    "the same comparison written the other way round": (
        piecewise.Where(piecewise.Ge(k, x), 0, a),
        "torch.ops.aten.threshold_backward(a, x, k)",
        "at::threshold_backward(a, x, k)",
    ),
    "zero where a tensor is above a number stays a where (NaN compares false)": (
        piecewise.Where(piecewise.Gt(x, 1), a, 0),
        "torch.where((x > 1), a, 0)",
        "at::where((x > 1), a, 0)",
    ),
    "a tensor times a select of 1 and 0: times the boolean": (
        a * piecewise.where(piecewise.Gt(x, 0), 1, 0),
        "a*(x > 0)",
        "a*(x > 0)",
    ),
    "a tensor times a select of 0 and a number: times the negated boolean, then the number": (
        b * piecewise.where(piecewise.Gt(x, 0), 0, -2),
        "b*(~(x > 0))*(-2)",
        "b*(~(x > 0))*(-2)",
    ),
    "a select of two small integers: the cast boolean, scaled and shifted in place": (
        a * piecewise.where(piecewise.Gt(x, 0), 1, -1),
        "a*(x > 0).to(x.dtype).mul_(2).add_(-1)",
        "a*(x > 0).to(at::result_type(x, 1)).mul_(2).add_(-1)",
    ),
    "a select of two other numbers stays a where": (
        a * piecewise.where(piecewise.Gt(x, 0), 0.3, -1),
        "a*torch.where((x > 0), torch.tensor(0.3, dtype=(x.dtype if x.is_floating_point() "
        "else torch.get_default_dtype()), device=x.device), -1)",
        "a*at::where((x > 0), at::scalar_tensor(0.3, at::TensorOptions()"
        ".dtype(at::result_type(x, 0.3)).device(x.device())), -1)",
    ),
    "a select of a half and an integer: exact, the cast boolean scaled and shifted": (
        a * piecewise.where(piecewise.Gt(x, 0), 0.5, -1),
        "a*(x > 0).to(x.dtype if x.is_floating_point() else torch.get_default_dtype())"
        ".mul_(1.5).add_(-1)",
        "a*(x > 0).to(at::result_type(x, 0.5)).mul_(1.5).add_(-1)",
    ),
    "a number times a select of 1 and 0: the boolean cast (the number gives no dtype)": (
        2 * piecewise.where(piecewise.Gt(x, 0), 1, 0),
        "2*(x > 0).to(x.dtype)",
        "2*(x > 0).to(at::result_type(x, 1))",
    ),
    "a product of two tensors in a sum: addcmul": (
        a + b * c,
        "torch.addcmul(a, b, c)",
        "at::addcmul(a, b, c)",
    ),
    "a scaled product in a sum: addcmul with a value": (
        a - 2 * b * c,
        "torch.addcmul(a, b, c, value=-2)",
        "at::addcmul(a, b, c, -2)",
    ),
    "a negative power of a tensor: a reciprocal": (
        x**-2,
        "1 / x**2",
        "at::reciprocal(at::pow(x, 2))",
    ),
    "a power above 3: squares and cubes": (x**6, "(x**2)**3", "at::pow(at::pow(x, 2), 3)"),
    "a power that is no multiple of 2 or 3": (
        x**5,
        "(x * (x**2)**2)",
        "(x * at::pow(at::pow(x, 2), 2))",
    ),
    "a square root": (sympy.sqrt(x), "torch.sqrt(x)", "at::sqrt(x)"),
    "a reciprocal square root": (1 / sympy.sqrt(x), "torch.rsqrt(x)", "at::rsqrt(x)"),
    "a quotient's square split in two": (a * b / x**2, "a/x*(b/x)", "(a/x)*b/x"),
    "a number beside a tensor in maximum: a 0-d tensor of its dtype": (
        piecewise.Maximum(x, sympy.Float(0.5)),
        "torch.maximum(x, torch.tensor(0.5, dtype=x.dtype))",
        "at::maximum(x, at::scalar_tensor(0.5, at::TensorOptions().dtype(x.scalar_type())))",
    ),
    "a clamp between a tensor and a number: one per bound": (
        piecewise.Clamp(x, a, 1),
        "torch.clamp(torch.clamp(x, min=a), max=1)",
        "at::clamp_max(at::clamp_min(x, a), 1)",
    ),
    "where of two integers on a tensor condition: the boolean in the promoted dtype": (
        piecewise.Where(x > 0, 1, 2),
        "(x > 0).to(x.dtype).mul_(-1).add_(2)",
        "(x > 0).to(at::result_type(x, 1)).mul_(-1).add_(2)",
    ),
    "where of two numbers on a tensor condition: the promoted dtype": (
        piecewise.Where(x > 0, 1, 2.3),
        "torch.where((x > 0), torch.tensor(1, dtype=x.dtype, device=x.device), 2.3)",
        "at::where((x > 0), at::scalar_tensor(1, at::TensorOptions()"
        ".dtype(at::result_type(x, 1)).device(x.device())), 2.3)",
    ),
    "where of integers past bfloat16's exact range: a where": (
        piecewise.Where(x > 0, 1000, 0),
        "torch.where((x > 0), torch.tensor(1000, dtype=x.dtype, device=x.device), 0)",
        "at::where((x > 0), at::scalar_tensor(1000, at::TensorOptions()"
        ".dtype(at::result_type(x, 1000)).device(x.device())), 0)",
    ),
    "where decided without tensors: still a tensor where": (
        piecewise.Where(k > 0, x, 2),
        "torch.where(torch.tensor((k > 0), device=x.device), x, 2)",
        "at::where(at::scalar_tensor((k > 0.0), at::TensorOptions().dtype(at::kBool)"
        ".device(x.device())), x, 2)",
    ),
    "a view of a tensor: its own view method": (
        views.reshape(x, [1, -1]),
        "x.reshape(1, -1)",
        "x.reshape({1, -1})",
    ),
    "a piece of a chunk": (views.chunk(x, 2, -1, 1), "x.chunk(2, -1)[1]", "x.chunk(2, -1)[1]"),
    "a cat": (views.cat([a, b], 0), "torch.cat([a, b], 0)", "at::cat({a, b}, 0)"),
    "a cumulative sum along a dim": (
        scans.along("cumsum", x, 1),
        "torch.cumsum(x, 1)",
        "at::cumsum(x, 1)",
    ),
    "a cumulative product along a dim": (
        scans.along("cumprod", x, 0),
        "torch.cumprod(x, 0)",
        "at::cumprod(x, 0)",
    ),
    "a flip along one dim": (
        scans.along("flip", x, -1),
        "torch.flip(x, (-1,))",
        "at::flip(x, {-1})",
    ),
    "sort values, descending": (
        scans.along("sort", a + b, -1, descending=True),
        "torch.sort(a + b, dim=-1, descending=True).values",
        "std::get<0>(at::sort(a + b, -1, true))",
    ),
    "the indices of the same sort: argsort": (
        scans.indices_of(scans.along("sort", x, 0)),
        "torch.argsort(x, dim=0, descending=False)",
        "at::argsort(x, 0, false)",
    ),
    "positions along the last dim: arange expanded like the value": (
        scans.along("position", x, -1),
        "torch.arange(x.size(-1), dtype=x.dtype, device=x.device).expand_as(x)",
        "at::arange(x.size(-1), x.options()).expand_as(x)",
    ),
    "positions compared with an index input: int64, exact past the value dtype's integers": (
        sympy.Eq(scans.along("position", x, -1), i, evaluate=False),
        "(torch.arange(x.size(-1), dtype=torch.int64, device=x.device).expand_as(x) == i)",
        "(at::arange(x.size(-1), x.options().dtype(at::kLong)).expand_as(x) == i)",
    ),
    "positions along another dim: moved last for the expansion, and back": (
        scans.along("position", a + b, 0),
        "torch.arange((a + b).size(0), dtype=(a + b).dtype, device=(a + b).device)"
        ".expand_as((a + b).movedim(0, -1)).movedim(-1, 0)",
        "at::arange((a + b).size(0), (a + b).options())"
        ".expand_as((a + b).movedim(0, -1)).movedim(-1, 0)",
    ),
    "the product of two matrices: matmul": (
        contractions.einsum(contractions.MATMUL, [a, b]),
        "torch.matmul(a, b)",
        "at::matmul(a, b)",
    ),
    "any other contraction: one einsum, no broadcast product": (
        contractions.einsum("nd,kd->nk", [a, b]) * 2,
        '2*torch.einsum("nd,kd->nk", a, b)',
        '2*at::einsum("nd,kd->nk", {a, b})',
    ),
    "a segment sum: index_add into zeros with size segments along dim": (
        segments.segment_sum(x, 0, i, sympy.Integer(4)),
        "x.new_zeros((4, *x.shape[1:])).index_add(0, i, x)",
        "at::index_add([&] { auto sizes = x.sizes().vec(); sizes[at::maybe_wrap_dim(0, x.dim())]"
        " = 4; return at::zeros(sizes, x.options()); }(), 0, i, x)",
    ),
    "huber of a difference of tensors: the kernel on both, no subtraction": (
        losses.Huber(a - b, sympy.Float(1.5)),
        "torch.ops.aten.huber_loss(*torch.broadcast_tensors(a, b), 0, 1.5)",
        "[&] { auto t = at::broadcast_tensors({a, b});"
        " return at::huber_loss(t[0], t[1], at::Reduction::None, 1.5); }()",
    ),
    "huber of an expression: against zeros of its shape (a method would bind to its last term)": (
        losses.Huber(x / (1 + a), sympy.Float(0.5)),
        "torch.ops.aten.huber_loss(x/(1 + a), torch.zeros_like(x/(1 + a)), 0, 0.5)",
        "at::huber_loss(x/(1 + a), at::zeros_like(x/(1 + a)), at::Reduction::None, 0.5)",
    ),
    "smooth_l1 of one tensor: against a zero broadcast to its shape": (
        losses.SmoothL1(x, sympy.Float(0.5)),
        "torch.ops.aten.smooth_l1_loss(x, x.new_zeros(()).expand_as(x), 0, 0.5)",
        "at::smooth_l1_loss(x, at::zeros({}, x.options()).expand_as(x), at::Reduction::None, 0.5)",
    ),
    "smooth_l1's slope by a number beta: chosen once, in the host language": (
        losses.SmoothL1Slope(x, k),
        "(torch.clamp(x/k, -1, 1) if (k > 0) else torch.sign(x))",
        "((k > 0.0) ? at::clamp(x/k, -1, 1) : at::sign(x))",
    ),
    "argmin along a dim: torch's kernel, int64 positions": (
        arg_extrema.arg_extremum("argmin", x, 1, False),
        "torch.argmin(x, dim=1)",
        "at::argmin(x, 1, false)",
    ),
    "max along a dim: the gather at the argmax, kept, the dim summed away": (
        arg_extrema.extremum_along("max", x, -1, False),
        "torch.sum(torch.gather(x, -1, torch.argmax(x, dim=-1, keepdim=True)), dim=-1)",
        "at::sum(at::gather(x, -1, at::argmax(x, -1, true)), at::IntArrayRef{-1})",
    ),
    "its adjoint: index_select": (
        segments.IndexSelect(x, 0, i),
        "torch.index_select(x, 0, i)",
        "at::index_select(x, 0, i)",
    ),
    "an index_select's adjoint: index_add into zeros of the selected value's shape": (
        segments.IndexAdd(a, sympy.Symbol("shape"), sympy.Integer(1), i),
        "a.new_zeros(shape).index_add(1, i, a)",
        "at::index_add(at::zeros(shape, a.options()), 1, i, a)",
    ),
    "a segment maximum: scatter_reduce amax into zeros, the index expanded, zeros left out": (
        segment_extrema.segment_amax(x, 0, i, sympy.Integer(4)),
        "x.new_zeros((4, *x.shape[1:])).scatter_reduce(0, i.view((-1,) + (1,) * (x.dim() - 1))"
        '.expand_as(x), x, "amax", include_self=False)',
        "at::scatter_reduce([&] { auto sizes = x.sizes().vec(); "
        "sizes[at::maybe_wrap_dim(0, x.dim())] = 4; return at::zeros(sizes, x.options()); }(), "
        "0, [&] { std::vector<int64_t> sizes(x.dim(), 1); sizes[at::maybe_wrap_dim(0, x.dim())]"
        ' = -1; return i.view(sizes).expand_as(x); }(), x, "amax", false)',
    ),
    "along a dim counted from the end: the index viewed with as many trailing ones": (
        segment_extrema.segment_amax(x, -2, i, k),
        "x.new_zeros((*x.shape[:-2], k, *x.shape[-1:])).scatter_reduce(-2, i.view((-1,) + (1,)"
        ' * 1).expand_as(x), x, "amax", include_self=False)',
        "at::scatter_reduce([&] { auto sizes = x.sizes().vec(); "
        "sizes[at::maybe_wrap_dim(-2, x.dim())] = k; return at::zeros(sizes, x.options()); }(), "
        "-2, [&] { std::vector<int64_t> sizes(x.dim(), 1); sizes[at::maybe_wrap_dim(-2, x.dim())]"
        ' = -1; return i.view(sizes).expand_as(x); }(), x, "amax", false)',
    ),
    "layer norm's xhat: output 0 of native_layer_norm over the last dim": (
        layer_norms.LayerNorm(x, a, sympy.Float(1e-5)),
        "torch.native_layer_norm(x, x.shape[-1:], None, None, 1e-05)[0]",
        "std::get<0>(at::native_layer_norm(x, x.sizes().slice(x.dim() - 1), {}, {}, 1e-05))",
    ),
    "its rstd: output 2 of the same kernel": (
        layer_norms.LayerNormRstd(x, k),
        "torch.native_layer_norm(x, x.shape[-1:], None, None, k)[2]",
        "std::get<2>(at::native_layer_norm(x, x.sizes().slice(x.dim() - 1), {}, {}, k))",
    ),
    "layer norm of a sum: the sum parenthesised, its shape read from it": (
        layer_norms.LayerNormRstd(a + b, k),
        "torch.native_layer_norm((a + b), (a + b).shape[-1:], None, None, k)[2]",
        "std::get<2>(at::native_layer_norm((a + b), (a + b).sizes().slice((a + b).dim() - 1),"
        " {}, {}, k))",
    ),
    "layer norm with a tensor eps: the written formula (the kernel takes a number)": (
        layer_norms.LayerNorm(x, a, b),
        "(a*(x - torch.mean(x, dim=-1, keepdim=True)))",
        "(a*(x - at::mean(x, at::IntArrayRef{-1}, true)))",
    ),
    "a gradient times 1 where x > 0, else a number input: torch's leaky_relu_backward": (
        a * piecewise.Where(piecewise.Gt(x, 0), 1, k),
        "torch.ops.aten.leaky_relu_backward(a, x, k, False)",
        "at::leaky_relu_backward(a, x, k, false)",
    ),
    "the same of a product: the kernel reads it once": (
        a * b * piecewise.Where(piecewise.Lt(0, x), 1, k),
        "torch.ops.aten.leaky_relu_backward(a*b, x, k, False)",
        "at::leaky_relu_backward(a*b, x, k, false)",
    ),
    "times 1 where a condition holds, else a number: a where of the name, no 0-d tensor": (
        a * piecewise.Where(piecewise.Gt(x, 1), sympy.Float(0.1), 1),
        "torch.where((x > 1), 0.1*a, a)",
        "at::where((x > 1), 0.1*a, a)",
    ),
    "that select times a product: the product once, in the where of numbers": (
        a * b * piecewise.Where(piecewise.Gt(x, 1), 1, sympy.Float(0.1)),
        "a*b*torch.where((x > 1), torch.tensor(1, dtype=x.dtype, device=x.device), 0.1)",
        "a*b*at::where((x > 1), at::scalar_tensor(1, at::TensorOptions().dtype(at::result_type("
        "x, 1)).device(x.device())), 0.1)",
    ),
    "a half where a max ties, else one: the cast boolean, scaled and shifted (exact)": (
        a * piecewise.Where(piecewise.Eq(x, b), sympy.Rational(1, 2), 1),
        "a*(x == b).to(torch.promote_types((b.dtype if b.is_floating_point() else"
        " torch.get_default_dtype()), (x.dtype if x.is_floating_point() else"
        " torch.get_default_dtype()))).mul_(-0.5).add_(1)",
        "a*(x == b).to(at::promote_types(at::result_type(b, 0.5), at::result_type(x,"
        " 0.5))).mul_(-0.5).add_(1)",
    ),
    "powers of one degree: the power of their quotient, one chain (screened LJ's u6)": (
        4 * a**6 / b**6,
        "4*((a/b)**2)**3",
        "4*at::pow(at::pow(a/b, 2), 3)",
    ),
    "a quotient of powers a degree apart: the smaller in common (LJ's gradient)": (
        -c * a**6 / b**7,
        "-c*((a/b)**2)**3/b",
        "-c*at::pow(at::pow(a/b, 2), 3)/b",
    ),
    "over powers of one degree: one power of their product": (
        -c / (a**2 * b**2),
        "-c/(a*b)**2",
        "-c/at::pow(a*b, 2)",
    ),
    "a number over powers of one degree keeps the backend's reciprocal": (
        1 / (a**2 * b**2),
        "1/(a**2*b**2)",
        "at::reciprocal(at::pow(a, 2)*at::pow(b, 2))",
    ),
    "a sum whose first term is negated: a positive term first, no pass to negate": (
        -a * b * x + c,
        "c - a*b*x",
        "c - a*b*x",
    ),
    "a number minus a tensor: Python's operator, ATen's rsub (no filled tensor)": (
        1 - a,
        "1 - a",
        "at::rsub(a, 1)",
    ),
    "the eps of a tensor's dtype: a 0-d tensor like it, chosen at call time": (
        dtypes.FinfoEps(x),
        "x.new_full((), torch.finfo(x.dtype).eps)",
        "[](const at::Tensor& t) { return at::full({}, t.scalar_type() == at::kDouble ? "
        "2.220446049250313e-16 : t.scalar_type() == at::kHalf ? 0.0009765625 : "
        "t.scalar_type() == at::kBFloat16 ? 0.0078125 : 1.1920928955078125e-07, "
        "t.options()); }(x)",
    ),
}


@pytest.mark.parametrize("name", FORMS)
def test_each_backend_spells_the_chosen_form(name: str) -> None:
    expr, python, cpp = FORMS[name]
    assert TorchPrinter(TENSORS).doprint(expr) == python
    assert AtenPrinter(TENSORS).doprint(expr) == cpp


# Every class of forms: their `_spell_*` methods are what a backend gives.
FORM_CLASSES = (
    ArithmeticForms,
    ScanForms,
    ViewForms,
    ContractionForms,
    SegmentForms,
    SegmentExtremaForms,
    ProductForms,
    DtypeForms,
    ArgExtremumForms,
    LossForms,
    LayerNormForms,
    SelectForms,
    ConstructForms,
)


def _spellings() -> list[str]:
    """The methods the forms leave to each backend (they raise NotImplementedError)."""
    return [
        name
        for form in FORM_CLASSES
        for name, method in vars(form).items()
        if inspect.isfunction(method) and "raise NotImplementedError" in inspect.getsource(method)
    ]


@pytest.mark.parametrize("printer", [TorchPrinter, AtenPrinter], ids=["python", "cpp"])
def test_each_backend_gives_every_spelling(printer: type[ConstructForms]) -> None:
    spellings = _spellings()
    assert len(spellings) > 20  # the probe above finds them
    missing = [
        name
        for name in spellings
        if getattr(printer, name) in (vars(form).get(name) for form in FORM_CLASSES)
    ]
    assert not missing


def test_the_forward_computes_a_layer_norms_rstd_and_xhat_in_one_call() -> None:
    """rstd, then the xhat that reads it: one kernel call sets both where rstd stands."""
    rstd, xhat = sympy.symbols("rstd xhat", real=True)
    forward = [
        Assignment(rstd, layer_norms.LayerNormRstd(x, k)),
        Assignment(c, rstd * a),
        Assignment(xhat, layer_norms.LayerNorm(x, rstd, k)),
    ]
    tensors = TENSORS | {rstd, xhat}
    python = TorchPrinter(tensors).forward_statements(forward, lambda s: f"{s.target} = ...")
    assert python == (
        "xhat, _, rstd = torch.native_layer_norm(x, x.shape[-1:], None, None, k)",
        "c = ...",
    )
    cpp = AtenPrinter(tensors).forward_statements(forward, lambda s: f"{s.target} = ...;")
    assert cpp == (
        "at::Tensor xhat, rstd;\nstd::tie(xhat, std::ignore, rstd) ="
        " at::native_layer_norm(x, x.sizes().slice(x.dim() - 1), {}, {}, k);",
        "c = ...;",
    )
    # With a tensor eps, the written formulas, one statement each.
    written = [Assignment(rstd, layer_norms.LayerNormRstd(x, b)), forward[1]]
    assert len(TorchPrinter(tensors).forward_statements(written, str)) == 2
