"""The Python backend's renderer: fill the templates from the contexts, format with black.

The work is split in two: module_context.py and test_context.py print every expression
and choose every name (a render model made only of strings), and the jinja2 templates
in `templates/python/` hold the shape of the code. black formats the result, so the
output is stable.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
from pathlib import Path

import black
import jinja2
from black.mode import TargetVersion

from symgrad.ad.ir import Derived
from symgrad.backends.base import GeneratedFiles, Provenance, UnprintableError
from symgrad.backends.python import test_context as tests
from symgrad.backends.python.contexts import as_template_variables
from symgrad.backends.python.module_context import inplace_context, module_context
from symgrad.backends.python.printer import TorchPrinter
from symgrad.backends.statements import condition_temporaries, small_symbols, temporary_names
from symgrad.backends.triton.kernels import triton_kernels
from symgrad.errors import SpecError

# black's stable style only changes in its yearly January release, which pyproject pins.
_BLACK_MODE = black.Mode(line_length=88, target_versions={TargetVersion.PY39})


def render(derived: Derived, provenance: Provenance) -> GeneratedFiles:
    """Print the module and the test for `derived`, black-formatted."""
    spec = derived.spec
    module = render_module(derived, provenance)
    conditions = condition_temporaries(derived)
    test_printer = TorchPrinter(derived.tensor_symbols, conditions=conditions)
    test_printer.fuse_products = False  # the reference is the formula as written
    test_printer.forward_helpers = False
    try:
        test_context = tests.test_context(derived, test_printer, provenance)
    except UnprintableError as error:
        raise _backward_error(derived, error) from None
    test = _format(_template("test_function.py.jinja").render(as_template_variables(test_context)))
    return GeneratedFiles(
        spec.module, {f"{spec.module}.py": module, f"test_{spec.module}.py": test}
    )


def render_module(derived: Derived, provenance: Provenance, *, formatted: bool = True) -> str:
    """Print the module alone (what `load` imports); `formatted=False` skips black, which
    changes only the layout, for callers that generate thousands of modules (the fuzzer)."""
    printer = TorchPrinter(
        derived.tensor_symbols, temporary_names(derived), condition_temporaries(derived)
    )
    printer.small_symbols = small_symbols(derived)
    _check_printable(derived)
    try:
        variant = inplace_context(derived, printer, provenance)
        context = module_context(derived, printer, provenance)
    except UnprintableError as error:
        raise _backward_error(derived, error) from None
    if variant is not None:
        context = dataclasses.replace(
            context, variant_names=(variant.class_name, variant.function_name)
        )
    module = _template("function.py.jinja").render(as_template_variables(context))
    if variant is not None:
        module += _template("function.py.jinja").render(as_template_variables(variant))
    kernels = triton_kernels(derived)
    if kernels is not None:
        module += _template("triton.py.jinja").render(as_template_variables(kernels))
    return _format(module) if formatted else module


def _backward_error(derived: Derived, error: UnprintableError) -> SpecError:
    """The error for a derivative that cannot be printed (the forward printed: checked)."""
    outputs = derived.spec.outputs
    names = ", ".join(o.name for o in outputs)
    return SpecError(
        outputs[0].location, f"cannot generate the backward of {names}: {error}", "outputs"
    )


def _check_printable(derived: Derived) -> None:
    """Raise a SpecError at the `where` or output whose expression cannot be printed."""
    printer = TorchPrinter(derived.tensor_symbols)
    spec = derived.spec
    named = [(f"where.{i.name}", i.expr, i.location) for i in spec.intermediates]
    named += [(f"outputs.{o.name}", o.expr, o.location) for o in spec.outputs]
    named += [
        (f"gradients.{g.output.name}.{g.input.name}", g.expr, g.location) for g in spec.overrides
    ]
    for path, expr, location in named:
        try:
            printer.doprint(expr)
        except UnprintableError as error:
            raise SpecError(location, f"cannot generate code: {error}", path) from None


def format_source(source: str) -> str:
    """Generated Python formatted by black, in the mode of every generated module."""
    return _format(source)


def _format(source: str) -> str:
    return black.format_str(source, mode=_BLACK_MODE)


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_directory())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    environment.filters["unpack"] = _unpack_target
    environment.filters["pack"] = _tuple_display
    environment.filters["add_suffix"] = lambda text, suffix: f"{text}{suffix}"
    return environment


def _unpack_target(names: list[str]) -> str:
    """`a, b` or `(a,)`: the left side that unpacks a tuple into `names`."""
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)


def _tuple_display(items: list[str]) -> str:
    """`(a, b)` or `(a,)`."""
    return f"({items[0]},)" if len(items) == 1 else "(" + ", ".join(items) + ")"


def _template(name: str) -> jinja2.Template:
    return _environment().get_template(name)


def templates_directory() -> Path:
    """This backend's templates: in the installed package, or templates/ of a checkout."""
    packaged = importlib.resources.files("symgrad") / "templates" / "python"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "templates" / "python"
