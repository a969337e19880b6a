"""The validated spec: frozen dataclasses that every later stage reads.

Design principles:
- A `Spec` is built only by `symgrad.frontend.parse` and is valid by construction: names are
  unique identifiers, every expression refers to declared names, `where` intermediates
  are ordered so each uses only earlier ones.
- Expressions are sympy trees over the spec's `sympy.Symbol`s and symgrad's own
  elementwise functions (`symgrad.language.functions`), never strings.
- Each part keeps the location it came from, so later stages can still point at it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import sympy

from symgrad.errors import Location


class InputType(enum.Enum):
    """The kind of value an input takes."""

    TENSOR = "tensor"
    FLOAT = "float"
    INT = "int"
    BOOL = "bool"
    # An int64 tensor of positions, read only by gather (Note [Index inputs] in
    # symgrad.language.indexing): no gradient, a declared shape.
    INDEX = "index"
    # A string among declared choices, decided in Python (Note [Option conditions] in
    # symgrad.language.options): it selects a formula, never enters one.
    STR = "str"


Number = float | int | bool


@dataclass(frozen=True)
class Input:
    """One argument of the generated forward, in order."""

    # The argument name, also the name of its sympy symbol.
    name: str
    type: InputType
    # The real symbol standing for the input in expressions (carries the assumptions).
    symbol: sympy.Symbol
    # False for non-tensors and for tensors declared `requires_grad: false`.
    differentiable: bool
    # The default value, or None when the argument is required.
    default: Number | None
    # The shape the generated test samples, or None for the default shape.
    shape: tuple[int, ...] | None
    # The closed interval the generated test samples from, or None for the default.
    domain: tuple[float, float] | None
    # sympy assumptions declared on the symbol, e.g. ("positive",).
    assumptions: tuple[str, ...]
    location: Location
    # A string input's choices, in the spec's order; empty for every other type.
    choices: tuple[str, ...] = ()
    # A string input's default choice, or None when the argument is required.
    default_choice: str | None = None
    # True for a number declared `optional: true`: None (its default) leaves it out.
    optional: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not None or self.default_choice is not None or self.optional

    @property
    def is_tensor(self) -> bool:
        return self.type in (InputType.TENSOR, InputType.INDEX)

    @property
    def is_index(self) -> bool:
        return self.type is InputType.INDEX


@dataclass(frozen=True)
class Intermediate:
    """A named value of the forward (`where` entry), usable by later expressions."""

    name: str
    symbol: sympy.Symbol
    expr: sympy.Expr
    location: Location


@dataclass(frozen=True)
class Output:
    """One value returned by the forward, in order."""

    name: str
    symbol: sympy.Symbol
    expr: sympy.Expr
    location: Location
    # False for outputs marked `differentiable: false` (ctx.mark_non_differentiable).
    differentiable: bool = True


@dataclass(frozen=True)
class GradientOverride:
    """`gradients[output][input]`: the elementwise d output / d input to use instead, or,
    where it reads `grad`, the input's whole gradient from the output."""

    output: Output
    input: Input
    # Over inputs, intermediates and outputs; the backward multiplies it by grad_output,
    # unless it reads INCOMING_GRAD (Note [Overrides that read grad]).
    expr: sympy.Expr
    location: Location

    @property
    def reads_grad(self) -> bool:
        return INCOMING_GRAD in self.expr.free_symbols


# Note [Overrides that read grad]: an override that reads `grad` gives the input's
# gradient itself, a function of the output's incoming gradient summed to the input's
# shape (kornia's straight-through `grad_fn`, a clipped gradient), not a derivative to
# multiply by it. It has no Jacobian, so a Function with one has no jvp. A Dummy: no
# name a spec declares is this symbol (a spec's own `grad` shadows it).
INCOMING_GRAD = sympy.Dummy("grad", real=True)


# The dtypes a generated test checks besides float64 (which gradcheck needs).
LOW_PRECISION_DTYPES = ("float32", "float16", "bfloat16")
TEST_DTYPES = ("float64", *LOW_PRECISION_DTYPES)


@dataclass(frozen=True)
class Tolerance:
    """Absolute and relative tolerance of a comparison, as torch.testing.assert_close."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class Checks:
    """The spec's `test:` section: what the generated test checks, and how closely."""

    # Low-precision dtypes whose values and gradients are compared with float64's.
    dtypes: tuple[str, ...] = LOW_PRECISION_DTYPES
    # (dtype, reason): checked dtypes the test skips, saying why.
    skips: tuple[tuple[str, str], ...] = ()
    # (dtype, tolerance): fixed tolerances replacing the default comparison in that dtype.
    tolerances: tuple[tuple[str, Tolerance], ...] = ()
    # How many random input draws gradcheck and gradgradcheck run on.
    points: int = 1


@dataclass(frozen=True)
class Target:
    """The backend a spec names with `target:`, and where it names it."""

    name: str
    location: Location


@dataclass(frozen=True)
class Spec:
    """A whole function: its names, inputs, intermediates and outputs."""

    # CamelCase name of the generated autograd.Function class.
    name: str
    # snake_case module name and name of the convenience function.
    module: str
    # Docstring text; empty when the spec gives none.
    doc: str
    inputs: tuple[Input, ...]
    intermediates: tuple[Intermediate, ...]
    outputs: tuple[Output, ...]
    # Where the spec came from, as shown in the generated header (never absolute).
    source: str
    # The user's own partial derivatives (straight-through estimators and the like).
    overrides: tuple[GradientOverride, ...] = ()
    # "eager" runs forward and backward op by op; "fused" compiles each with
    # torch.compile once, on first use, so that each runs as few fused kernels.
    mode: str = "eager"
    # True: also register the forward as the operator `symgrad::<module>`
    # (torch.library.custom_op with register_autograd), which torch.export keeps opaque.
    custom_op: bool = False
    # How the generated test checks the Function (the spec's `test:` section).
    checks: Checks = Checks()
    # The backend the spec asks for; None: the caller's choice (`python` by default).
    target: Target | None = None
    # Where the spec says `inplace: true`, asking also for the variant `<module>_` that
    # overwrites its first tensor input (symgrad.ad.inplace); None: no such variant.
    inplace: Location | None = None
    # What the backward saves against what it recomputes: "balanced", "memory" or
    # "speed" (Note [Save choices] in symgrad.ad.saving).
    save: str = "balanced"

    @property
    def tensor_inputs(self) -> tuple[Input, ...]:
        return tuple(i for i in self.inputs if i.is_tensor)

    @property
    def differentiable_inputs(self) -> tuple[Input, ...]:
        return tuple(i for i in self.inputs if i.differentiable)

    def override(self, output: Output, item: Input) -> GradientOverride | None:
        """The user's d output / d input, if the spec gives one."""
        for override in self.overrides:
            if override.output == output and override.input == item:
                return override
        return None
