"""The form of arithmetic over tensors, chosen once for every backend; each spells it.

Note [Forms and spellings]: which torch operation computes a node (addcmul for `a + b*c`,
a reciprocal for `x**-2`, squares and cubes for `x**6`, the reduced-shape factors of a
product first, a quotient's square split in two) is a choice about torch's kernels, the
same whatever language calls them. `ArithmeticForms` makes those choices while it walks
an expression, and asks its backend only how to write each operation down: the
`_spell_*` methods, and the printing of numbers (Python's math and C++'s doubles differ
in more than spelling: integer division, domain errors). A backend is a subclass that
fills in the spellings; a new construct is one form here plus one spelling per backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import sympy
from sympy.core.relational import Relational
from sympy.printing.precedence import PRECEDENCE, precedence
from sympy.printing.str import StrPrinter

from symgrad.backends.base import UnprintableError
from symgrad.backends.statements import value_tensors
from symgrad.language import (
    broadcasts,
    contractions,
    dtypes,
    functions,
    indexing,
    layer_norms,
    piecewise,
    pullbacks,
    reductions,
    scans,
    segments,
    views,
)

_MUL = PRECEDENCE["Mul"]
# Conditions the printers write in their own parentheses (or a name).
_SELF_BRACKETED = (sympy.Symbol, Relational, sympy.Not, sympy.And, sympy.Or)

# The expression types a generated formula may contain; a backend may add literals.
PRINTABLE_TYPES: tuple[type, ...] = (
    sympy.Symbol,
    sympy.Add,
    sympy.Mul,
    sympy.Pow,
    functions.ElementwiseFunction,
    piecewise.Where,
    piecewise.Kink,
    reductions.Reduction,
    reductions.Normalization,
    *layer_norms.NODES,
    reductions.Unsqueeze,
    reductions.SumTo,
    broadcasts.Broadcast,
    broadcasts.ZerosLike,
    indexing.Gather,
    indexing.ScatterAdd,
    views.View,
    views.Cat,
    views.ReshapeTo,
    views.PieceZeros,
    views.CatPiece,
    scans.AlongDim,
    contractions.Einsum,
    segments.SegmentSum,
    segments.IndexSelect,
    segments.IndexAdd,
    dtypes.FinfoEps,
    pullbacks.Pullback,
    sympy.And,
    sympy.Or,
    sympy.Not,
    sympy.core.relational.Relational,
)


class ArithmeticForms(StrPrinter):
    """Numbers, arithmetic and elementwise calls; the rest raises UnprintableError."""

    # The expression types this backend prints (PRINTABLE_TYPES and its own literals).
    printable_types: ClassVar[tuple[type, ...]] = PRINTABLE_TYPES
    # The default names of the helper functions printed code calls, by role.
    helper_names: ClassVar[Mapping[str, str]] = {}

    def __init__(
        self,
        tensor_symbols: frozenset[sympy.Basic],
        renames: Mapping[sympy.Basic, str] | None = None,
        conditions: Mapping[sympy.Basic, sympy.Basic] | None = None,
    ) -> None:
        super().__init__({"order": "none"})
        self.tensor_symbols = tensor_symbols
        # Temporaries that hold conditions (boolean tensors), with their definitions.
        self.conditions = conditions or {}
        # Names to print instead of a symbol's own (temporaries renumbered in order).
        self.renames = renames or {}
        # Names of the module's helper functions, by role (the emitter may rename them).
        self.helpers: dict[str, str] = dict(self.helper_names)
        # Fold `a + b * c` into addcmul; off where the formula is shown as written.
        self.fuse_products = True
        # Tensors known to have a reduced shape ([N, 1] beside [N, C] values), which
        # products multiply in before the full-size factors (see _print_Mul).
        self.small_symbols: frozenset[sympy.Basic] = frozenset()
        # Helper roles that printed code calls.
        self.used_helpers: set[str] = set()

    def _print(self, expr: Any, **kwargs: Any) -> str:
        """Print `expr` if the backend can say it; raise otherwise (strict)."""
        if not self._is_printable(expr):
            raise UnprintableError(f"symgrad cannot print {type(expr).__name__}: {expr}")
        text: str = super()._print(expr, **kwargs)
        return text

    def _is_printable(self, expr: Any) -> bool:
        if isinstance(expr, (int, str)):  # parts StrPrinter prints on the way (p and q, signs)
            return True
        if isinstance(expr, sympy.Number):
            return bool(expr.is_finite)
        if isinstance(expr, sympy.NumberSymbol):
            return expr in (sympy.pi, sympy.E)
        return isinstance(expr, self.printable_types)

    def is_tensor(self, expr: sympy.Basic) -> bool:
        """True when `expr` depends on a tensor, so torch's functions must be used."""
        return bool(expr.free_symbols & self.tensor_symbols)

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return self.renames.get(expr, str(expr.name))

    # --- Powers ---------------------------------------------------------------------------

    def _print_Pow(self, expr: sympy.Pow, rational: bool = False) -> str:
        """sqrt and rsqrt as calls, a negative power of a tensor as a reciprocal, an
        integer power from 4 to 64 as a chain of squares and cubes (_power_chain)."""
        base, exponent = expr.args
        if exponent == sympy.S.Half:
            return self._call("sqrt", base)
        if exponent == -sympy.S.Half:
            return self._call("rsqrt", base)
        if not self.is_tensor(expr):
            return self._number_power(base, exponent)
        if exponent.is_Number and exponent.is_negative:
            denominator = sympy.Pow(base, -exponent, evaluate=False) if exponent != -1 else base
            return self._spell_reciprocal(denominator)
        if exponent.is_Integer and 3 < int(exponent) <= 64 and self.is_tensor(base):
            power, factor = self._chain_operands(base)
            return self._power_chain(power, factor, int(exponent), composite=False)
        return self._spell_power(base, exponent)

    def _power_chain(self, power: str, factor: str, exponent: int, composite: bool) -> str:
        """base**exponent as squares, cubes and products (x**6 as the cube of x**2).

        torch computes `x**2` and `x**3` as products, but any larger integer power
        through the general pow kernel, which costs about 25 multiplies per element on
        CPU. `power` is the base as a power's operand, `factor` as a product's.
        """
        if exponent <= 3:
            return self._spell_integer_power(power, exponent, composite)
        for root in (3, 2):
            if exponent % root == 0:
                inner = self._power_chain(power, factor, exponent // root, composite)
                return self._spell_integer_power(inner, root, composite=True)
        return f"({factor} * {self._power_chain(power, factor, exponent - 1, composite)})"

    # --- Sums and products ----------------------------------------------------------------

    def _print_Add(self, expr: sympy.Add, order: str | None = None) -> str:
        """A sum, with one product of two tensors in it folded into addcmul.

        `a + b * c` as `addcmul(a, b, c)`: one kernel and one temporary less.
        """
        if self.fuse_products and self.is_tensor(expr):
            for term in reversed(expr.args):
                fused = self._addcmul(expr, term)
                if fused is not None:
                    return fused
        return self._spell_sum(expr, order)

    def _sum_terms(self, expr: sympy.Add, order: str | None) -> tuple[list[sympy.Basic], list[str]]:
        """A tensor sum's terms and their texts, in the order printed.

        Note [Sum order]: a sum whose first tensor term is negated would negate it in a
        pass of its own (`-a*b + c` is three kernels: neg, mul, add); a positive tensor
        term goes first instead where there is one (`c - a*b`, two).
        """
        terms = list(self._as_ordered_terms(expr, order=order))
        texts = [self._print(term) for term in terms]
        first = next(i for i, term in enumerate(terms) if self.is_tensor(term))
        if texts[first].startswith("-"):
            for i in range(first + 1, len(terms)):
                if self.is_tensor(terms[i]) and not texts[i].startswith("-"):
                    moved = [i, *(k for k in range(len(terms)) if k != i)]
                    return [terms[k] for k in moved], [texts[k] for k in moved]
        return terms, texts

    def _addcmul(self, expr: sympy.Add, term: sympy.Expr) -> str | None:
        """`addcmul(rest, a, b, value=k)` for the term `k * a * b` of `expr`, if it is one."""
        coefficient, product = term.as_coeff_Mul()
        factors = sympy.Mul.make_args(product)
        if len(factors) != 2 or not all(self._is_plain_tensor(f) for f in factors):
            return None
        if self._select_product(product) is not None:
            return None  # the product multiplies by the boolean instead
        rest = sympy.Add(*(a for a in expr.args if a is not term))
        if not self.is_tensor(rest):
            return None
        value = None if coefficient == 1 else self._print(coefficient)
        a, b = (self._print(f) for f in factors)
        return self._spell_addcmul(self._print(rest), a, b, value)

    def _is_plain_tensor(self, expr: sympy.Basic) -> bool:
        """A tensor value that is not a condition (addcmul takes no boolean tensor)."""
        return self.is_tensor(expr) and expr not in self.conditions and not expr.is_Boolean

    def _print_Mul(self, expr: sympy.Mul) -> str:
        """A product with its numbers and reduced-shape factors first.

        torch evaluates `a * b * c` left to right, one kernel per `*`: multiplying the
        small factors together first leaves one full-size multiply per full-size
        factor (`-r**2 / 2 * g * y` is two full passes, `-g * y * r**2 / 2` four).
        """
        if not self.is_tensor(expr):
            return self._number_product(expr)
        selected = self._select_product(expr)
        if selected is not None:
            return selected
        split = self._split_square_quotient(expr) or self._common_power(expr)
        if split is not None:
            return split
        small = [a for a in expr.args if self._is_small(a)]
        numbers = [a for a in small if not self.is_tensor(a)]
        saves_a_pass = len(numbers) > 1 or len(numbers) < len(small)
        if len(small) == len(expr.args) or not saves_a_pass:
            return self._spell_product(expr)
        full = [a for a in expr.args if not self._is_small(a)]
        first = self.parenthesize(sympy.Mul(*small), _MUL, strict=True)
        return f"{first}*{self.parenthesize(sympy.Mul(*full), _MUL, strict=True)}"

    def _select_product(self, expr: sympy.Mul) -> str | None:
        """A product with a `where` of numbers in it, in the form SelectForms chooses
        (Note [Selects of numbers] in symgrad.backends.forms.selects); none here."""
        return None

    def _common_power(self, expr: sympy.Mul) -> str | None:
        """Powers of one degree k as the power of their product or quotient: s**6 / r**6
        as (s/r)**6, one chain of squares and cubes (three passes, where each power's own
        chain and the division take five), and no s**6 to overflow or underflow in float32
        first. A quotient of two powers whose degrees differ by one keeps the smaller in
        common: s**5 / r**6 as (s/r)**5 / r (the Lennard-Jones gradients). sympy distributes an
        integer power over a product, so the form is printed here."""
        powers = [
            f
            for f in expr.args
            if isinstance(f, sympy.Pow)
            and f.exp.is_Integer
            and abs(int(f.exp)) >= 2
            and self.is_tensor(f.base)
        ]
        ups = [f for f in powers if f.exp > 0]
        downs = [f for f in powers if f.exp < 0]
        if len(ups) == 1 and len(downs) == 1 and abs(ups[0].exp + downs[0].exp) == 1:
            group = ups + downs
            degree = min(abs(int(f.exp)) for f in group)
        else:
            degrees: dict[int, list[sympy.Pow]] = {}
            for f in powers:
                degrees.setdefault(abs(int(f.exp)), []).append(f)
            shared = [(len(g), k) for k, g in degrees.items() if len(g) > 1]
            if not shared:
                return None
            degree = max(shared)[1]
            group = degrees[degree]
        up = sympy.Mul(*(f.base for f in group if f.exp > 0))
        down = sympy.Mul(*(f.base for f in group if f.exp < 0))
        # What each power keeps beyond the common degree (r**-1 of r**-6 beside s**5).
        beyond = [f.base ** (f.exp - sympy.sign(f.exp) * degree) for f in group]
        rest = sympy.Mul(*(f for f in expr.args if f not in group), *beyond)
        sign = "-" if rest.could_extract_minus_sign() else ""
        rest = -rest if sign else rest
        if up == 1 and self.is_tensor(rest):  # rest / (a*b)**k
            power = self._print(sympy.Pow(down, degree, evaluate=False))
            return f"{sign}{self.parenthesize(rest, _MUL)}/{power}"
        if up == 1:
            return None  # a number over powers: the backend's reciprocal, as written
        power = self._print(sympy.Pow(up / down, degree, evaluate=False))
        top, bottom = rest.as_numer_denom()
        text = power if top == 1 else f"{self.parenthesize(top, _MUL, strict=True)}*{power}"
        if bottom.is_Mul:
            text += f"/({self._print(bottom)})"
        elif bottom != 1:
            text += f"/{self.parenthesize(bottom, _MUL, strict=True)}"
        return f"{sign}{text}"

    def _split_square_quotient(self, expr: sympy.Mul) -> str | None:
        """a * b / d**2 as (a / d) * (b / d), as torch computes a quotient's gradient.

        The gradient of x / y in y is -g * x / y**2; y**2 under- or overflows in float32
        long before the result does (y = 1e-30), so the two factors are each divided by
        y, as torch's `-(g / y) * (x / y)`, at the same number of kernels.
        """
        squares = [
            f
            for f in expr.args
            if isinstance(f, sympy.Pow) and f.exp == -2 and self.is_tensor(f.base)
        ]
        if len(squares) != 1:
            return None
        (square,) = squares
        rest = [f for f in expr.args if f is not square]
        tensors = [f for f in rest if self.is_tensor(f)]
        if len(tensors) < 2:
            return None
        numbers = [f for f in rest if not self.is_tensor(f)]
        inverse = sympy.Pow(square.base, -1)
        first = sympy.Mul(*numbers, tensors[0], inverse)
        second = sympy.Mul(*tensors[1:], inverse)
        left = self.parenthesize(first, _MUL, strict=True)
        return f"{left}*{self.parenthesize(second, _MUL)}"

    def _is_small(self, expr: sympy.Basic) -> bool:
        """A number, or a tensor that depends only on reduced-shape values."""
        if isinstance(expr, (reductions.Reduction, reductions.SumTo)):
            return True
        small: bool = expr.free_symbols & self.tensor_symbols <= self.small_symbols
        return small

    # --- Calls ----------------------------------------------------------------------------

    def _print_ElementwiseFunction(self, expr: functions.ElementwiseFunction) -> str:
        return self._call(type(expr).__name__, *expr.args)

    def _call(self, name: str, *args: sympy.Basic) -> str:
        """A language function: torch's on tensors, the backend's number form otherwise."""
        if not any(self.is_tensor(arg) for arg in args):
            return self._spell_number_call(name, args)
        template, tensor_arguments = self._tensor_spelling(name, args)
        texts = [self._print(arg) for arg in args]
        if tensor_arguments:  # the function takes tensors only
            texts = self._as_tensors(args, texts)
        return template.format(*texts)

    def _as_tensors(self, args: Sequence[sympy.Basic], texts: list[str]) -> list[str]:
        """Number arguments beside tensors as 0-d tensors of a tensor argument's dtype.

        A 0-d float64 tensor would promote a 0-d float32 argument to float64 (0-d tensors
        promote each other); one of the tensor's own dtype keeps the dtype torch gives a
        number. It stays on the CPU, which torch accepts beside any device.
        """
        values = value_tensors(tuple(args), self.tensor_symbols, self.conditions)
        like = self._print(values[0]) if values else None
        return [
            text if self.is_tensor(arg) else self._spell_scalar_tensor(text, like)
            for arg, text in zip(args, texts, strict=True)
        ]

    def _print_Function(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"symgrad cannot print the function {type(expr).__name__}")

    def _print_Basic(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"symgrad cannot print {type(expr).__name__}: {expr}")

    def _print_Derivative(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"symgrad cannot print an unevaluated derivative: {expr}")

    def emptyPrinter(self, expr: Any) -> str:
        raise UnprintableError(f"symgrad cannot print {type(expr).__name__}: {expr}")

    # --- The spellings a backend gives ----------------------------------------------------

    def _number_power(self, base: sympy.Basic, exponent: sympy.Basic) -> str:
        """base**exponent computed on numbers only."""
        raise NotImplementedError

    def _number_product(self, expr: sympy.Mul) -> str:
        """A product (and quotient) of numbers only."""
        raise NotImplementedError

    def _spell_number_call(self, name: str, args: Sequence[sympy.Basic]) -> str:
        """The language function `name` on numbers only."""
        raise NotImplementedError

    def _tensor_spelling(self, name: str, args: Sequence[sympy.Basic]) -> tuple[str, bool]:
        """The call of the language function `name` on tensors, as a format string over
        the printed arguments, and whether it takes tensors only."""
        raise NotImplementedError

    def _spell_scalar_tensor(self, text: str, like: str | None) -> str:
        """The number `text` as a 0-d tensor of `like`'s dtype (None: the default dtype)."""
        raise NotImplementedError

    def _spell_zeros(self, like: str, shape: str) -> str:
        """Zeros of `shape` in the dtype and on the device of the tensor `like`."""
        raise NotImplementedError

    def _spell_reciprocal(self, denominator: sympy.Basic) -> str:
        """1 / denominator, a tensor."""
        raise NotImplementedError

    def _chain_operands(self, base: sympy.Basic) -> tuple[str, str]:
        """`base` printed as the operand of a power and as a factor of a product."""
        raise NotImplementedError

    def _spell_integer_power(self, operand: str, exponent: int, composite: bool) -> str:
        """operand**exponent (2 or 3); `composite` when the operand is itself a chain."""
        raise NotImplementedError

    def _spell_power(self, base: sympy.Basic, exponent: sympy.Basic) -> str:
        """base**exponent through the general pow kernel."""
        raise NotImplementedError

    def _spell_sum(self, expr: sympy.Add, order: str | None) -> str:
        """A sum with nothing folded."""
        raise NotImplementedError

    def _spell_addcmul(self, rest: str, a: str, b: str, value: str | None) -> str:
        """rest + value * a * b as one addcmul (value None: 1)."""
        raise NotImplementedError

    def _spell_product(self, expr: sympy.Mul) -> str:
        """A product of tensors in sympy's order."""
        raise NotImplementedError


def join_sum(terms: Sequence[sympy.Basic | None], texts: Sequence[str]) -> str:
    """Printed terms joined by + and -, as StrPrinter joins a sum (None: a call's text)."""
    parts: list[str] = []
    for term, text in zip(terms, texts, strict=True):
        is_add = term is not None and term.is_Add
        sign = "-" if text.startswith("-") and not is_add else "+"
        body = text[1:] if sign == "-" else text
        low = term is not None and precedence(term) < PRECEDENCE["Add"]
        parts += [sign, f"({body})" if is_add or low else body]
    head = "" if parts[0] == "+" else "-"
    return head + " ".join(parts[1:])
