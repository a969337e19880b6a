"""The Python printer: the language's conditionals, kinks, activations and reductions.

sympy's own `TorchPrinter` wraps Python numbers in torch calls, prints `Max(x, 0)` as a
reduction and cannot print log1p, expm1 or erfc, so symgrad has its own printer. It knows
which symbols hold tensors: a call on a tensor prints as torch, a call on numbers only
prints with `math`. Anything it does not know raises, so broken code is never emitted.
"""

from __future__ import annotations

from typing import Any

import sympy
from sympy.printing.precedence import PRECEDENCE

from symgrad.backends.base import UnprintableError
from symgrad.backends.python.arithmetic import ArithmeticPrinter
from symgrad.backends.python.kernels import FORWARD_FORMS, HELPER_ROLES, KERNELS, helper_role
from symgrad.backends.statements import value_tensors
from symgrad.language import activations, broadcasts, functions, piecewise, pullbacks, reductions


class TorchPrinter(ArithmeticPrinter):
    """Prints expressions whose tensor symbols are known as torch/Python code."""

    printmethod = "_torchcode"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Default names of the kernel helpers; a module's emitter renames them.
        self.helpers = {**self.helpers, **{role: f"_{role}" for role in HELPER_ROLES}}
        # Call the module's CPU-form helpers for activations; off in the generated test,
        # whose reference formula is plain torch and has no helpers.
        self.forward_helpers = True

    def _print_Relational(self, expr: sympy.Basic) -> str:
        lhs, rhs = (self.parenthesize(side, PRECEDENCE["Relational"]) for side in expr.args)
        return f"({lhs} {expr.rel_op} {rhs})"

    def _print_And(self, expr: sympy.Basic) -> str:
        joiner = " & " if self.is_tensor(expr) else " and "
        return "(" + joiner.join(self._print(arg) for arg in expr.args) + ")"

    def _print_Or(self, expr: sympy.Basic) -> str:
        joiner = " | " if self.is_tensor(expr) else " or "
        return "(" + joiner.join(self._print(arg) for arg in expr.args) + ")"

    def _print_Not(self, expr: sympy.Basic) -> str:
        operand = self._print(expr.args[0])
        return f"(~{operand})" if self.is_tensor(expr) else f"(not {operand})"

    def _print_Where(self, expr: piecewise.Where) -> str:
        cond, a, b = expr.args
        cond_text = self._condition(cond)
        if not self.is_tensor(expr):
            return f"({self._print(a)} if {cond_text} else {self._print(b)})"
        if not self.is_tensor(cond):
            # Decided without tensors: still a torch.where, so that the result has the
            # branches' broadcast shape, promoted dtype and device (the untaken branch is
            # guarded like any other, Note [Untaken branches] in symgrad.ad.guards).
            like = self._print(self._numeric_tensor(a if self.is_tensor(a) else b))
            cond_text = f"torch.tensor({cond_text}, device={like}.device)"
        elif not (self.is_tensor(a) or self.is_tensor(b)):
            # torch.where of two numbers would take the default dtype: `a` becomes a 0-d
            # tensor of the dtype torch promotes the compared tensors and the number to
            # (8.5 beside an integer tensor stays 8.5), on their device. That dtype is
            # spelled from `.dtype`, which torch.compile traces (torch.result_type not).
            a_text = self._print(a)
            names = [self._print(t) for t in self._numeric_tensors(cond)]
            floating = "({0}.dtype if {0}.is_floating_point() else torch.get_default_dtype())"
            dtypes = [f"{name}.dtype" if a.is_integer else floating.format(name) for name in names]
            dtype = dtypes[0]
            for other in dtypes[1:]:
                dtype = f"torch.promote_types({dtype}, {other})"
            a_text = f"torch.tensor({a_text}, dtype={dtype}, device={names[0]}.device)"
            return f"torch.where({cond_text}, {a_text}, {self._print(b)})"
        return f"torch.where({cond_text}, {self._print(a)}, {self._print(b)})"

    def _condition(self, cond: sympy.Basic) -> str:
        """A condition's text; one that sympy decided is Python's True or False."""
        if isinstance(cond, (sympy.logic.boolalg.BooleanTrue, sympy.logic.boolalg.BooleanFalse)):
            return str(bool(cond))
        return self._print(cond)

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

    def _print_definition(self, expr: activations.Activation | pullbacks.Pullback) -> str:
        """The node written out, in parentheses: sympy ranks a call as an atom, so
        `gelu(k)**2` on a number would otherwise print as `k * (...) / 2**2`."""
        return f"({self._print(expr.expanded())})"

    def _print_Relu(self, expr: piecewise.Relu) -> str:
        (x,) = expr.args
        return f"torch.relu({self._print(x)})" if self.is_tensor(x) else f"max({self._print(x)}, 0)"

    def _print_Activation(self, expr: activations.Activation) -> str:
        """torch's fused call; on a number, the activation's definition with math."""
        x, *values = expr.args
        if not self.is_tensor(x):
            return self._print_definition(expr)
        arguments = [self._print(x)]
        for (keyword, default), value in zip(expr.parameters, values, strict=True):
            if self.is_tensor(value):
                raise UnprintableError(
                    f"{expr.name}() takes {keyword} as a number (a constant or a number"
                    " input), not a tensor"
                )
            if not (value.is_number and float(value) == default):
                arguments.append(f"{keyword}={self._print(value)}")
        if expr.torch_options:
            arguments.append(expr.torch_options)
        if self.forward_helpers and expr.name in FORWARD_FORMS and len(arguments) == 1:
            self.used_helpers.add(expr.name)
            return f"{self.helpers[expr.name]}({arguments[0]})"
        return f"{expr.torch_function}({', '.join(arguments)})"

    def _print_Pullback(self, expr: pullbacks.Pullback) -> str:
        """torch's backward kernel (symgrad.backends.python.kernels) on tensors."""
        if not (self.is_tensor(expr.grad) and self.is_tensor(expr.point)):
            return self._print_definition(expr)
        kernel = KERNELS[expr.function]
        call = kernel.call
        if not kernel.differentiable:
            role = helper_role(expr.function)
            self.used_helpers.add(role)
            call = self.helpers[role] + "({grad}, {point})"
        return call.format(grad=self._print(expr.grad), point=self._print(expr.point))

    def _print_Maximum(self, expr: piecewise.Maximum) -> str:
        return self._extremum(expr, "maximum")

    def _print_Minimum(self, expr: piecewise.Minimum) -> str:
        return self._extremum(expr, "minimum")

    def _extremum(self, expr: sympy.Basic, name: str) -> str:
        a, b = expr.args
        tensors = (self.is_tensor(a), self.is_tensor(b))
        if all(tensors):
            return f"torch.{name}({self._print(a)}, {self._print(b)})"
        if not any(tensors):
            return f"{name[:3]}({self._print(a)}, {self._print(b)})"
        # torch.maximum takes tensors only: the number becomes a 0-d tensor of the other's
        # dtype. (torch.clamp would give the same values, but the whole gradient at a tie.)
        texts = self._as_tensors((a, b), [self._print(a), self._print(b)])
        return f"torch.{name}({texts[0]}, {texts[1]})"

    def _print_Clamp(self, expr: piecewise.Clamp) -> str:
        x, low, high = expr.args
        texts = [self._print(arg) for arg in expr.args]
        if not self.is_tensor(x):
            if self.is_tensor(low) or self.is_tensor(high):
                raise UnprintableError("clamp of a number between tensors is not supported")
            return f"min(max({texts[0]}, {texts[1]}), {texts[2]})"
        if self.is_tensor(low) == self.is_tensor(high):
            return f"torch.clamp({texts[0]}, {texts[1]}, {texts[2]})"
        return f"torch.clamp(torch.clamp({texts[0]}, min={texts[1]}), max={texts[2]})"

    # --- Reductions (symgrad.language.reductions) ----------------------------------------------

    def _print_Reduction(self, expr: reductions.Reduction) -> str:
        if not self.is_tensor(expr.argument):
            raise UnprintableError(f"{expr.name}() needs an argument that depends on a tensor")
        argument = self._print(expr.argument)
        if expr.dims is None and isinstance(expr, reductions.ReduceLogSumExp):
            operand = self._operand(expr.argument)
            if expr.keepdim:
                # torch.logsumexp takes no dim=None: name every dim of the argument.
                every_dim = f"tuple(range({operand}.dim()))"
                return f"torch.logsumexp({argument}, dim={every_dim}, keepdim=True)"
            return f"torch.logsumexp({operand}.flatten(), 0)"
        dims = "None" if expr.dims is None else _dims(expr.dims)
        keepdim = ", keepdim=True" if expr.keepdim else ""
        if expr.dims is None and not expr.keepdim:
            return f"torch.{expr.name}({argument})"
        return f"torch.{expr.name}({argument}, dim={dims}{keepdim})"

    def _print_ReduceExtremum(self, expr: reductions.ReduceExtremum) -> str:
        """torch.amax and torch.amin type dim as dims, not None: every dim, kept, is ()."""
        if expr.dims is None and expr.keepdim and self.is_tensor(expr.argument):
            return f"torch.{expr.name}({self._print(expr.argument)}, dim=(), keepdim=True)"
        return self._print_Reduction(expr)

    def _print_Normalization(self, expr: reductions.Normalization) -> str:
        if not self.is_tensor(expr.argument):
            raise UnprintableError(f"{expr.name}() needs an argument that depends on a tensor")
        return f"torch.{expr.name}({self._print(expr.argument)}, dim={expr.dim})"

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
        return f"{self.helpers['sum_to']}({value}, {shape}, {frame})"

    def _print_Broadcast(self, expr: broadcasts.Broadcast) -> str:
        """The value in the shape of the expression as written (Note [Cancelled shapes]).

        Cloned: a view of a named value, which the Function may also return as a saved
        value (not differentiable), would make the output not differentiable either.
        """
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
                else f"torch.broadcast_tensors({', '.join(sources)})[0]"
            )
            return f"torch.full_like({like}, {value}{self._value_dtype(shapes)})"
        return f"torch.broadcast_tensors({value}, {', '.join(sources)})[0].clone()"

    def _value_dtype(self, shapes: list[sympy.Basic]) -> str:
        """`, dtype=v.dtype` when a shape source is a boolean condition, which would make
        full_like's value a bool: the dtype of the values the conditions compare."""
        if not any(s in self.conditions or piecewise.is_condition(s) for s in shapes):
            return ""
        values = value_tensors(shapes, self.tensor_symbols, self.conditions)
        dtype = f"{self._print(values[0])}.dtype" if values else "torch.get_default_dtype()"
        return f", dtype={dtype}"

    def _print_ZerosLike(self, expr: broadcasts.ZerosLike) -> str:
        grad, shape = (self._print(arg) for arg in expr.args)
        return f"{grad}.new_zeros({shape})"


def _dims(dims: tuple[int, ...]) -> str:
    return str(dims[0]) if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"


def _install_function_dispatch() -> None:
    """Make every language function print through `_print_ElementwiseFunction`.

    sympy dispatches on the class name first, and our classes are named like the
    functions (exp, sigmoid), which StrPrinter may know under the same name.
    """
    for name in functions.FUNCTIONS:
        setattr(TorchPrinter, f"_print_{name}", TorchPrinter._print_ElementwiseFunction)
    for activation in activations.ACTIVATIONS.values():
        setattr(TorchPrinter, f"_print_{activation.__name__}", TorchPrinter._print_Activation)
    for kind in pullbacks.PULLBACKS.values():
        setattr(TorchPrinter, f"_print_{kind.__name__}", TorchPrinter._print_Pullback)
    for cls in reductions.REDUCTION_CLASSES:
        extremum = issubclass(cls, reductions.ReduceExtremum)
        method = TorchPrinter._print_ReduceExtremum if extremum else TorchPrinter._print_Reduction
        setattr(TorchPrinter, f"_print_{cls.__name__}", method)
    for normalization in reductions.NORMALIZATIONS.values():
        name = f"_print_{normalization.__name__}"
        setattr(TorchPrinter, name, TorchPrinter._print_Normalization)


_install_function_dispatch()
