"""The C++ printer (symgrad.backends.cpp.printer): the text it prints for each rule, what it
refuses, and every kind of node compiled with LibTorch and compared with the Python
printer's torch on random float64 inputs."""

from __future__ import annotations

import hashlib
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sympy
import torch

from symgrad.backends.base import UnprintableError
from symgrad.backends.cpp import spellings
from symgrad.backends.cpp.printer import AtenPrinter
from symgrad.backends.python import kernels as python_kernels
from symgrad.backends.python.printer import TorchPrinter
from symgrad.language import activations, functions, pullbacks, reductions
from symgrad.language.piecewise import Clamp, Eq, Gt, Le, Lt, Maximum, Minimum, Ne, Relu, where

# Tensors: x, y, w anywhere, p positive, u in (0, 1), r of a reduced shape [3, 1], c a
# boolean temporary (x > 0). Numbers: lo and hi doubles, k and n int64_t.
X, Y, W, P, U, R = sympy.symbols("x y w p u r", real=True)
C = sympy.Symbol("c")
LO, HI, K, N = sympy.symbols("lo hi k n", real=True)
TENSORS = frozenset({X, Y, W, P, U, R, C})
CONDITIONS = {C: Gt(X, 0)}
# Shapes for SumTo, defined in every compiled function and in the Python namespace.
R_SHAPE, X_SHAPE = sympy.symbols("r_shape x_shape")


def f(name: str, *args: Any) -> sympy.Expr:
    """A call of the language function `name`."""
    return functions.call(name, *(sympy.sympify(a) for a in args))


def reduce(name: str, argument: sympy.Expr, dims: tuple[int, ...] | None, keepdim: bool) -> Any:
    """The reduction `name` of `argument` over `dims` (None: all)."""
    return reductions.reduce(name, argument, dims, keepdim)


def printer(small: frozenset[sympy.Basic] = frozenset()) -> AtenPrinter:
    """The C++ printer of the table's symbols; `small` are reduced-shape tensors."""
    result = AtenPrinter(TENSORS, conditions=CONDITIONS)
    result.small_symbols = small
    return result


def cpp(expr: sympy.Basic, small: frozenset[sympy.Basic] = frozenset()) -> str:
    """`expr` printed as C++."""
    return printer(small).doprint(expr)


# --- The text of each rule ------------------------------------------------------------------

TEXTS: list[tuple[sympy.Basic, str]] = [
    # Literals: doubles on numbers, integers beside tensors.
    (sympy.Integer(3), "3.0"),
    (sympy.Rational(1, 3), "(1.0 / 3.0)"),
    (sympy.Rational(-3, 4), "-0.75"),
    (sympy.Float(1e-5), "1e-05"),
    (sympy.pi, "3.1415926535897931"),
    (sympy.E, "2.7182818284590451"),
    (sympy.Integer(2**40) * LO, "1099511627776.0*lo"),
    (sympy.true, "true"),
    (2 * X, "2*x"),
    (X / 3, "x/3"),
    (X / 2, "x/2"),
    (LO + 1, "1.0 + lo"),
    # Quotients of numbers divide in double.
    (K / N, "k/static_cast<double>(n)"),
    (1 / K, "(1.0 / k)"),
    (2 * K / N, "2.0*k/n"),
    (LO / K, "lo/static_cast<double>(k)"),
    (K / 3, "k/3.0"),
    # Tensor arithmetic.
    (1 - X, "at::rsub(x, 1)"),
    (1 - X + Y, "1 + y - x"),
    (1 - X + 2 * Y, "2*y + 1 - x"),
    (LO - X - Y, "at::rsub(x, lo) - y"),
    (2 / X, "2*at::reciprocal(x)"),
    (-1 / X, "-at::reciprocal(x)"),
    (LO / (X * Y), "lo*at::reciprocal(x*y)"),
    (X / Y, "x/y"),
    (X * (1 - Y), "x*at::rsub(y, 1)"),
    (X * Y + W, "at::addcmul(w, x, y)"),
    (W - 2 * X * Y, "at::addcmul(w, x, y, -2)"),
    (-X * Y / P**2, "(-x/p)*y/p"),
    # Powers.
    (X**2, "at::pow(x, 2)"),
    (X**3, "at::pow(x, 3)"),
    (X**4, "at::pow(at::pow(x, 2), 2)"),
    (X**5, "(x * at::pow(at::pow(x, 2), 2))"),
    ((X + Y) ** 7, "((x + y) * at::pow(at::pow(x + y, 2), 3))"),
    (X**65, "at::pow(x, 65)"),
    (1 / X, "at::reciprocal(x)"),
    (X**-2, "at::reciprocal(at::pow(x, 2))"),
    (sympy.sqrt(X), "at::sqrt(x)"),
    (1 / sympy.sqrt(X), "at::rsqrt(x)"),
    (X ** sympy.Rational(1, 3), "at::pow(x, (1.0 / 3))"),
    (X**LO, "at::pow(x, lo)"),
    (2**X, "at::pow(2, x)"),
    (LO**2, "std::pow(lo, 2.0)"),
    (LO**-2, "std::pow(lo, -2.0)"),
    (sympy.sqrt(LO), "std::sqrt(lo)"),
    # Calls.
    (f("exp", X), "at::exp(x)"),
    (f("exp", LO), "std::exp(lo)"),
    (f("erfinv", X), "at::special_erfinv(x)"),
    (f("polygamma", 1, X), "at::polygamma(1, x)"),
    (f("sigmoid", LO), "(1.0 / (1.0 + std::exp(-(lo))))"),
    (f("round", LO), "std::nearbyint(lo)"),
    (f("abs", K), "std::fabs(k)"),
    (f("xlogy", 2, X), "at::xlogy(2, x)"),
    (
        f("hypot", X, LO),
        "at::hypot(x, at::scalar_tensor(lo, at::TensorOptions().dtype(x.scalar_type())))",
    ),
    # Conditions and conditional values.
    (Gt(X, 0), "(x > 0)"),
    (Ne(X, X), "(x != x)"),
    (Le(LO, 0), "(lo <= 0.0)"),
    (sympy.And(Gt(LO, 0), Gt(X, 0)), "((x > 0) & (lo > 0.0))"),
    (sympy.Or(Gt(LO, 0), Gt(HI, 0)), "((hi > 0.0) || (lo > 0.0))"),
    (sympy.Not(C), "(~c)"),
    (sympy.Not(Eq(LO, 0)), "(lo != 0.0)"),
    (where(Gt(X, 0), Y, 0), "at::where((x > 0), y, 0)"),
    (
        where(Gt(X, 0), LO, 2),
        "at::where((x > 0), at::scalar_tensor(lo, at::TensorOptions()"
        ".dtype(at::result_type(x, lo)).device(x.device())), 2)",
    ),
    (
        where(Gt(X, Y), 1, 0),
        "(x > y).to(at::promote_types(at::result_type(x, 1), at::result_type(y, 1)))",
    ),
    (
        where(Gt(LO, 0), X, 1),
        "at::where(at::scalar_tensor((lo > 0.0), at::TensorOptions().dtype(at::kBool)"
        ".device(x.device())), x, 1)",
    ),
    (
        where(C, LO, 1),
        "at::where(c, at::scalar_tensor(lo, at::TensorOptions().dtype("
        "at::result_type(x, lo)).device(x.device())), 1)",
    ),
    (where(Gt(LO, HI), LO, 1), "((lo > hi) ? lo : 1.0)"),
    (where(Gt(LO, HI), K, N), "((lo > hi) ? static_cast<double>(k) : n)"),
    # Kinks.
    (Relu(X), "at::relu(x)"),
    (Relu(LO), "std::max<double>(lo, 0.0)"),
    (Maximum(X, Y), "at::maximum(x, y)"),
    (
        Minimum(2, X),
        "at::minimum(at::scalar_tensor(2, at::TensorOptions().dtype(x.scalar_type())), x)",
    ),
    (Maximum(LO, K), "std::max<double>(lo, k)"),
    (Clamp(X, LO, HI), "at::clamp(x, lo, hi)"),
    (Clamp(X, Y, W), "at::clamp(x, y, w)"),
    (Clamp(X, Y, 1), "at::clamp_max(at::clamp_min(x, y), 1)"),
    (Clamp(LO, 0, 1), "std::min<double>(std::max<double>(lo, 0.0), 1.0)"),
    # Activations.
    (activations.Silu(X), "at::silu(x)"),
    (activations.GeluTanh(X), 'at::gelu(x, "tanh")'),
    (activations.Elu(X, 1), "at::elu(x)"),
    (activations.Elu(X, LO), "at::elu(x, lo)"),
    (activations.Hardtanh(X, -2, 1), "at::hardtanh(x, -2)"),
    (activations.Hardtanh(X, -1, 2), "at::hardtanh(x, -1, 2)"),
    (activations.LeakyRelu(X, sympy.Float("0.2")), "at::leaky_relu(x, 0.2)"),
    # Written out in parentheses: a call ranks as an atom (gelu(k)**2 on a number).
    (activations.Softsign(X), "(x/(1 + at::abs(x)))"),
    (activations.Silu(LO), "(lo*(1.0 / (1.0 + std::exp(-(lo)))))"),
    # Pullbacks.
    (pullbacks.SigmoidPullback(Y, X), "at::sigmoid_backward(y, x)"),
    (pullbacks.SoftplusPullback(Y, X), "at::softplus_backward(y, x, 1.0, 20.0)"),
    (
        pullbacks.SiluPullback(Y, X),
        "(at::GradMode::is_enabled() ? (y*(1 + x*at::rsub(at::sigmoid(x), 1))*at::sigmoid(x))"
        " : at::silu_backward(y, x))",
    ),
    (pullbacks.TanhPullback(LO, X), "(lo*at::rsub(at::pow(x, 2), 1))"),
    # Reductions.
    (reduce("sum", X, None, False), "at::sum(x)"),
    (reduce("sum", X, None, True), "at::sum(x, at::OptionalIntArrayRef(), true)"),
    (reduce("mean", X, (0, 1), False), "at::mean(x, at::IntArrayRef{0, 1})"),
    (reduce("logsumexp", X, (-1,), True), "at::logsumexp(x, at::IntArrayRef{-1}, true)"),
    (
        reduce("logsumexp", X + Y, None, False),
        "at::logsumexp((x + y).flatten(), at::IntArrayRef{0})",
    ),
    (
        reduce("logsumexp", X, None, True),
        "at::logsumexp(x.flatten(), at::IntArrayRef{0}).reshape(std::vector<int64_t>(x.dim(), 1))",
    ),
    # at::amax and at::amin take an IntArrayRef, not an optional one.
    (reduce("amax", X, None, False), "at::amax(x)"),
    (reduce("amax", X, None, True), "at::amax(x, at::IntArrayRef{}, true)"),
    (reduce("amin", X, (-1, -2), False), "at::amin(x, at::IntArrayRef{-1, -2})"),
    (reduce("amin", X, (0,), True), "at::amin(x, at::IntArrayRef{0}, true)"),
    (reductions.normalize("log_softmax", X, -1), "at::log_softmax(x, -1)"),
    (
        reductions.Unsqueeze(reduce("sum", X, (-1, -2), False) + 1, -1, -2),
        "(1 + at::sum(x, at::IntArrayRef{-1, -2})).unsqueeze(-1).unsqueeze(-2)",
    ),
    (reductions.Unsqueeze(LO, 0), "lo"),
    # Over dim -1 alone, a 0-d argument may have lost no dim: unsqueezed only at rank >= 1.
    (
        reductions.Unsqueeze(reduce("sum", X, (-1,), False), -1),
        "unsqueeze_last(at::sum(x, at::IntArrayRef{-1}))",
    ),
    # Leading dims need no size-1 dimension (and a 0-d argument must get none).
    (reductions.Unsqueeze(reduce("sum", X, (0,), False), 0), "at::sum(x, at::IntArrayRef{0})"),
    (
        reductions.Unsqueeze(reduce("sum", X, (0, 1, 3), False), 0, 1, 3),
        "at::sum(x, at::IntArrayRef{0, 1, 3}).unsqueeze(1)",
    ),
    (reductions.SumTo(X * Y, R_SHAPE, X_SHAPE), "sum_to(x*y, r_shape, x_shape)"),
]


@pytest.mark.parametrize(("expr", "expected"), TEXTS, ids=[t[1] for t in TEXTS])
def test_prints(expr: sympy.Basic, expected: str) -> None:
    assert cpp(expr) == expected


def test_small_factors_multiply_first() -> None:
    assert cpp(2 * LO * X * R, small=frozenset({R})) == "(2*lo*r)*x"


def test_renames_helpers_and_unfused_products() -> None:
    aten = AtenPrinter(TENSORS, renames={X: "input"})
    aten.helpers = {**aten.helpers, "sum_to": "sum_to_3"}
    aten.fuse_products = False
    assert aten.doprint(X * Y + W) == "w + input*y"
    assert (
        aten.doprint(reductions.SumTo(X, R_SHAPE, X_SHAPE)) == "sum_to_3(input, r_shape, x_shape)"
    )
    assert aten.used_helpers == {"sum_to"}


RAISES: list[tuple[sympy.Basic, str]] = [
    (f("erfinv", LO), "erfinv of a number input is not supported; declare the input as a tensor"),
    (f("digamma", LO), "declare the input as a tensor"),
    (f("polygamma", 1, LO), "declare the input as a tensor"),
    (f("polygamma", X, Y), "takes its order as a number"),
    (activations.Elu(X, Y), "elu\\(\\) takes alpha as a number"),
    (Clamp(LO, X, 1), "clamp of a number between tensors"),
    (reduce("sum", LO, None, False), "needs an argument that depends on a tensor"),
    (reductions.normalize("softmax", LO, 0), "needs an argument that depends on a tensor"),
    (sympy.Float("inf") * X, "cannot print"),
    (sympy.nan + X, "cannot print"),
    (sympy.exp(X), "cannot print"),
    (sympy.Function("g")(X), "cannot print"),
    (sympy.Derivative(sympy.Function("g")(X), X), "cannot print"),
    (reductions.Count(X), "cannot print"),
    (sympy.Mod(X, 2), "cannot print"),
    (sympy.Integer(2) ** 1200 * X, "too large"),
]


@pytest.mark.parametrize(("expr", "match"), RAISES, ids=[str(r[0]) for r in RAISES])
def test_refuses(expr: sympy.Basic, match: str) -> None:
    with pytest.raises(UnprintableError, match=match):
        cpp(expr)


def test_every_language_function_activation_and_kernel_has_a_spelling() -> None:
    assert set(spellings.SPELLINGS) == set(functions.FUNCTIONS)
    assert set(spellings.ACTIVATIONS) == set(activations.ACTIVATIONS)
    assert set(spellings.KERNELS) == set(pullbacks.PULLBACKS) == set(python_kernels.KERNELS)
    for name, kernel in spellings.KERNELS.items():
        assert kernel.differentiable == python_kernels.KERNELS[name].differentiable, name


# --- Compiled with LibTorch, against the Python printer -------------------------------------


@dataclass(frozen=True)
class Run:
    """One expression of the compiled table; `small` are reduced-shape tensors."""

    name: str
    expr: sympy.Basic
    small: frozenset[sympy.Basic] = frozenset()


def _act(cls: type[activations.Activation], *args: Any) -> sympy.Expr:
    """The activation `cls` of x with the parameters `args`."""
    return cls(X, *(sympy.sympify(a) for a in args))


RUNS = [
    Run("arithmetic", X * Y + 2 * W - LO / 3 + (1 - X) / P + 2 / P - K * X / N),
    Run("number_arithmetic", LO / K + K / N + sympy.Rational(1, 3) + sympy.pi * LO + sympy.E),
    Run("number_powers", LO**2 + HI**-2 + K**-1 + sympy.sqrt(HI) + 1 / sympy.sqrt(K) + LO**HI),
    Run("rsub", LO - X - Y + (K - 2 * X) * W),
    Run("powers", X**2 + Y**3 + X**5 + W**6 + (X + Y) ** 7 + P ** sympy.Rational(1, 3) + P**LO),
    Run("inverse_powers", 1 / P + P**-2 + 1 / sympy.sqrt(P) + sympy.sqrt(P) + 2**X + P**Y),
    Run("square_quotient", -X * Y / P**2),
    Run("small_factors", 2 * LO * X * R * Y, small=frozenset({R})),
    Run(
        "tensor_functions",
        f("exp", X)
        + f("log1p", P)
        + f("erfinv", 2 * U - 1)
        + f("lgamma", P)
        + f("digamma", P)
        + f("polygamma", 1, P)
        + f("polygamma", K, P)
        + f("logit", U)
        + f("sinc", X)
        + f("log1mexp", -P)
        + f("floor", 3 * X)
        + f("round", 3 * X)
        + f("sign", X)
        + f("abs", X)
        + f("rsqrt", P),
    ),
    Run(
        "two_argument_functions",
        f("xlogy", X, P)
        + f("xlog1py", X, P)
        + f("xlogy", 2, P)
        + f("hypot", X, LO)
        + f("atan2", LO, X)
        + f("atan2", X, Y),
    ),
    Run(
        "number_functions",
        f("exp", LO)
        + f("log1p", LO)
        + f("erf", LO)
        + f("lgamma", HI)
        + f("sigmoid", -HI)
        + f("softplus", LO)
        + f("log_sigmoid", LO)
        + f("sign", -LO)
        + f("sinc", LO)
        + f("xlogy", LO, HI)
        + f("xlog1py", 0, HI)
        + f("logit", LO)
        + f("log1mexp", -HI)
        + f("rsqrt", HI)
        + f("abs", -K)
        + f("atan2", LO, K)
        + f("hypot", K, N),
    ),
    Run("round_half_even", f("round", K / N - 1) + f("round", sympy.Rational(7, 2))),
    Run("where", where(Gt(X, 0), Y, W) + where(sympy.And(Gt(X, 0), Lt(Y, LO)), 1, X)),
    Run("where_conditions", where(sympy.Or(sympy.Not(C), Gt(X, Y)), X, 0)),
    Run("where_numbers", where(Gt(X, 0), LO, 2) + where(Gt(X, Y), K, N)),
    Run("where_number_condition", where(Gt(LO, 0), X, 1) + where(Gt(LO, HI), Y, W)),
    Run("where_all_numbers", where(Gt(LO, HI), LO, K) + where(Le(LO, HI), K, N)),
    Run("conditions", sympy.And(Gt(LO, 0), Gt(HI, 0), Gt(X, 0))),
    Run("number_conditions", sympy.Or(Gt(LO, HI), sympy.Not(Eq(K, N)))),
    Run(
        "kinks",
        Relu(X)
        + Maximum(X, Y)
        + Maximum(X, LO)
        + Minimum(2, X)
        + Relu(LO - 1)
        + Maximum(LO, K)
        + Minimum(LO, HI),
    ),
    Run(
        "clamps",
        Clamp(X, LO - 1, HI - 1)
        + Clamp(X, -1, 1)
        + Clamp(X, Y, W)
        + Clamp(X, Y, LO)
        + Clamp(X, -LO, Y)
        + Clamp(LO, 0, K),
    ),
    Run(
        "activations",
        _act(activations.Silu)
        + _act(activations.Mish)
        + _act(activations.Gelu)
        + _act(activations.GeluTanh)
        + _act(activations.Softsign)
        + _act(activations.Tanhshrink)
        + _act(activations.Elu, LO)
        + _act(activations.Celu, 2)
        + _act(activations.Selu)
        + _act(activations.LeakyRelu, sympy.Float("0.2"))
        + _act(activations.Hardtanh, -2, LO)
        + _act(activations.Relu6)
        + _act(activations.Hardsigmoid)
        + _act(activations.Hardswish)
        + _act(activations.Softshrink, LO)
        + _act(activations.Hardshrink, sympy.Rational(1, 2)),
    ),
    Run("number_activations", activations.Silu(LO) + activations.Elu(-LO, HI)),
    Run(
        "pullbacks",
        pullbacks.SiluPullback(Y, X)
        + pullbacks.MishPullback(Y, X)
        + pullbacks.GeluPullback(R, X)
        + pullbacks.GeluTanhPullback(Y, X)
        + pullbacks.SoftplusPullback(Y, X)
        + pullbacks.TanhPullback(Y, f("tanh", X))
        + pullbacks.SigmoidPullback(Y, f("sigmoid", X))
        + pullbacks.SiluPullback(LO, X),
    ),
    Run(
        "reductions",
        reduce("sum", X, None, False) * Y
        + reduce("sum", X, (1,), True)
        + reduce("mean", X * Y, (0, 1), False)
        + reduce("mean", X, None, True)
        + reduce("logsumexp", X, (-1,), True)
        + reduce("logsumexp", X + Y, None, False),
    ),
    Run("logsumexp_keepdim", reduce("logsumexp", X, None, True)),
    Run(
        "normalizations",
        reductions.normalize("softmax", X, 1) + reductions.normalize("log_softmax", X + Y, 0),
    ),
    Run(
        "unsqueeze",
        reductions.Unsqueeze(reduce("sum", X, (1,), False), 1) * Y
        + reductions.Unsqueeze(reduce("mean", X, (-1, -2), False) + 1, -1, -2),
    ),
    Run("summed_to", reductions.SumTo(X * Y, R_SHAPE, X_SHAPE)),
]

_SIGNATURE = (
    "const at::Tensor& x, const at::Tensor& y, const at::Tensor& w, const at::Tensor& p,"
    " const at::Tensor& u, const at::Tensor& r, const at::Tensor& c,"
    " double lo, double hi, int64_t k, int64_t n"
)
_PRELUDE = """
#include <type_traits>

template <typename T>
at::Tensor to_result(const T& value) {
  if constexpr (std::is_same_v<T, at::Tensor>) {
    return value;
  } else if constexpr (std::is_same_v<T, bool>) {
    return at::scalar_tensor(value, at::kBool);
  } else {
    static_assert(std::is_same_v<T, double>, "a number expression must compute in double");
    return at::scalar_tensor(value, at::kDouble);
  }
}

at::Tensor sum_to(const at::Tensor& value, at::IntArrayRef shape, at::IntArrayRef frame) {
  return at::sum_to(value.expand(frame), shape);
}
"""


def _function(run: Run) -> str:
    """The C++ function named after `run` that returns its expression as a tensor."""
    return (
        f"at::Tensor {run.name}({_SIGNATURE}) {{\n"
        "  auto r_shape = r.sizes();\n"
        "  auto x_shape = x.sizes();\n"
        f"  return to_result({cpp(run.expr, run.small)});\n"
        "}\n"
    )


@pytest.fixture(scope="module")
def extension(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> ModuleType:
    """The table compiled into one extension, cached under the pytest cache by its source
    (in a temporary directory where the cache is off: -p no:cacheprovider)."""
    pytest.importorskip("ninja")
    if not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("no C++ compiler")
    from torch.utils import cpp_extension

    source = _PRELUDE + "".join(_function(run) for run in RUNS)
    name = "symgrad_cpp_printer_" + hashlib.sha256(source.encode()).hexdigest()[:12]
    pytest_cache = getattr(request.config, "cache", None)
    if pytest_cache is None:
        cache = tmp_path_factory.mktemp("cpp_printer")
    else:
        cache = Path(pytest_cache.mkdir("cpp_printer"))
    for stale in cache.glob("symgrad_cpp_printer_*"):  # builds of earlier tables
        if stale.name != name:
            shutil.rmtree(stale, ignore_errors=True)
    build = cache / name
    build.mkdir(exist_ok=True)
    module: ModuleType = cpp_extension.load_inline(
        name=name,
        cpp_sources=source,
        functions=[run.name for run in RUNS],
        build_directory=str(build),
    )
    return module


def _inputs() -> dict[str, Any]:
    """Random float64 tensors and numbers for every symbol, in the functions' order."""
    generator = torch.Generator().manual_seed(0)

    def sample(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    x = sample(3, 4)
    values: dict[str, Any] = {
        "x": x,
        "y": sample(3, 4),
        "w": sample(3, 4),
        "p": sample(3, 4).abs() + 0.5,
        "u": torch.rand(3, 4, generator=generator, dtype=torch.float64) * 0.8 + 0.1,
        "r": sample(3, 1),
        "c": x > 0,
        "lo": 0.3,
        "hi": 1.7,
        "k": 7,
        "n": 2,
    }
    return values


def _python(run: Run, values: dict[str, Any]) -> torch.Tensor:
    """The Python printer's text of `run`, evaluated with torch."""
    torch_printer = TorchPrinter(TENSORS, conditions=CONDITIONS)
    torch_printer.small_symbols = run.small
    text = torch_printer.doprint(run.expr)
    helpers: dict[str, Callable[..., Any]] = {
        "sum_to": lambda value, shape, frame: value.expand(frame).sum_to_size(shape),
        "silu_backward": torch.ops.aten.silu_backward,
        "mish_backward": torch.ops.aten.mish_backward,
        "mish": torch.nn.functional.mish,
    }
    assert torch_printer.used_helpers <= set(helpers), torch_printer.used_helpers
    namespace = {
        "torch": torch,
        "math": math,
        **{torch_printer.helpers[role]: helper for role, helper in helpers.items()},
        **values,
        "r_shape": values["r"].shape,
        "x_shape": values["x"].shape,
    }
    value = eval(text, namespace)
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, bool):
        return torch.tensor(value)
    return torch.tensor(float(value), dtype=torch.float64)


@pytest.mark.parametrize("grad_mode", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_compiled_matches_python(extension: ModuleType, run: Run, grad_mode: bool) -> None:
    values = _inputs()
    expected = _python(run, values)
    with torch.set_grad_enabled(grad_mode):
        actual = getattr(extension, run.name)(*values.values())
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape)
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-12, equal_nan=True)
