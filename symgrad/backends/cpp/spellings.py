"""How the C++ backend spells each language function: ATen for tensors, double for numbers.

The language's table (symgrad.language.functions) says what a function is; this table
says how generated C++ calls it, as symgrad.backends.python.spellings does for Python. A
call with a tensor argument prints the `aten` format; a call on numbers only prints the
`std` one, which computes in double. IEEE arithmetic gives torch's inf and nan where
Python's math would raise, so no call on numbers needs a guard. It also has the ATen calls
of the activations (symgrad.language.activations) and of torch's backward kernels
(symgrad.language.pullbacks), and the small rules of C++ text the printer follows
(literals, what reads as one operand).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from symgrad.backends.base import UnprintableError

# pi as a double literal (17 significant digits: exact), for the spellings that need it.
PI = f"{math.pi:.17g}"
# -ln 2 likewise, where log1mexp switches between its two forms.
MINUS_LN2 = repr(-math.log(2))


@dataclass(frozen=True)
class Spelling:
    """One function's C++ spellings, as format strings over the printed arguments."""

    # A call with tensor arguments, e.g. "at::sigmoid({0})".
    aten: str
    # A call on numbers, in double, e.g. "std::exp({0})"; it must read as one operand (a
    # call or parenthesised). None where C++ has no such function: a call on numbers
    # does not print (the input has to be declared a tensor).
    std: str | None
    # True when the ATen function takes tensors only: a number argument beside a tensor
    # is then passed as a 0-d tensor of that tensor's dtype.
    tensor_arguments: bool = False
    # The arguments that ATen takes as C++ numbers, never as tensors: polygamma's order
    # (the error message names it so).
    number_arguments: tuple[int, ...] = ()


def _unary(name: str, std: str | None = None, aten: str | None = None) -> Spelling:
    """`at::name(x)` on tensors, `std::name(x)` (or `std`) on numbers."""
    return Spelling(aten or f"at::{name}({{0}})", std or f"std::{name}({{0}})")


SPELLINGS: dict[str, Spelling] = {
    **{
        name: _unary(name)
        for name in (
            *("exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh"),
            *("sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh"),
            *("erf", "erfc", "lgamma", "floor", "ceil"),
        )
    },
    # 1 / sqrt(+-0.0) is +-inf and 1 / sqrt(negative) nan, as torch.rsqrt.
    "rsqrt": _unary("rsqrt", "(1.0 / std::sqrt({0}))"),
    "sigmoid": _unary("sigmoid", "(1.0 / (1.0 + std::exp(-({0}))))"),
    "softplus": _unary(
        "softplus", "(std::max<double>({0}, 0.0) + std::log1p(std::exp(-std::fabs({0}))))"
    ),
    "log_sigmoid": _unary(
        "log_sigmoid", "(std::min<double>({0}, 0.0) - std::log1p(std::exp(-std::fabs({0}))))"
    ),
    # std::fabs is double for integers too (std::abs of an int64_t is an int64_t).
    "abs": _unary("abs", "std::fabs({0})"),
    # 0 at 0 and at NaN, as the Python backend's number spelling.
    "sign": _unary("sign", "static_cast<double>((({0}) > 0) - (({0}) < 0))"),
    "erfinv": Spelling("at::special_erfinv({0})", None),
    "digamma": Spelling("at::digamma({0})", None),
    "polygamma": Spelling("at::polygamma({0}, {1})", None, number_arguments=(0,)),
    # torch: nan where y is nan, else 0 where x == 0.
    "xlogy": Spelling(
        "at::xlogy({0}, {1})",
        '(({1}) != ({1}) ? std::nan("") : ({0}) == 0 ? 0.0 : ({0}) * std::log({1}))',
    ),
    "xlog1py": Spelling(
        "at::special_xlog1py({0}, {1})",
        '(({1}) != ({1}) ? std::nan("") : ({0}) == 0 ? 0.0 : ({0}) * std::log1p({1}))',
    ),
    # log(0 / 1) is -inf, log(1 / 0.0) inf and log of a negative quotient nan, as torch.
    "logit": _unary("logit", "std::log(({0}) / (1.0 - ({0})))"),
    "hypot": Spelling("at::hypot({0}, {1})", "std::hypot({0}, {1})", tensor_arguments=True),
    "atan2": Spelling("at::atan2({0}, {1})", "std::atan2({0}, {1})", tensor_arguments=True),
    # As the Python backend's number spelling: equal infinities give that infinity.
    "logaddexp": Spelling(
        "at::logaddexp({0}, {1})",
        "(({0}) == ({1}) && std::isinf(static_cast<double>({0})) ? static_cast<double>({0})"
        " : std::max<double>({0}, {1}) + std::log1p(std::exp(-std::fabs(({0}) - ({1})))))",
        tensor_arguments=True,
    ),
    # ATen has no log1mexp: symgrad.language.functions' definition, -ln 2 its switch. IEEE
    # gives nan for u > 0 and -inf at 0, as torch.
    "log1mexp": Spelling(
        f"at::where(({{0}}) > {MINUS_LN2}, at::log(-at::expm1({{0}})), at::log1p(-at::exp({{0}})))",
        f"(({{0}}) > {MINUS_LN2} ? std::log(-std::expm1({{0}})) : std::log1p(-std::exp({{0}})))",
    ),
    "sinc": Spelling(
        "at::special_sinc({0})",
        f"(({{0}}) == 0 ? 1.0 : std::sin({PI} * ({{0}})) / ({PI} * ({{0}})))",
    ),
    # std::nearbyint rounds halves to even in the default rounding mode, as torch.round
    # (std::round rounds them away from zero).
    "round": _unary("round", "std::nearbyint({0})"),
}


@dataclass(frozen=True)
class ActivationCall:
    """An activation's ATen function, called with the input then its parameters in order."""

    function: str
    # Fixed trailing arguments, as printed (gelu's approximation).
    options: tuple[str, ...] = ()


# Every activation by language name; None where ATen has no function of its own (torch
# composes softsign and tanhshrink itself): the printer writes its definition out.
ACTIVATIONS: dict[str, ActivationCall | None] = {
    **{
        name: ActivationCall(f"at::{name}")
        for name in ("silu", "mish", "gelu", "elu", "celu", "selu", "leaky_relu", "hardtanh")
    },
    **{
        name: ActivationCall(f"at::{name}")
        for name in ("relu6", "hardsigmoid", "hardswish", "softshrink", "hardshrink")
    },
    "gelu_tanh": ActivationCall("at::gelu", ('"tanh"',)),
    "softsign": None,
    "tanhshrink": None,
    # Printed by symgrad.backends.forms.losses, on the difference's two tensors.
    "huber": None,
    "smooth_l1": None,
}


@dataclass(frozen=True)
class Kernel:
    """How one pullback is called: `{grad}` and `{point}` stand for its two arguments."""

    call: str
    # Whether autograd can differentiate the kernel (double backward through it). The
    # printer computes one without a derivative with plain ATen operations when grad mode
    # is on, as the Python backend's helpers do (symgrad.backends.python.kernels).
    differentiable: bool = True


# On CPU gelu_backward's oneDNN path fails unless both arguments have one shape: a lambda
# broadcasts them, each argument evaluated once.
_GELU_BROADCAST = (
    "[](const at::Tensor& g, const at::Tensor& x) {{"
    " auto b = at::broadcast_tensors({{g, x}}); return at::gelu_backward(b[0], b[1]); }}"
    "({grad}, {point})"
)

# The kernels of symgrad.backends.python.kernels.KERNELS, by the pullback's function.
KERNELS: dict[str, Kernel] = {
    "silu": Kernel("at::silu_backward({grad}, {point})", differentiable=False),
    "mish": Kernel("at::mish_backward({grad}, {point})", differentiable=False),
    "gelu": Kernel(_GELU_BROADCAST),
    "gelu_tanh": Kernel('at::gelu_backward({grad}, {point}, "tanh")'),
    "softplus": Kernel("at::softplus_backward({grad}, {point}, 1.0, 20.0)"),
    "tanh": Kernel("at::tanh_backward({grad}, {point})"),
    "sigmoid": Kernel("at::sigmoid_backward({grad}, {point})"),
}


# --- C++ text -----------------------------------------------------------------------------


def double_literal(value: float) -> str:
    """A C++ double literal: `2.0`, `1e-05`, `1e+40`; a non-finite value raises."""
    try:
        number = float(value)
    except OverflowError:
        raise UnprintableError(f"the constant {value} is too large") from None
    if not math.isfinite(number):
        raise UnprintableError(f"the constant {value} is not finite")
    return repr(number)


_NAME = re.compile(r"[A-Za-z_][\w:]*(<\w+>)?")
_SUFFIX = re.compile(r"\.[A-Za-z_]\w*|\[\w*\]")


def is_one_operand(text: str) -> bool:
    """True for a name, a call or a parenthesised text, with any `.method(...)` or `[i]` after
    it: a text a method call can follow, or that needs no parentheses in a product."""
    name = _NAME.match(text)
    at = name.end() if name else 0
    while at < len(text):
        if text[at] == "(":
            end = _closing(text, at)
            if end < 0:
                return False
            at = end + 1
        elif suffix := _SUFFIX.match(text, at):
            at = suffix.end()
        else:
            return False
    return bool(text)


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one at `start` (-1 when none)."""
    depth = 0
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index
    return -1
