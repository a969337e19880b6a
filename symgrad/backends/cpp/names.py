"""The C++ names of the spec's symbols: keywords renamed, temporaries numbered in order.

Note [Generated names]: a module's C++ lives in the namespace `symgrad_<module>`, which
holds the names the spec gives (the class, the operator's function, its kernel below
autograd, the in-place variant's) and one namespace, `detail`, that holds every helper
the template defines (`reduce_to`, `FusedFrame`, `vec_exp`, ...). Every call of a
function the file defines is qualified (`symgrad_log_sigmoid::log_sigmoid_forward(x)`,
`detail::reduce_to(...)`, or the class's: `LogSigmoid::apply(...)`): an unqualified call
with an at::Tensor argument also finds ATen's functions of that name by
argument-dependent lookup (`at::log_sigmoid_forward`), and a spec may name its class or
module as a helper is named (`FusedFrame`, `cpu_form_applies`). `detail` is renamed
where the module or its in-place variant takes it (a namespace cannot share its name
with a function).
"""

from __future__ import annotations

import sympy

from symgrad.ad.inplace import variant_names
from symgrad.ad.ir import Derived, Namer
from symgrad.backends.statements import all_statements, temporary_names

# Words a C++ variable cannot be named (C++20 keywords and alternative tokens), and the
# names the generated file uses for itself.
_RESERVED_WORDS = """
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast
    else enum explicit export extern false float for friend goto if inline int long
    mutable namespace new noexcept not not_eq nullptr operator or or_eq private
    protected public register reinterpret_cast requires return short signed sizeof
    static static_assert static_cast struct switch template this thread_local throw true
    try typedef typeid typename union unsigned using virtual void volatile wchar_t while
    xor xor_eq ctx grads saved outputs at std torch c10 int64_t NAN INFINITY
"""
CPP_RESERVED = frozenset(_RESERVED_WORDS.split())


def helper_namespace(derived: Derived, namer: Namer) -> str:
    """The name of the helpers' namespace (Note [Generated names]), free of the module's
    own names and its in-place variant's."""
    if derived.inplace is not None:
        namer.taken.update(variant_names(derived.spec))
    return namer.fresh("detail")


def renames(derived: Derived, namer: Namer) -> dict[sympy.Basic, str]:
    """Symbols to print under another name: temporaries in order, C++ words with a `_`."""
    result = temporary_names(derived)
    symbols = {i.symbol for i in derived.spec.inputs}
    for statement in all_statements(derived):
        symbols.add(statement.target)
    symbols |= {part.grad for part in derived.backward}
    for symbol in sorted(symbols, key=str):
        if symbol not in result and str(symbol) in CPP_RESERVED:
            result[symbol] = namer.fresh(f"{symbol}_")
    return result
