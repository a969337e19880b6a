"""The Python printer: torch's spelling of the language's own constructs.

Conditionals, kinks, activations, pullbacks and reductions, in the forms that
symgrad.backends.forms chooses for every backend. sympy's own `TorchPrinter` wraps Python
numbers in torch calls, prints `Max(x, 0)` as a reduction and cannot print log1p, expm1
or erfc, so symgrad has its own printer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy

from symgrad.backends.forms.constructs import ConstructForms, install_dispatch
from symgrad.backends.python.arithmetic import ArithmeticPrinter
from symgrad.backends.python.kernels import FORWARD_FORMS, HELPER_ROLES, KERNELS, helper_role
from symgrad.language import activations, pullbacks, reductions


class TorchPrinter(ArithmeticPrinter, ConstructForms):
    """Prints expressions whose tensor symbols are known as torch/Python code."""

    printmethod = "_torchcode"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Default names of the kernel helpers; a module's emitter renames them.
        self.helpers = {**self.helpers, **{role: f"_{role}" for role in HELPER_ROLES}}
        # Call the module's CPU-form helpers for activations; off in the generated test,
        # whose reference formula is plain torch and has no helpers.
        self.forward_helpers = True

    def _operand(self, expr: sympy.Basic) -> str:
        text = self._print(expr)
        is_call = isinstance(expr, sympy.Function) and text.endswith(")")
        return text if expr.is_Symbol or is_call else f"({text})"

    # --- Conditions and conditional values ------------------------------------------------

    def _print_And(self, expr: sympy.Basic) -> str:
        joiner = " & " if self.is_tensor(expr) else " and "
        return "(" + joiner.join(self._print(arg) for arg in expr.args) + ")"

    def _print_Or(self, expr: sympy.Basic) -> str:
        joiner = " | " if self.is_tensor(expr) else " or "
        return "(" + joiner.join(self._print(arg) for arg in expr.args) + ")"

    def _print_Not(self, expr: sympy.Basic) -> str:
        operand = self._print(expr.args[0])
        return f"(~{operand})" if self.is_tensor(expr) else f"(not {operand})"

    def _condition(self, cond: sympy.Basic) -> str:
        """A condition's text; one that sympy decided is Python's True or False."""
        if isinstance(cond, (sympy.logic.boolalg.BooleanTrue, sympy.logic.boolalg.BooleanFalse)):
            return str(bool(cond))
        return self._print(cond)

    def _spell_number_where(self, cond: sympy.Basic, a: sympy.Basic, b: sympy.Basic) -> str:
        return f"({self._print(a)} if {self._condition(cond)} else {self._print(b)})"

    def _spell_decided_condition(self, cond: sympy.Basic, like: str) -> str:
        return f"torch.tensor({self._condition(cond)}, device={like}.device)"

    def _spell_result_type(self, name: str, a: sympy.Basic) -> str:
        """Spelled from `.dtype`, which torch.compile traces (torch.result_type not)."""
        if a.is_integer:
            return f"{name}.dtype"
        return f"({name}.dtype if {name}.is_floating_point() else torch.get_default_dtype())"

    def _spell_promote_types(self, first: str, second: str) -> str:
        return f"torch.promote_types({first}, {second})"

    def _spell_scalar_tensor_on(self, text: str, dtype: str, like: str) -> str:
        return f"torch.tensor({text}, dtype={dtype}, device={like}.device)"

    def _spell_where(self, cond: str, a: str, b: str) -> str:
        return f"torch.where({cond}, {a}, {b})"

    def _spell_to_dtype(self, tensor: str, dtype: str) -> str:
        return f"{tensor}.to({_unbracketed(dtype)})"

    def _spell_dtype_of(self, tensor: str) -> str:
        return f"{tensor}.dtype"

    def _spell_threshold_backward(self, grad: str, x: str, threshold: str) -> str:
        return f"torch.ops.aten.threshold_backward({grad}, {x}, {threshold})"

    def _spell_leaky_relu_backward(self, grad: str, x: str, slope: str) -> str:
        return f"torch.ops.aten.leaky_relu_backward({grad}, {x}, {slope}, False)"

    # --- Kinks, activations and pullbacks -------------------------------------------------

    def _spell_relu(self, x: str, tensor: bool) -> str:
        return f"torch.relu({x})" if tensor else f"max({x}, 0)"

    def _spell_number_extremum(self, name: str, texts: list[str]) -> str:
        return f"{name[:3]}({texts[0]}, {texts[1]})"

    def _spell_extremum(self, name: str, texts: list[str]) -> str:
        return f"torch.{name}({texts[0]}, {texts[1]})"

    def _spell_number_clamp(self, texts: list[str]) -> str:
        return f"min(max({texts[0]}, {texts[1]}), {texts[2]})"

    def _spell_clamp(self, texts: list[str]) -> str:
        return f"torch.clamp({texts[0]}, {texts[1]}, {texts[2]})"

    def _spell_clamp_each(self, texts: list[str]) -> str:
        return f"torch.clamp(torch.clamp({texts[0]}, min={texts[1]}), max={texts[2]})"

    def _has_activation(self, expr: activations.Activation) -> bool:
        return True

    def _spell_activation(
        self, expr: activations.Activation, x: str, values: Sequence[sympy.Basic]
    ) -> str:
        """Keywords for the parameters that are not torch's defaults; the module's CPU-form
        helper (symgrad.backends.python.kernels) where it has one."""
        arguments = [x]
        for (keyword, default), value in zip(expr.parameters, values, strict=True):
            if not (value.is_number and float(value) == default):
                arguments.append(f"{keyword}={self._print(value)}")
        if expr.torch_options:
            arguments.append(expr.torch_options)
        if self.forward_helpers and expr.name in FORWARD_FORMS and len(arguments) == 1:
            self.used_helpers.add(expr.name)
            return f"{self.helpers[expr.name]}({arguments[0]})"
        return f"{expr.torch_function}({', '.join(arguments)})"

    def _spell_pullback(self, expr: pullbacks.Pullback) -> str:
        """torch's backward kernel; through a helper where it has no derivative."""
        kernel = KERNELS[expr.function]
        call = kernel.call
        if not kernel.differentiable:
            role = helper_role(expr.function)
            self.used_helpers.add(role)
            call = self.helpers[role] + "({grad}, {point})"
        return call.format(grad=self._print(expr.grad), point=self._print(expr.point))

    # --- Reductions and shapes ------------------------------------------------------------

    def _spell_logsumexp_all(self, expr: reductions.Reduction) -> str:
        argument = self._print(expr.argument)
        operand = self._operand(expr.argument)
        if expr.keepdim:
            every_dim = f"tuple(range({operand}.dim()))"
            return f"torch.logsumexp({argument}, dim={every_dim}, keepdim=True)"
        return f"torch.logsumexp({operand}.flatten(), 0)"

    def _spell_reduction(self, expr: reductions.Reduction, argument: str) -> str:
        if expr.dims is None and not expr.keepdim:
            return f"torch.{expr.name}({argument})"
        dims = "None" if expr.dims is None else _dims(expr.dims)
        keepdim = ", keepdim=True" if expr.keepdim else ""
        return f"torch.{expr.name}({argument}, dim={dims}{keepdim})"

    def _spell_extremum_all_kept(self, expr: reductions.Reduction, argument: str) -> str:
        return f"torch.{expr.name}({argument}, dim=(), keepdim=True)"

    def _spell_normalization(self, expr: reductions.Normalization, argument: str) -> str:
        return f"torch.{expr.name}({argument}, dim={expr.dim})"

    def _spell_broadcast_first(self, texts: list[str]) -> str:
        return f"torch.broadcast_tensors({', '.join(texts)})[0]"

    def _spell_full_like(self, like: str, value: str, dtype_source: str | None) -> str:
        if dtype_source is None:
            return f"torch.full_like({like}, {value})"
        dtype = f"{dtype_source}.dtype" if dtype_source else "torch.get_default_dtype()"
        return f"torch.full_like({like}, {value}, dtype={dtype})"

    def _spell_gather(self, argument: str, dim: int, index: str) -> str:
        return f"torch.gather({argument}, {dim}, {index})"

    def _spell_scatter_add(self, source: str, shape: str, dim: int, index: str) -> str:
        return f"{self._spell_zeros(source, shape)}.scatter_add({dim}, {index}, {source})"

    def _spell_reshape(self, operand: str, sizes: list[str]) -> str:
        return f"{operand}.reshape({', '.join(sizes)})"

    def _spell_reshape_to(self, operand: str, shape: str) -> str:
        return f"{operand}.reshape({shape})"

    def _spell_unsqueeze(self, operand: str, dim: int) -> str:
        return f"{operand}.unsqueeze({dim})"

    def _spell_chunk(self, operand: str, chunks: int, dim: int, piece: int) -> str:
        return f"{operand}.chunk({chunks}, {dim})[{piece}]"

    def _spell_cat(self, texts: list[str], dim: int) -> str:
        return f"torch.cat([{', '.join(texts)}], {dim})"

    def _spell_zeros(self, like: str, shape: str) -> str:
        return f"{like}.new_zeros({shape})"

    def _spell_split_piece(self, operand: str, sizes: list[str], dim: int, piece: int) -> str:
        lengths = ", ".join(f"{size}[{dim}]" for size in sizes)
        return f"{operand}.split([{lengths}], {dim})[{piece}]"

    # --- Scans and sort (symgrad.backends.forms.scans) ------------------------------------

    def _spell_cumsum(self, argument: str, dim: int) -> str:
        return f"torch.cumsum({argument}, {dim})"

    def _spell_flip(self, argument: str, dim: int) -> str:
        return f"torch.flip({argument}, ({dim},))"

    def _spell_sort(self, argument: str, dim: int, descending: bool) -> str:
        return f"torch.sort({argument}, dim={dim}, descending={descending}).values"

    def _spell_argsort(self, argument: str, dim: int, descending: bool) -> str:
        return f"torch.argsort({argument}, dim={dim}, descending={descending})"

    def _spell_arange(self, like: str, dim: int, integer: bool = False) -> str:
        dtype = "torch.int64" if integer else f"{like}.dtype"
        return f"torch.arange({like}.size({dim}), dtype={dtype}, device={like}.device)"

    def _spell_expand_as(self, value: str, like: str) -> str:
        return f"{value}.expand_as({like})"

    def _spell_movedim(self, value: str, source: int, destination: int) -> str:
        return f"{value}.movedim({source}, {destination})"

    # --- Contractions (symgrad.backends.forms.contractions) -------------------------------

    def _spell_matmul(self, a: str, b: str) -> str:
        return f"torch.matmul({a}, {b})"

    def _spell_einsum(self, subscripts: str, operands: list[str]) -> str:
        """The subscripts are letters, commas and '->' only: a plain string literal."""
        return f'torch.einsum("{subscripts}", {", ".join(operands)})'

    # --- Segment sums (symgrad.backends.forms.segments) -----------------------------------

    def _spell_segment_zeros(self, like: str, dim: int, size: str) -> str:
        head = "" if dim == 0 else f"*{like}.shape[:{dim}], "
        tail = "" if dim == -1 else f", *{like}.shape[{dim + 1}:]"
        return f"{like}.new_zeros(({head}{size}{tail}))"

    def _spell_index_add(self, zeros: str, dim: int, index: str, source: str) -> str:
        return f"{zeros}.index_add({dim}, {index}, {source})"

    def _spell_index_select(self, value: str, dim: int, index: str) -> str:
        return f"torch.index_select({value}, {dim}, {index})"

    # --- Segment maxima (symgrad.backends.forms.segment_extrema) --------------------------

    def _spell_segment_reduce(
        self, zeros: str, dim: int, index: str, source: str, reduction: str
    ) -> str:
        """scatter_reduce, whose index has the source's shape: the 1-d one viewed along
        dim and expanded (index_reduce would do without, but warns that it is beta)."""
        ones = f"{-dim - 1}" if dim < 0 else f"({source}.dim() - {dim + 1})"
        viewed = index if dim == -1 else f"{index}.view((-1,) + (1,) * {ones})"
        expanded = f"{viewed}.expand_as({source})"
        options = f'"{reduction}", include_self=False'
        return f"{zeros}.scatter_reduce({dim}, {expanded}, {source}, {options})"

    # --- Cumulative products (symgrad.backends.forms.products) ----------------------------

    def _spell_cumprod(self, argument: str, dim: int) -> str:
        return f"torch.cumprod({argument}, {dim})"

    # --- Dtype constants (symgrad.backends.forms.dtypes) ----------------------------------

    def _spell_finfo_eps(self, like: str) -> str:
        return f"{like}.new_full((), torch.finfo({like}.dtype).eps)"

    # --- Arg extrema (symgrad.backends.forms.arg_extrema) ---------------------------------

    def _spell_arg_extremum(self, name: str, argument: str, dim: int, keepdim: bool) -> str:
        kept = ", keepdim=True" if keepdim else ""
        return f"torch.{name}({argument}, dim={dim}{kept})"

    # --- Elementwise losses (symgrad.backends.forms.losses) -------------------------------

    def _spell_pointwise_loss(self, name: str, a: str, b: str | None, parameter: str) -> str:
        """The ATen op (reduction 0: none) under torch.nn.functional's loss, on a and b
        broadcast first, as the functional does (the op sizes its result as `a`), without
        the functional's size warning."""
        op = {"huber": "huber_loss", "smooth_l1": "smooth_l1_loss"}[name]
        if b is None:  # a name against a zero broadcast (no fill), else zeros of its shape
            zeros = (
                f"{a}.new_zeros(()).expand_as({a})"
                if a.isidentifier()
                else f"torch.zeros_like({a})"
            )
            return f"torch.ops.aten.{op}({a}, {zeros}, 0, {parameter})"
        return f"torch.ops.aten.{op}(*torch.broadcast_tensors({a}, {b}), 0, {parameter})"

    def _spell_number_choice(self, condition: str, a: str, b: str) -> str:
        return f"({a} if {condition} else {b})"

    # --- Layer norm (symgrad.backends.forms.layer_norms) ----------------------------------

    def _spell_layer_norm(self, argument: str, eps: str, output: int) -> str:
        shape = f"{argument}.shape[-1:]"
        return f"torch.native_layer_norm({argument}, {shape}, None, None, {eps})[{output}]"

    def _spell_layer_norm_pair(self, xhat: str, rstd: str, argument: str, eps: str) -> str:
        """`_` is reserved: no spec names a value so (symgrad.frontend.names)."""
        call = f"torch.native_layer_norm({argument}, {argument}.shape[-1:], None, None, {eps})"
        return f"{xhat}, _, {rstd} = {call}"


def _dims(dims: tuple[int, ...]) -> str:
    return str(dims[0]) if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"


install_dispatch(TorchPrinter)


def _unbracketed(text: str) -> str:
    """`text` without a pair of parentheses around all of it (a sole call argument needs
    none: ruff's UP034)."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for n, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and n < len(text) - 1:
            return text  # the first bracket closes before the end: (a) + (b)
    return text[1:-1]
