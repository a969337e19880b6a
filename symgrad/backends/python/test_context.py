"""The context of the generated test: sampled inputs, boundaries, references, tolerances."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

import sympy
from sympy.core.relational import Relational

from symgrad.ad import guards, inplace
from symgrad.ad.ir import Derived, Namer
from symgrad.backends.base import Provenance
from symgrad.backends.python.contexts import InplaceTest, Sample, TestContext
from symgrad.backends.python.module_context import custom_op_context, has_jvp
from symgrad.backends.python.printer import TorchPrinter
from symgrad.backends.python.text import docstring, header
from symgrad.frontend import indices
from symgrad.frontend.domains import default_domain, default_shape
from symgrad.frontend.model import INCOMING_GRAD, Input, InputType, Spec
from symgrad.language import functions, piecewise


def _boundaries(spec: Spec, test_values: Mapping[str, str]) -> list[tuple[str, str]]:
    """(input, value) for each branch boundary or kink of a tensor input at a number.

    These are the points the generated test probes: where(x > lo, ...) at lo,
    relu(x) and abs(x) at 0, clamp(x, lo, hi) at lo and hi, max(x, c) at c.
    """
    # An index input holds positions: probing it with fractions around a number is no test.
    tensors = {i.symbol: i for i in spec.tensor_inputs if not i.is_index}
    numbers = {i.symbol: sympy.sympify(test_values[i.name]) for i in spec.inputs if not i.is_tensor}
    found: dict[tuple[str, str], None] = {}

    def add(side: sympy.Basic, other: sympy.Basic) -> None:
        if side in tensors and not other.free_symbols & tensors.keys():
            value = sympy.sympify(other).xreplace(numbers)
            if value.is_number and value.is_finite and value.is_real:
                found[(tensors[side].name, repr(float(value)))] = None

    for expr in [*(i.expr for i in spec.intermediates), *(o.expr for o in spec.outputs)]:
        for relation in expr.atoms(Relational):
            add(relation.lhs, relation.rhs)
            add(relation.rhs, relation.lhs)
        for kink in expr.atoms(piecewise.Kink):
            for argument, value in kink.breakpoints():
                add(argument, value)
        for call in expr.atoms(functions.ElementwiseFunction):
            if type(call).__name__ in ("abs", "sign"):
                add(call.args[0], sympy.Integer(0))
    return list(found)


def unique_names(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _overridden_reference(spec: Spec, printer: TorchPrinter) -> list[str]:
    """Reference outputs whose gradient follows the spec's overrides.

    An output y with an override O for input x is recomputed as
    y(x.detach()) + (x - x.detach()) * O.detach(): the same value, and autograd then
    gives grad_y * O for x (summed over broadcasting), and y's own gradient for the rest.
    An override that reads grad adds zeros whose gradient a hook maps to O for x
    (`_gradient_through` in the test, Note [Overrides that read grad]).
    """
    values = {i.symbol: i.expr for i in spec.intermediates}
    values.update({o.symbol: o.expr for o in spec.outputs})

    def inline(expr: sympy.Expr) -> sympy.Expr:
        while expr.free_symbols & values.keys():
            expr = expr.xreplace(values)
        return expr

    lines = []
    for output in spec.outputs:
        overrides = [o for o in spec.overrides if o.output == output]
        if not overrides:
            continue
        detached = {o.input.symbol: sympy.Symbol(f"{o.input.name}.detach()") for o in overrides}
        # The detached inputs are tensors to the one printer of the test, so that what it
        # prints and the imports it asks for (uses_math) come from the same place.
        printer.tensor_symbols |= frozenset(detached.values())
        tensors = printer.tensor_symbols
        formula = guards.guard_branches(inline(output.expr).xreplace(detached), tensors)
        terms = [printer.doprint(formula)]
        hooked = []
        for override in overrides:
            if override.reads_grad:
                given = inline(override.expr).xreplace({**detached, INCOMING_GRAD: _GRAD})
                printer.tensor_symbols |= {_GRAD}
                function = printer.doprint(guards.guard_branches(given, printer.tensor_symbols))
                hook = f"lambda grad: {function}"
                hooked.append(
                    f"_gradient_through({override.input.name}, {output.name}.shape, {hook})"
                )
                continue
            derivative = printer.doprint(guards.guard_branches(inline(override.expr), tensors))
            if printer.is_tensor(inline(override.expr)):
                derivative = f"({derivative}).detach()"
            name = override.input.name
            terms.append(f"({name} - {name}.detach()) * {derivative}")
        lines.append(f"{output.name} = " + " + ".join(terms))
        lines += [f"{output.name} = {output.name} + {term}" for term in hooked]
    return lines


def _read_names(spec: Spec, overridden: set[str]) -> set[sympy.Basic]:
    """The `where` names the reference reads: an overridden output inlines them all."""
    read: set[sympy.Basic] = set()
    for output in spec.outputs:
        if output.name not in overridden:
            read |= output.expr.free_symbols
    for item in reversed(spec.intermediates):
        if item.symbol in read:
            read |= item.expr.free_symbols
    return read


# The incoming gradient as the hook's parameter in the generated test.
_GRAD = sympy.Symbol("grad", real=True)


def _sample_number(item: Input, rng: random.Random) -> str:
    """A fixed test value for a number input without a default."""
    if item.type is InputType.BOOL:
        return "True"
    low, high = default_domain(item)
    if item.type is InputType.INT:
        return repr(max(int(low), min(int(high), round((low + high) / 2))) or 1)
    return repr(round(rng.uniform(low, high), 3))


def test_context(derived: Derived, printer: TorchPrinter, provenance: Provenance) -> TestContext:
    """Print the plain formula and choose the samples test_function.py.jinja checks with."""
    spec = derived.spec
    samples = _samples(spec)
    test_values = {s.name: s.value for s in samples if not s.tensor}
    # The formula as written, with torch's own relu, maximum and clamp, and untaken
    # branches guarded so that autograd of torch.where gives no NaN (symgrad.ad.guards).
    tensors = derived.tensor_symbols

    def plain(expr: sympy.Expr) -> str:
        return str(printer.doprint(guards.guard_branches(expr, tensors)))

    overridden_outputs = {o.output.name for o in spec.overrides}
    read = _read_names(spec, overridden_outputs)
    reference = [f"{i.name} = {plain(i.expr)}" for i in spec.intermediates if i.symbol in read]
    reference += [
        f"{o.name} = {plain(o.expr)}" for o in spec.outputs if o.name not in overridden_outputs
    ]
    reference += _overridden_reference(spec, printer)
    overridden = unique_names(o.input.name for o in spec.overrides)
    return TestContext(
        version=provenance.version,
        header=tuple(header(spec.source, provenance)),
        class_name=spec.name,
        has_index=any(i.is_index for i in spec.inputs),
        uses_gradient_through=any(o.reads_grad for o in spec.overrides),
        function_name=spec.module,
        module=spec.module,
        samples=samples,
        input_names=tuple(i.name for i in spec.inputs),
        reference=tuple(reference),
        boundaries=tuple(f"({name!r}, {value})" for name, value in _boundaries(spec, test_values)),
        overridden=tuple(overridden),
        gradcheck_inputs=tuple(
            i.name for i in spec.differentiable_inputs if i.name not in overridden
        ),
        outputs=tuple(o.name for o in spec.outputs),
        uses_math=printer.uses_math,
        has_gradients=any(part.gradients for part in derived.backward),
        fused=spec.mode == "fused",
        custom_op=custom_op_context(derived, Namer(derived.names)) if spec.custom_op else None,
        has_jvp=has_jvp(derived),
        test_doc=docstring(
            f"Check {spec.name} with gradcheck and against autograd of the plain formula.",
            indent=0,
        ),
        differentiable_outputs=tuple(
            str(n) for n, o in enumerate(spec.outputs) if o.differentiable
        ),
        low_precision=tuple(_low_precision(spec)),
        tolerances=_tolerances(spec),
        points=spec.checks.points,
        inplace=_inplace_test(derived),
    )


def _inplace_test(derived: Derived) -> InplaceTest | None:
    """What the test of the in-place variant `<module>_` names, if the spec asks for one."""
    if derived.inplace is None:
        return None
    spec = derived.spec
    overwritten = inplace.overwritten(spec)
    return InplaceTest(
        *inplace.variant_names(spec), overwritten.name, spec.inputs.index(overwritten)
    )


def _samples(spec: Spec) -> tuple[Sample, ...]:
    """Each input's draw: tensors over their domains, numbers at their default or at random."""
    rng = random.Random(spec.name)
    shape = default_shape(spec)
    bounds = indices.index_bounds(spec)
    samples = []
    for item in spec.inputs:
        if item.is_index:
            bound = repr(bounds.get(item.name, 1))
            samples.append(Sample(item.name, True, repr(item.shape), high=bound, index=True))
        elif item.is_tensor:
            low, high = default_domain(item)
            declared = shape if item.shape is None else tuple(item.shape)
            samples.append(
                Sample(item.name, True, repr(declared), repr(low), repr(high), item.differentiable)
            )
        else:
            value = item.default if item.default is not None else _sample_number(item, rng)
            samples.append(Sample(item.name, False, value=str(value)))
    return tuple(samples)


# The largest finite float16: a test domain beyond it overflows when sampled.
_FLOAT16_MAX = 65504.0


def _low_precision(spec: Spec) -> list[str]:
    """The checked low-precision dtypes; a skipped one as a pytest.param with its reason."""
    reasons = dict(spec.checks.skips)
    for item in spec.tensor_inputs:
        low, high = default_domain(item)
        if "float16" not in reasons and max(abs(low), abs(high)) > _FLOAT16_MAX:
            reasons["float16"] = (
                f"float16 cannot hold the test domain [{low}, {high}] of {item.name}"
            )
    return [
        (
            f"pytest.param(torch.{dtype}, marks=pytest.mark.skip(reason={reasons[dtype]!r}))"
            if dtype in reasons
            else f"torch.{dtype}"
        )
        for dtype in spec.checks.dtypes
    ]


def _tolerances(spec: Spec) -> str:
    """The spec's tolerances as a dict display: {torch.float32: {"rtol": ..., "atol": ...}}."""
    entries = [
        f'torch.{dtype}: {{"rtol": {t.rtol!r}, "atol": {t.atol!r}}}'
        for dtype, t in spec.checks.tolerances
    ]
    return "{" + ", ".join(entries) + "}"
