"""The C++ names of the spec's symbols: keywords renamed, temporaries numbered in order."""

from __future__ import annotations

import sympy

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
