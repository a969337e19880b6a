"""The C++ printer: the language's conditionals, kinks, activations and reductions in ATen.

`AtenPrinter` prints one C++ expression per formula, rule for rule as the Python printer
(symgrad.backends.python.printer) prints torch: conditions on tensors are ATen's boolean
tensors (`(x > 0) & ~c`), on numbers C++'s bools (`(lo > 0.0) && !b`); activations and
pullbacks are ATen's fused kernels. Anything it does not know raises, so broken code is
never emitted.
"""

from __future__ import annotations

import sympy
from sympy.printing.precedence import PRECEDENCE

from symgrad.backends.base import UnprintableError
from symgrad.backends.cpp.arithmetic import ArithmeticPrinter, is_double
from symgrad.backends.cpp.cpu_forms import cpu_form
from symgrad.backends.cpp.spellings import ACTIVATIONS, KERNELS, is_one_operand
from symgrad.backends.statements import value_tensors
from symgrad.language import activations, broadcasts, functions, piecewise, pullbacks, reductions


class AtenPrinter(ArithmeticPrinter):
    """Prints expressions whose tensor symbols are known as one ATen/C++ expression."""

    printmethod = "_atencode"

    def _print_Relational(self, expr: sympy.Basic) -> str:
        lhs, rhs = (self.parenthesize(side, PRECEDENCE["Relational"]) for side in expr.args)
        return f"({lhs} {expr.rel_op} {rhs})"

    def _print_And(self, expr: sympy.Basic) -> str:
        return self._junction(expr, " & ", " && ")

    def _print_Or(self, expr: sympy.Basic) -> str:
        return self._junction(expr, " | ", " || ")

    def _junction(self, expr: sympy.Basic, tensors: str, numbers: str) -> str:
        """`&` or `|` of tensor conditions, the tensors first: `bool & bool` is a C++ int,
        which would promote a boolean tensor beside it to int64; `&&` or `||` on numbers."""
        if not self.is_tensor(expr):
            return "(" + numbers.join(self._print(arg) for arg in expr.args) + ")"
        ordered = sorted(expr.args, key=lambda arg: not self.is_tensor(arg))
        return "(" + tensors.join(self._print(arg) for arg in ordered) + ")"

    def _print_Not(self, expr: sympy.Basic) -> str:
        operand = self._print(expr.args[0])
        return f"(~{operand})" if self.is_tensor(expr) else f"(!{operand})"

    def _print_Where(self, expr: piecewise.Where) -> str:
        cond, a, b = expr.args
        cond_text = self._print(cond)
        if not self.is_tensor(expr):
            a_text, b_text = self._print(a), self._print(b)
            if not (is_double(a) or is_double(b)):
                a_text = f"static_cast<double>({a_text})"  # in double, as every number
            return f"({cond_text} ? {a_text} : {b_text})"
        if not self.is_tensor(cond):
            # Decided without tensors: still an at::where, so that the result has the
            # branches' broadcast shape, promoted dtype and device.
            like = self._print(self._numeric_tensor(a if self.is_tensor(a) else b))
            options = f"at::TensorOptions().dtype(at::kBool).device({like}.device())"
            cond_text = f"at::scalar_tensor({cond_text}, {options})"
        elif not (self.is_tensor(a) or self.is_tensor(b)):
            # at::where of two numbers would take the default dtype: `a` becomes a 0-d
            # tensor of the dtype ATen promotes the compared tensors and the number to, on
            # their device.
            a_text = self._print(a)
            names = [self._print(t) for t in self._numeric_tensors(cond)]
            dtypes = [f"at::result_type({name}, {a_text})" for name in names]
            dtype = dtypes[0]
            for other in dtypes[1:]:
                dtype = f"at::promote_types({dtype}, {other})"
            options = f"at::TensorOptions().dtype({dtype}).device({names[0]}.device())"
            a_text = f"at::scalar_tensor({a_text}, {options})"
            return f"at::where({cond_text}, {a_text}, {self._print(b)})"
        return f"at::where({cond_text}, {self._print(a)}, {self._print(b)})"

    def _numeric_tensor(self, cond: sympy.Basic) -> sympy.Basic:
        """A tensor (not a boolean temporary) that `cond` compares, for dtype and device."""
        return self._numeric_tensors(cond)[0]

    def _numeric_tensors(self, cond: sympy.Basic) -> list[sympy.Basic]:
        """The tensors (not boolean temporaries) that `cond` compares, in name order."""
        pending = [cond]
        candidates: set[sympy.Basic] = set()
        while pending:
            for symbol in pending.pop().free_symbols & self.tensor_symbols:
                if symbol in self.conditions:
                    pending.append(self.conditions[symbol])
                else:
                    candidates.add(symbol)
        return sorted(candidates, key=str)

    # --- Kinks and activations (symgrad.language.piecewise, .activations) ----------------

    def _print_definition(self, expr: activations.Activation | pullbacks.Pullback) -> str:
        """The node written out, in parentheses: sympy ranks a call as an atom, so
        `gelu(k)**2` on a number would otherwise print as `k * (...) / 2**2`."""
        return f"({self._print(expr.expanded())})"

    def _print_Relu(self, expr: piecewise.Relu) -> str:
        (x,) = expr.args
        if self.is_tensor(x):
            return f"at::relu({self._print(x)})"
        return f"std::max<double>({self._print(x)}, 0.0)"

    def _print_Maximum(self, expr: piecewise.Maximum) -> str:
        return self._extremum(expr, "maximum")

    def _print_Minimum(self, expr: piecewise.Minimum) -> str:
        return self._extremum(expr, "minimum")

    def _extremum(self, expr: sympy.Basic, name: str) -> str:
        a, b = expr.args
        texts = [self._print(a), self._print(b)]
        tensors = (self.is_tensor(a), self.is_tensor(b))
        if not any(tensors):
            return f"std::{name[:3]}<double>({texts[0]}, {texts[1]})"
        if not all(tensors):
            # at::maximum takes tensors only: the number becomes a 0-d tensor of the
            # other's dtype (at::clamp would give the whole gradient at a tie).
            texts = self._as_tensors((a, b), texts)
        return f"at::{name}({texts[0]}, {texts[1]})"

    def _print_Clamp(self, expr: piecewise.Clamp) -> str:
        x, low, high = expr.args
        texts = [self._print(arg) for arg in expr.args]
        if not self.is_tensor(x):
            if self.is_tensor(low) or self.is_tensor(high):
                raise UnprintableError("clamp of a number between tensors is not supported")
            return f"std::min<double>(std::max<double>({texts[0]}, {texts[1]}), {texts[2]})"
        if self.is_tensor(low) == self.is_tensor(high):
            # at::clamp takes two optional Scalars or two optional Tensors
            return f"at::clamp({texts[0]}, {texts[1]}, {texts[2]})"
        return f"at::clamp_max(at::clamp_min({texts[0]}, {texts[1]}), {texts[2]})"

    def _print_Activation(self, expr: activations.Activation) -> str:
        """ATen's fused call; on a number, or without an ATen function, the definition."""
        x, *values = expr.args
        call = ACTIVATIONS[expr.name]
        if not self.is_tensor(x) or call is None:
            return self._print_definition(expr)
        arguments = [self._print(x)]
        for (keyword, _), value in zip(expr.parameters, values, strict=True):
            if self.is_tensor(value):
                raise UnprintableError(
                    f"{expr.name}() takes {keyword} as a number (a constant or a number"
                    " input), not a tensor"
                )
            arguments.append(self._print(value))
        # Positional: the parameters up to the last one that is not torch's default.
        while len(arguments) > 1 and _is_default(values, expr.parameters, len(arguments) - 2):
            arguments.pop()
        if len(arguments) == 1 and cpu_form(expr.name) is not None:
            self.used_helpers.add(expr.name)
            return f"{self.helpers.get(expr.name, expr.name)}({arguments[0]})"
        return f"{call.function}({', '.join([*arguments, *call.options])})"

    def _print_Pullback(self, expr: pullbacks.Pullback) -> str:
        """torch's backward kernel on tensors; written out where it has no derivative and
        grad mode is on (double backward), as the Python backend's helpers do."""
        if not (self.is_tensor(expr.grad) and self.is_tensor(expr.point)):
            return self._print_definition(expr)
        kernel = KERNELS[expr.function]
        call = kernel.call.format(grad=self._print(expr.grad), point=self._print(expr.point))
        role = f"{expr.function}_backward"
        if cpu_form(role) is not None:
            self.used_helpers.add(role)
            arguments = f"{self._print(expr.grad)}, {self._print(expr.point)}"
            call = f"{self.helpers.get(role, role)}({arguments})"
        if kernel.differentiable:
            return call
        return f"(at::GradMode::is_enabled() ? ({self._print(expr.expanded())}) : {call})"

    # --- Reductions (symgrad.language.reductions) ----------------------------------------

    def _print_Reduction(self, expr: reductions.Reduction) -> str:
        if not self.is_tensor(expr.argument):
            raise UnprintableError(f"{expr.name}() needs an argument that depends on a tensor")
        argument = self._print(expr.argument)
        if expr.dims is None and isinstance(expr, reductions.ReduceLogSumExp):
            # at::logsumexp takes no dim=None: over the flattened argument, then (keepdim)
            # one size-1 dimension per dimension of the argument.
            operand = self._operand(expr.argument)
            flat = f"at::logsumexp({operand}.flatten(), at::IntArrayRef{{0}})"
            if expr.keepdim:
                return f"{flat}.reshape(std::vector<int64_t>({operand}.dim(), 1))"
            return flat
        keepdim = ", true" if expr.keepdim else ""
        if expr.dims is None:
            if not expr.keepdim:
                return f"at::{expr.name}({argument})"
            return f"at::{expr.name}({argument}, at::OptionalIntArrayRef(){keepdim})"
        dims = ", ".join(map(str, expr.dims))
        return f"at::{expr.name}({argument}, at::IntArrayRef{{{dims}}}{keepdim})"

    def _print_ReduceExtremum(self, expr: reductions.ReduceExtremum) -> str:
        """at::amax and at::amin take an IntArrayRef: every dim, kept, is the empty one."""
        if expr.dims is None and expr.keepdim and self.is_tensor(expr.argument):
            return f"at::{expr.name}({self._print(expr.argument)}, at::IntArrayRef{{}}, true)"
        return self._print_Reduction(expr)

    def _print_Normalization(self, expr: reductions.Normalization) -> str:
        if not self.is_tensor(expr.argument):
            raise UnprintableError(f"{expr.name}() needs an argument that depends on a tensor")
        return f"at::{expr.name}({self._print(expr.argument)}, {expr.dim})"

    def _print_Unsqueeze(self, expr: reductions.Unsqueeze) -> str:
        value = expr.args[0]
        if not self.is_tensor(value):
            return self._print(value)
        if reductions.unsqueezes_by_rank(expr.dims):  # Note [Reductions of 0-d tensors]
            self.used_helpers.add("unsqueeze_last")
            return f"{self.helpers['unsqueeze_last']}({self._print(value)})"
        return self._operand(value) + "".join(
            f".unsqueeze({d})" for d in reductions.restoring_unsqueezes(expr.dims)
        )

    def _print_SumTo(self, expr: reductions.SumTo) -> str:
        value, shape, frame = (self._print(arg) for arg in expr.args)
        self.used_helpers.add("sum_to")
        return f"{self.helpers['sum_to']}({value}, {shape}, {frame})"

    def _print_Broadcast(self, expr: broadcasts.Broadcast) -> str:
        """The value in the shape of the expression as written (Note [Cancelled shapes])."""
        value = self._print(expr.value)
        shapes = [s for s in broadcasts.shape_sources(expr) if self.is_tensor(s)]
        sources = [self._print(s) for s in shapes]
        sources = [s for s in sources if s != value]
        if not sources:  # the witnesses are numbers: they add no dimension
            return value
        if not self.is_tensor(expr.value):
            like = (
                sources[0]
                if len(sources) == 1
                else f"at::broadcast_tensors({{{', '.join(sources)}}})[0]"
            )
            return f"at::full_like({like}, {value}{self._value_options(shapes)})"
        return f"at::broadcast_tensors({{{value}, {', '.join(sources)}}})[0].clone()"

    def _value_options(self, shapes: list[sympy.Basic]) -> str:
        """`, v.options()` when a shape source is a boolean condition, which would make
        full_like's value a bool: the options of the values the conditions compare."""
        if not any(s in self.conditions or piecewise.is_condition(s) for s in shapes):
            return ""
        values = value_tensors(shapes, self.tensor_symbols, self.conditions)
        if not values:
            return ", at::TensorOptions().dtype(at::get_default_dtype())"
        return f", {self._print(values[0])}.options()"

    def _print_ZerosLike(self, expr: broadcasts.ZerosLike) -> str:
        grad, shape = (self._print(arg) for arg in expr.args)
        return f"at::zeros({shape}, {grad}.options())"

    def _operand(self, expr: sympy.Basic) -> str:
        """`expr` printed so that a method call can follow it: `x`, `f(x)` or `(a + b)`."""
        text = self._print(expr)
        return text if is_one_operand(text) else f"({text})"


def _is_default(
    values: list[sympy.Basic], parameters: tuple[tuple[str, float], ...], index: int
) -> bool:
    """Whether parameter `index` is given as torch's default value."""
    value = values[index]
    return bool(value.is_number) and float(value) == parameters[index][1]


def _install_function_dispatch() -> None:
    """Make every language function print through its generic method.

    sympy dispatches on the class name first, and our classes are named like the
    functions (exp, sigmoid), which StrPrinter may know under the same name.
    """
    for name in functions.FUNCTIONS:
        setattr(AtenPrinter, f"_print_{name}", AtenPrinter._print_ElementwiseFunction)
    for activation in activations.ACTIVATIONS.values():
        setattr(AtenPrinter, f"_print_{activation.__name__}", AtenPrinter._print_Activation)
    for kind in pullbacks.PULLBACKS.values():
        setattr(AtenPrinter, f"_print_{kind.__name__}", AtenPrinter._print_Pullback)
    for cls in reductions.REDUCTION_CLASSES:
        extremum = issubclass(cls, reductions.ReduceExtremum)
        method = AtenPrinter._print_ReduceExtremum if extremum else AtenPrinter._print_Reduction
        setattr(AtenPrinter, f"_print_{cls.__name__}", method)
    for normalization in reductions.NORMALIZATIONS.values():
        name = f"_print_{normalization.__name__}"
        setattr(AtenPrinter, name, AtenPrinter._print_Normalization)


_install_function_dispatch()
