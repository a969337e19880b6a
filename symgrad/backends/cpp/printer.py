"""The C++ printer: ATen's spelling of the language's own constructs.

`AtenPrinter` prints one C++ expression per formula, in the forms symgrad.backends.forms
chooses for every backend: conditions on tensors are ATen's boolean tensors
(`(x > 0) & ~c`), on numbers C++'s bools (`(lo > 0.0) && !b`); activations and pullbacks
are ATen's fused kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from symgrad.backends.cpp.arithmetic import ArithmeticPrinter, is_double
from symgrad.backends.cpp.cpu_forms import cpu_form
from symgrad.backends.cpp.spellings import ACTIVATIONS, KERNELS, is_one_operand
from symgrad.backends.forms.constructs import ConstructForms, install_dispatch
from symgrad.language import activations, dtypes, pullbacks, reductions


class AtenPrinter(ArithmeticPrinter, ConstructForms):
    """Prints expressions whose tensor symbols are known as one ATen/C++ expression."""

    printmethod = "_atencode"

    def _operand(self, expr: sympy.Basic) -> str:
        text = self._print(expr)
        return text if is_one_operand(text) else f"({text})"

    # --- Conditions and conditional values ------------------------------------------------

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

    def _spell_number_where(self, cond: sympy.Basic, a: sympy.Basic, b: sympy.Basic) -> str:
        cond_text, a_text, b_text = self._print(cond), self._print(a), self._print(b)
        if not (is_double(a) or is_double(b)):
            a_text = f"static_cast<double>({a_text})"  # in double, as every number
        return f"({cond_text} ? {a_text} : {b_text})"

    def _spell_decided_condition(self, cond: sympy.Basic, like: str) -> str:
        options = f"at::TensorOptions().dtype(at::kBool).device({like}.device())"
        return f"at::scalar_tensor({self._print(cond)}, {options})"

    def _spell_result_type(self, name: str, a: sympy.Basic) -> str:
        return f"at::result_type({name}, {self._print(a)})"

    def _spell_promote_types(self, first: str, second: str) -> str:
        return f"at::promote_types({first}, {second})"

    def _spell_scalar_tensor_on(self, text: str, dtype: str, like: str) -> str:
        options = f"at::TensorOptions().dtype({dtype}).device({like}.device())"
        return f"at::scalar_tensor({text}, {options})"

    def _spell_where(self, cond: str, a: str, b: str) -> str:
        return f"at::where({cond}, {a}, {b})"

    def _spell_to_dtype(self, tensor: str, dtype: str) -> str:
        return f"{tensor}.to({dtype})"

    def _spell_dtype_of(self, tensor: str) -> str:
        return f"{tensor}.scalar_type()"

    def _spell_threshold_backward(self, grad: str, x: str, threshold: str) -> str:
        return f"at::threshold_backward({grad}, {x}, {threshold})"

    def _spell_leaky_relu_backward(self, grad: str, x: str, slope: str) -> str:
        return f"at::leaky_relu_backward({grad}, {x}, {slope}, false)"

    # --- Kinks, activations and pullbacks -------------------------------------------------

    def _spell_relu(self, x: str, tensor: bool) -> str:
        return f"at::relu({x})" if tensor else f"std::max<double>({x}, 0.0)"

    def _spell_number_extremum(self, name: str, texts: list[str]) -> str:
        return f"std::{name[:3]}<double>({texts[0]}, {texts[1]})"

    def _spell_extremum(self, name: str, texts: list[str]) -> str:
        return f"at::{name}({texts[0]}, {texts[1]})"

    def _spell_number_clamp(self, texts: list[str]) -> str:
        return f"std::min<double>(std::max<double>({texts[0]}, {texts[1]}), {texts[2]})"

    def _spell_clamp(self, texts: list[str]) -> str:
        # at::clamp takes two optional Scalars or two optional Tensors
        return f"at::clamp({texts[0]}, {texts[1]}, {texts[2]})"

    def _spell_clamp_each(self, texts: list[str]) -> str:
        return f"at::clamp_max(at::clamp_min({texts[0]}, {texts[1]}), {texts[2]})"

    def _has_activation(self, expr: activations.Activation) -> bool:
        return ACTIVATIONS[expr.name] is not None

    def _spell_activation(
        self, expr: activations.Activation, x: str, values: Sequence[sympy.Basic]
    ) -> str:
        """Positional parameters up to the last one that is not torch's default; the
        CPU-form helper (symgrad.backends.cpp.cpu_forms) where it has one."""
        call = ACTIVATIONS[expr.name]
        assert call is not None  # _has_activation
        arguments = [x, *(self._print(value) for value in values)]
        while len(arguments) > 1 and _is_default(values, expr.parameters, len(arguments) - 2):
            arguments.pop()
        if len(arguments) == 1 and cpu_form(expr.name) is not None:
            self.used_helpers.add(expr.name)
            return f"{self.helpers.get(expr.name, expr.name)}({arguments[0]})"
        return f"{call.function}({', '.join([*arguments, *call.options])})"

    def _spell_pullback(self, expr: pullbacks.Pullback) -> str:
        """torch's backward kernel; written out where it has no derivative and grad mode
        is on (double backward), as the Python backend's helpers do."""
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

    # --- Reductions and shapes ------------------------------------------------------------

    def _spell_logsumexp_all(self, expr: reductions.Reduction) -> str:
        """Over the flattened argument, then (keepdim) one size-1 dimension per
        dimension of the argument."""
        operand = self._operand(expr.argument)
        flat = f"at::logsumexp({operand}.flatten(), at::IntArrayRef{{0}})"
        if expr.keepdim:
            return f"{flat}.reshape(std::vector<int64_t>({operand}.dim(), 1))"
        return flat

    def _spell_reduction(self, expr: reductions.Reduction, argument: str) -> str:
        keepdim = ", true" if expr.keepdim else ""
        if expr.dims is None:
            if not expr.keepdim:
                return f"at::{expr.name}({argument})"
            return f"at::{expr.name}({argument}, at::OptionalIntArrayRef(){keepdim})"
        dims = ", ".join(map(str, expr.dims))
        return f"at::{expr.name}({argument}, at::IntArrayRef{{{dims}}}{keepdim})"

    def _spell_extremum_all_kept(self, expr: reductions.Reduction, argument: str) -> str:
        return f"at::{expr.name}({argument}, at::IntArrayRef{{}}, true)"

    def _spell_normalization(self, expr: reductions.Normalization, argument: str) -> str:
        return f"at::{expr.name}({argument}, {expr.dim})"

    def _spell_broadcast_first(self, texts: list[str]) -> str:
        return f"at::broadcast_tensors({{{', '.join(texts)}}})[0]"

    def _spell_full_like(self, like: str, value: str, dtype_source: str | None) -> str:
        if dtype_source is None:
            return f"at::full_like({like}, {value})"
        options = f"{dtype_source}.options()"
        if not dtype_source:
            options = "at::TensorOptions().dtype(at::get_default_dtype())"
        return f"at::full_like({like}, {value}, {options})"

    def _spell_gather(self, argument: str, dim: int, index: str) -> str:
        return f"at::gather({argument}, {dim}, {index})"

    def _spell_scatter_add(self, source: str, shape: str, dim: int, index: str) -> str:
        zeros = self._spell_zeros(source, shape)
        return f"at::scatter_add({zeros}, {dim}, {index}, {source})"

    def _spell_reshape(self, operand: str, sizes: list[str]) -> str:
        return f"{operand}.reshape({{{', '.join(sizes)}}})"

    def _spell_reshape_to(self, operand: str, shape: str) -> str:
        return f"{operand}.reshape({shape})"

    def _spell_unsqueeze(self, operand: str, dim: int) -> str:
        return f"{operand}.unsqueeze({dim})"

    def _spell_chunk(self, operand: str, chunks: int, dim: int, piece: int) -> str:
        return f"{operand}.chunk({chunks}, {dim})[{piece}]"

    def _spell_cat(self, texts: list[str], dim: int) -> str:
        return f"at::cat({{{', '.join(texts)}}}, {dim})"

    def _spell_zeros(self, like: str, shape: str) -> str:
        return f"at::zeros({shape}, {like}.options())"

    def _spell_split_piece(self, operand: str, sizes: list[str], dim: int, piece: int) -> str:
        at = str(dim) if dim >= 0 else f"{{}}.size() - {-dim}"
        lengths = ", ".join(f"{size}[{at.format(size)}]" for size in sizes)
        return f"{operand}.split_with_sizes({{{lengths}}}, {dim})[{piece}]"

    # --- Scans and sort (symgrad.backends.forms.scans) ------------------------------------

    def _spell_cumsum(self, argument: str, dim: int) -> str:
        return f"at::cumsum({argument}, {dim})"

    def _spell_flip(self, argument: str, dim: int) -> str:
        return f"at::flip({argument}, {{{dim}}})"

    def _spell_sort(self, argument: str, dim: int, descending: bool) -> str:
        return f"std::get<0>(at::sort({argument}, {dim}, {str(descending).lower()}))"

    def _spell_argsort(self, argument: str, dim: int, descending: bool) -> str:
        return f"at::argsort({argument}, {dim}, {str(descending).lower()})"

    def _spell_arange(self, like: str, dim: int, integer: bool = False) -> str:
        options = f"{like}.options().dtype(at::kLong)" if integer else f"{like}.options()"
        return f"at::arange({like}.size({dim}), {options})"

    def _spell_expand_as(self, value: str, like: str) -> str:
        return f"{value}.expand_as({like})"

    def _spell_movedim(self, value: str, source: int, destination: int) -> str:
        return f"{value}.movedim({source}, {destination})"

    # --- Contractions (symgrad.backends.forms.contractions) -------------------------------

    def _spell_matmul(self, a: str, b: str) -> str:
        return f"at::matmul({a}, {b})"

    def _spell_einsum(self, subscripts: str, operands: list[str]) -> str:
        """The subscripts are letters, commas and '->' only: a plain C++ literal."""
        return f'at::einsum("{subscripts}", {{{", ".join(operands)}}})'

    # --- Segment sums (symgrad.backends.forms.segments) -----------------------------------

    def _spell_segment_zeros(self, like: str, dim: int, size: str) -> str:
        """A lambda called in place: ATen builds the sizes as a vector, in statements."""
        wrapped = f"at::maybe_wrap_dim({dim}, {like}.dim())"
        return (
            f"[&] {{ auto sizes = {like}.sizes().vec(); sizes[{wrapped}] = {size}; "
            f"return at::zeros(sizes, {like}.options()); }}()"
        )

    def _spell_index_add(self, zeros: str, dim: int, index: str, source: str) -> str:
        return f"at::index_add({zeros}, {dim}, {index}, {source})"

    def _spell_index_select(self, value: str, dim: int, index: str) -> str:
        return f"at::index_select({value}, {dim}, {index})"

    # --- Segment maxima (symgrad.backends.forms.segment_extrema) --------------------------

    def _spell_segment_reduce(
        self, zeros: str, dim: int, index: str, source: str, reduction: str
    ) -> str:
        """scatter_reduce, its index viewed along dim and expanded (as the Python's)."""
        wrapped = f"at::maybe_wrap_dim({dim}, {source}.dim())"
        expanded = (
            f"[&] {{ std::vector<int64_t> sizes({source}.dim(), 1); sizes[{wrapped}] = -1; "
            f"return {index}.view(sizes).expand_as({source}); }}()"
        )
        return f'at::scatter_reduce({zeros}, {dim}, {expanded}, {source}, "{reduction}", false)'

    # --- Cumulative products (symgrad.backends.forms.products) ----------------------------

    def _spell_cumprod(self, argument: str, dim: int) -> str:
        return f"at::cumprod({argument}, {dim})"

    # --- Dtype constants (symgrad.backends.forms.dtypes) ----------------------------------

    def _spell_finfo_eps(self, like: str) -> str:
        """ATen has no finfo: the eps of each floating dtype a Function takes, chosen at
        run time from the tensor's scalar type, in a lambda that reads it once."""
        epsilons = {"kDouble": "float64", "kHalf": "float16", "kBFloat16": "bfloat16"}
        choices = "".join(
            f"t.scalar_type() == at::{kind} ? {dtypes.EPSILONS[name]!r} : "
            for kind, name in epsilons.items()
        )
        value = f"{choices}{dtypes.EPSILONS['float32']!r}"
        return f"[](const at::Tensor& t) {{ return at::full({{}}, {value}, t.options()); }}({like})"

    # --- Arg extrema (symgrad.backends.forms.arg_extrema) ---------------------------------

    def _spell_arg_extremum(self, name: str, argument: str, dim: int, keepdim: bool) -> str:
        return f"at::{name}({argument}, {dim}, {'true' if keepdim else 'false'})"

    # --- Elementwise losses (symgrad.backends.forms.losses) -------------------------------

    def _spell_pointwise_loss(self, name: str, a: str, b: str | None, parameter: str) -> str:
        """On a and b broadcast first: the op sizes its result as `a`."""
        kernel = {"huber": "at::huber_loss", "smooth_l1": "at::smooth_l1_loss"}[name]
        if b is None:  # a name against a zero broadcast (no fill), else zeros of its shape
            named = a.isidentifier()
            zeros = (
                f"at::zeros({{}}, {a}.options()).expand_as({a})"
                if named
                else f"at::zeros_like({a})"
            )
            return f"{kernel}({a}, {zeros}, at::Reduction::None, {parameter})"
        pair = f"auto t = at::broadcast_tensors({{{a}, {b}}});"
        return f"[&] {{ {pair} return {kernel}(t[0], t[1], at::Reduction::None, {parameter}); }}()"

    def _spell_number_choice(self, condition: str, a: str, b: str) -> str:
        return f"({condition} ? {a} : {b})"

    # --- Layer norm (symgrad.backends.forms.layer_norms) ----------------------------------

    def _spell_layer_norm(self, argument: str, eps: str, output: int) -> str:
        shape = f"{argument}.sizes().slice({argument}.dim() - 1)"
        return f"std::get<{output}>(at::native_layer_norm({argument}, {shape}, {{}}, {{}}, {eps}))"

    def _spell_layer_norm_pair(self, xhat: str, rstd: str, argument: str, eps: str) -> str:
        shape = f"{argument}.sizes().slice({argument}.dim() - 1)"
        call = f"at::native_layer_norm({argument}, {shape}, {{}}, {{}}, {eps})"
        return f"at::Tensor {xhat}, {rstd};\nstd::tie({xhat}, std::ignore, {rstd}) = {call};"


def _is_default(
    values: Sequence[sympy.Basic], parameters: tuple[tuple[str, float], ...], index: int
) -> bool:
    """Whether parameter `index` is given as torch's default value."""
    value = values[index]
    return bool(value.is_number) and float(value) == parameters[index][1]


install_dispatch(AtenPrinter)
