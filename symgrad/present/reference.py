"""The spec reference page (docs/spec-reference.md), written from the code's own tables.

Every key the parser accepts and every function the language knows is listed from the
tables the parser and the language read, so the page cannot drift from the code: a test
regenerates it and compares. Regenerate it with `python -m symgrad.present.reference`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from symgrad.backends.python.spellings import SPELLINGS
from symgrad.frontend import checks, parse
from symgrad.frontend.model import LOW_PRECISION_DTYPES, InputType
from symgrad.language import activations, functions, piecewise, reductions

# What each key means, by section. A key without an entry fails the reference's test.
KEY_MEANINGS: Mapping[str, Mapping[str, str]] = {
    "spec": {
        "name": "required; the CamelCase class name of the Function",
        "module": "the module's and the convenience function's name "
        "(default: the name in snake_case, acronyms kept together)",
        "doc": "the docstring of the class and the module",
        "mode": "`eager` runs op by op; `fused` compiles forward and backward once "
        "with torch.compile",
        "save": "what the backward saves: `balanced` (default) within eager autograd's "
        "bytes; `memory` the inputs and per-row statistics only, recomputing the rest; "
        "`speed` every value the backward would recompute (the choice on a GPU), which "
        "may exceed eager's bytes",
        "custom_op": "`true` also registers the forward as the operator "
        "`symgrad::<module>` (torch.library.custom_op)",
        "inplace": "`true` also writes `<module>_` and `<Name>_`, which overwrite the "
        "first tensor input with the output and return it (mark_dirty); refused where "
        "the backward would read the overwritten value",
        "target": "the backend that writes the files (`symgrad targets` lists them; "
        "default `python`; `symgrad gen --target` overrides it)",
        "inputs": "required; the forward's arguments in order: `name: type` or "
        "`name: {type: ..., ...}`",
        "where": "named intermediates in order; each may use inputs and earlier names",
        "outputs": "required; the forward's results in order: `name: expression` or "
        "`name: {expr: ..., differentiable: false}`",
        "gradients": "your own `d output / d input` per output and input, replacing "
        "symgrad's (straight-through estimators); one that reads `grad` is the input's "
        "whole gradient, of the incoming gradient summed to the input's shape "
        "(`clamp(grad, -1, 1)`), and the Function then has no jvp",
        "test": "how the generated test samples and compares (below)",
    },
    "input": {
        "type": "one of " + ", ".join(f"`{t.value}`" for t in InputType),
        "assume": "sympy assumptions on the symbol: "
        + ", ".join(f"`{a}`" for a in parse.ASSUMPTIONS),
        "shape": "tensors only; the shape the generated test samples (`[]`: 0-d); "
        "required for an `index` (an int64 tensor that `gather` reads or a comparison "
        "reads, no gradient)",
        "domain": "`[low, high]`: the interval the generated test samples from",
        "requires_grad": "tensors only; `false`: the input never gets a gradient",
        "default": "numbers only; a default value (inputs with defaults come last); for "
        "a `str` input, one of its choices",
        "choices": "`str` inputs only, required: the strings the input may be, e.g. "
        '`[none, sum, mean]`; the spec reads it only as `name == "mean"` (or `!=`), a '
        "condition of `where`",
        "optional": "`float` inputs only: `true` makes the input optional (default None); "
        "`given(name)` is the condition that it was passed, and the input may be read only "
        "where that holds",
    },
    "output": {
        "expr": "the output's expression",
        "differentiable": "`false` marks an output without gradient "
        "(ctx.mark_non_differentiable): an index, a mask",
    },
    "test": {
        "dtypes": "the low-precision dtypes checked against float64: a list of "
        + ", ".join(f"`{d}`" for d in LOW_PRECISION_DTYPES)
        + " (default: all)",
        "skip": "`{dtype: reason}`: checked dtypes the test skips, with the reason",
        "tolerances": "`{dtype: {rtol: ..., atol: ...}}`: fixed tolerances per dtype "
        "(float64 included), replacing the defaults",
        "shapes": "`{input: [sizes]}`: test shapes, as `inputs.<name>.shape`",
        "domains": "`{input: [low, high]}`: test domains, as `inputs.<name>.domain`",
        "points": "input draws that gradcheck and gradgradcheck run on (1 to 20; default 1)",
    },
}

_SECTIONS = (
    ("Top level", "spec", parse.TOP_KEYS),
    ("An input (`inputs.<name>`)", "input", parse.INPUT_KEYS),
    ("An output (`outputs.<name>`, long form)", "output", parse.OUTPUT_KEYS),
    ("The test section (`test:`)", "test", checks.KEYS),
)


def spec_reference() -> str:
    """The reference page as Markdown."""
    lines = [
        "# Spec reference",
        "",
        "Generated from symgrad's own tables by `python -m symgrad.present.reference`: do not"
        " edit. The README's [spec section](../README.md#the-spec-version-1) explains them"
        " with examples.",
    ]
    for title, section, keys in _SECTIONS:
        lines += ["", f"## {title}", "", "| key | meaning |", "| --- | --- |"]
        lines += [f"| `{key}` | {KEY_MEANINGS[section][key]} |" for key in keys]
    lines += ["", *_functions_section()]
    return "\n".join(lines) + "\n"


_LOSSES = (
    "`huber(d, delta)` and `smooth_l1(d, beta)` are the losses of a difference `d = a - b`:"
    " torch's kernel of `a` against `b` (against zeros where `d` is no difference), backward"
    " `clamp(d, -delta, delta)` (`clamp(d / beta, -1, 1)`, `sign(d)` at beta 0) times the"
    " gradient. A constant delta must be positive and beta at least 0, as torch has them; a"
    " float input outside that range gives the formula's values, chosen once per call."
    " Written as `where(abs(d) < delta, 0.5 * d**2, delta * (abs(d) - 0.5 * delta))` (or"
    " smooth-L1's `0.5 * d**2 / beta, abs(d) - 0.5 * beta`), the formula is computed as the"
    " loss."
)


_LAYER_NORM = (
    "- `layer_norm(e, eps=1e-5)`: `e` normalised over its last dim, `(e - mean) / sqrt(var +"
    " eps)` with the biased variance, by `torch.native_layer_norm` (no weight or bias: write"
    " `layer_norm(x, eps) * w + b`); eps is a number. The backward reads the output and the"
    " per-row rstd. Written out, `xc = x - mean(x, dim=-1, keepdim=True)` times `1 /"
    " sqrt(mean(xc**2, dim=-1, keepdim=True) + eps)` (or `rsqrt`, `** -0.5`) is computed as"
    " `layer_norm(x, eps)`; over another dim or without keepdim it stays as written."
)


def _functions_section() -> list[str]:
    lines = ["## Functions", "", "### Elementwise", "", "| function | torch | also spelled |"]
    lines.append("| --- | --- | --- |")
    for info in functions.FUNCTIONS.values():
        call = f"{info.name}({_placeholders(info.arity)})"
        torch = SPELLINGS[info.name].torch.format(*_placeholders(info.arity).split(", "))
        lines.append(f"| `{call}` | `{torch}` | {_spellings(info.aliases)} |")
    lines += ["", "### Activations (torch.nn.functional)", ""]
    lines += ["| function | torch | also spelled |", "| --- | --- | --- |"]
    aliases = _aliases_of(activations.ACTIVATION_ALIASES)
    for cls in activations.ACTIVATIONS.values():
        parameters = "".join(f", {key}={default!r}" for key, default in cls.parameters)
        options = f", {cls.torch_options}" if cls.torch_options else ""
        torch = f"{cls.torch_function}(x{parameters}{options})"
        call = f"{cls.name}(x{parameters})"
        lines.append(f"| `{call}` | `{torch}` | {_spellings(aliases.get(cls.name, ()))} |")
    lines += ["", _LOSSES]
    lines += ["", "### Conditionals and kinks", "", "| function | also spelled |", "| --- | --- |"]
    aliases = _aliases_of(piecewise.CONDITIONAL_ALIASES)
    for name, (arity, _) in piecewise.CONDITIONAL_FUNCTIONS.items():
        arguments = "cond, a, b" if name == "where" else _placeholders(arity)
        lines.append(f"| `{name}({arguments})` | {_spellings(aliases.get(name, ()))} |")
    lines.append("| `Piecewise((a, cond), ..., (z, True))` | |")
    lines += ["", "### Reductions and normalizations", ""]
    lines += [f"- `{name}(e, dim=None, keepdim=False)`" for name in reductions.REDUCTIONS]
    lines += [f"- `{name}(e, dim)`" for name in reductions.NORMALIZATIONS]
    lines.append(_LAYER_NORM)
    lines += ["", "### Gathers (index inputs)", ""]
    lines += [
        "- `gather(e, dim, index)`, also spelled `take_along_dim(e, index, dim)`: "
        "`torch.gather`, the values of `e` at an index input's positions along `dim`, "
        "in the index's shape; its gradient is `scatter_add` into zeros of `e`'s shape. "
        "The index is an input of `type: index` (positions `0 <= i < size`), by name, an "
        "argmax/argmin, or a view or `where` of those: `unsqueeze(target, -1)` gathers "
        "a class target's logit, `where(target != -100, target, 0)` a safe position "
        "for an ignored row (examples/liger_cross_entropy.yaml).",
        "- `segment_sum(e, index, dim, size)`: `index_add` into zeros, slice `k` of `e` "
        "along `dim` added to segment `index[k]`; `index` is a 1-d index input with one "
        "position per slice, `size` a positive integer or an `int` input with a default. "
        "Its gradient is `index_select` of the gradient at `index`.",
        "- `index_select(e, dim, index)`: `torch.index_select`, the slices of `e` along "
        "`dim` at a 1-d index input's positions (a slice may be read many times or never). "
        "Its gradient is the segment sum (`index_add`) of the gradient into zeros of "
        "`e`'s shape.",
        "- `segment_amax(e, index, dim, size)`: the maximum of the slices of `e` that go to "
        "each segment, as `segment_sum` reads `index` and `size`: `scatter_reduce(dim, "
        'index, e, "amax", include_self=False)` on zeros (the index expanded), so an '
        "empty segment is 0, as torch leaves it. Its gradient is shared evenly among the "
        "slices tied for a segment's "
        "maximum, as amax's.",
        "- `finfo_eps(x)`: `torch.finfo(x.dtype).eps` read at call time, float32's in "
        "float32 and float64's in float64, as a 0-d tensor of `x`'s dtype on its device "
        "(in C++ chosen from `x.scalar_type()`); `x` is a tensor input, by name. It is "
        "constant for differentiation.",
        "- Class targets: an index input may be compared, a condition without gradient: "
        "`where(target != ignore_index, loss, 0)` keeps the rows a loss counts, "
        "`sum(where(target != ignore_index, 1, 0))` counts them (an int64 count; a mean "
        "over 0 rows is nan, as `F.cross_entropy`'s), and "
        "`where(position(x, -1) == unsqueeze(target, -1), x, 0)` is a one-hot mask of "
        "the classes (examples/sigmoid_focal_loss.yaml; to pick the target's value, "
        "`gather` it); a `position` compared with an "
        "index input is int64, so the mask is exact at any class count in any dtype.",
    ]
    lines += ["", "### Arg extrema and values along a dim", ""]
    lines += [
        "- `argmax(e, dim, keepdim=False)`, `argmin(...)`: `torch.argmax`/`torch.argmin` "
        "along one dim, int64 positions (the first among ties), no gradient. They are "
        "indices: write them where `gather`, `take_along_dim`, `segment_sum` or "
        "`index_select` read an index, or as a `where` name's whole value and that name "
        "there; anywhere else they are refused. The forward computes them once and the "
        "backward reads them saved.",
        "- `max(e, dim=d, keepdim=False)`, `min(...)`: the values of `torch.max(e, d)` "
        "(`torch.min`), `e` gathered at its argmax (argmin); the gradient goes to that one "
        "position, torch's rule (amax shares it among ties). Without `dim=`, `max(a, b)` "
        "is the elementwise maximum.",
    ]
    lines += ["", "### Views, chunks and cats", ""]
    lines += [
        "- `reshape(e, [1, -1, 1, 1])`, also spelled `view`: `e` in another shape, one size "
        "may be -1; its gradient is reshaped back to `e`'s shape.",
        "- `unsqueeze(e, dim)`: a size-1 dimension inserted at `dim` "
        "(`unsqueeze(a, 1) - unsqueeze(b, 0)` is `a[:, None] - b[None]`).",
        "- `chunk(e, chunks, dim)[i]`: piece `i` of `torch.chunk`; `chunks` must divide the "
        "size of `dim` in the test shapes. The gradient of `e` is one `cat` of the pieces' "
        "gradients, zeros for a piece the formula does not read.",
        "- `cat([a, b, ...], dim)`: `torch.cat`; each piece's gradient is its slice of the "
        "gradient. A view or cat whose shapes cannot fit in the test shapes is refused "
        "where it is written.",
    ]
    lines += ["", "### Scans and sort", ""]
    lines += [
        "- `cumsum(e, dim)`: `torch.cumsum`; its gradient is the reversed cumulative sum, "
        "`flip(cumsum(flip(g, dim), dim), dim)`.",
        "- `cumprod(e, dim)`: `torch.cumprod`; its gradient is the reversed cumulative sum "
        "of `g * cumprod(e, dim)` over `e` where `e` is not 0, and at a line's first and "
        "second zeros the products that skip them, by cumprods with those zeros set to 1: "
        "exact at first and second order with zeros, without loops.",
        "- `flip(e, dim)`: `torch.flip` along one dim; its own gradient.",
        "- `sort(e, dim=-1, descending=False)`: the values of `torch.sort`; its gradient "
        "is scattered back (`scatter_add`) to the positions `torch.argsort` gives.",
        "- `position(e, dim)`: 0, 1, ... along `dim`, broadcast like `e`, in its dtype "
        "(`torch.arange` along the dim); no gradient. `1 + position(e, dim)` counts 1..K.",
    ]
    lines += ["", "### Contractions", ""]
    lines += [
        '- `einsum("ij,jk->ik", a, b, ...)`: `torch.einsum`, the sum of products over the '
        "letters the output drops. The subscripts are letters, one group per operand "
        "separated by commas, then `->` and the output's letters (always written); a letter "
        "repeated within one operand (a diagonal) or in the output, `...`, spaces and "
        "anything else are refused. Each letter has one size in every operand (no "
        "broadcasting). A transpose is written in the subscripts: "
        '`einsum("nd,kd->nk", x, e)` is `x @ e.T`.',
        '- `matmul(a, b)`: the product of two matrices, `einsum("ij,jk->ik", a, b)`, '
        "computed by `torch.matmul`.",
        "- Each operand's gradient is the einsum of the incoming gradient with the other "
        "operands, and the jvp the sum of einsums with one tangent each: contractions, "
        "never an outer product. A letter that one operand alone has and the output drops "
        "is summed out of that operand first.",
        "",
        "### Options",
        "",
        '- `name == "choice"`, `name != "choice"` on a `str` input, `given(name)` on an '
        "optional `float` input, and a `bool` input used directly as a condition "
        "(`where(flag, a, b)`) are options: decided in Python, never in a tensor `where`. "
        "The spec is specialised once per combination of option values before it is "
        "differentiated: each `where` on an option keeps its taken branch only, so the "
        "variants may differ in shape (a reduction `none` keeps the elements, `sum` is "
        "0-d) and each has its own exact derivative. The Python module holds one Function "
        "per variant (`<Name><Choice>`, e.g. `KLDivSum`) and the convenience function, "
        "which takes the options as keywords with their defaults, refuses a string that is "
        "no choice, and calls the variant they select. The C++ target holds the same "
        "variants in one source, behind a dispatcher operator that takes the options with "
        "their C++ types and refuses a string that is no choice (docs/cpp.md).",
    ]
    return lines


def _placeholders(arity: int) -> str:
    return ", ".join(("x", "y", "z")[:arity]) if arity <= 3 else ", ".join(["x"] * arity)


def _aliases_of(aliases: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """name -> its other spellings, from an alias -> name table."""
    result: dict[str, tuple[str, ...]] = {}
    for alias, name in aliases.items():
        result[name] = (*result.get(name, ()), alias)
    return result


def _spellings(names: Iterable[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


if __name__ == "__main__":
    print(spec_reference(), end="")
