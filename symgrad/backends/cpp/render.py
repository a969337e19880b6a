"""The C++ backend's renderer: fill the templates from the contexts, format with clang-format.

module.py prints every statement and chooses every name; the jinja2 templates in
`templates/cpp/` hold the shape of the code: the Function and its operator (`M.cpp`),
the Python loader that builds it once (`M.py`), and the test (`test_M.py`, the Python
target's test run against the loaded operator). clang-format, pinned by the `cpp`
extra, lays out the C++ byte for byte the same everywhere; black the Python.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import shutil
import subprocess
import sysconfig
import textwrap
from pathlib import Path

import black
import jinja2

from symgrad.ad.inplace import variant_doc
from symgrad.ad.ir import Derived, Namer
from symgrad.backends.base import (
    BackendUnavailableError,
    GeneratedFiles,
    Provenance,
    UnprintableError,
)
from symgrad.backends.cpp import names
from symgrad.backends.cpp.contexts import CommonHelpers, LoaderContext
from symgrad.backends.cpp.module import function_context, inplace_context, python_parameter
from symgrad.backends.cpp.printer import AtenPrinter
from symgrad.backends.python import test_context as tests
from symgrad.backends.python.contexts import InplaceTest, TestContext, as_template_variables
from symgrad.backends.python.printer import TorchPrinter
from symgrad.backends.python.text import docstring, header, summary
from symgrad.backends.statements import condition_temporaries, small_symbols
from symgrad.errors import SpecError

_BLACK_MODE = black.Mode(line_length=88)
# The layout of generated C++: Google's style at black's width, so both read alike.
CLANG_FORMAT_STYLE = "{BasedOnStyle: Google, ColumnLimit: 88, SortIncludes: Never}"


class ClangFormatMissingError(BackendUnavailableError):
    """clang-format is not installed: the C++ target needs the `cpp` extra."""


def render(derived: Derived, provenance: Provenance) -> GeneratedFiles:
    """Print the C++ Function, its loader and its test for `derived`, formatted."""
    source, loader, test, _ = render_parts(derived, provenance)
    module = derived.spec.module
    return GeneratedFiles(
        module,
        {
            f"{module}.cpp": clang_format(source),
            f"{module}.py": render_loader(loader),
            f"test_{module}.py": render_test(test),
        },
    )


def render_test(test: TestContext) -> str:
    """The generated test of the loaded operator, black-formatted."""
    return _black(_template("test_function.py.jinja").render(as_template_variables(test)))


def format_python(source: str) -> str:
    """Python source laid out by black, as every generated Python file is."""
    return _black(source)


def render_loader(loader: LoaderContext, more: str = "") -> str:
    """The Python loader of a C++ source, `more` (Python source) after it, black-formatted."""
    return _black(_template("loader.py.jinja").render(as_template_variables(loader)) + more)


def render_parts(
    derived: Derived, provenance: Provenance, shared_helpers: str = ""
) -> tuple[str, LoaderContext, TestContext, CommonHelpers]:
    """The C++ source of `derived` (not yet formatted), its loader's and its test's contexts,
    and the common helpers it calls.

    With `shared_helpers`, the common helpers are not defined but used from that namespace
    (a variant of a spec with options: symgrad.backends.cpp.options).
    """
    spec = derived.spec
    namer = Namer(derived.names)
    printer = AtenPrinter(
        derived.tensor_symbols, names.renames(derived, namer), condition_temporaries(derived)
    )
    printer.small_symbols = small_symbols(derived)
    detail = names.helper_namespace(derived, namer)
    try:
        variant = inplace_context(derived, printer, namer, provenance, detail)
        context = function_context(derived, printer, namer, provenance, detail)
        context = dataclasses.replace(context, shared_helpers=shared_helpers)
        if variant is not None:
            variant = dataclasses.replace(
                variant, forward_kernel=namer.fresh(f"{variant.function_name}_forward")
            )
            code = _template("function.cpp.jinja").render(as_template_variables(variant))
            context = dataclasses.replace(context, variant=variant, variant_code=code)
    except UnprintableError as error:
        outputs = ", ".join(o.name for o in spec.outputs)
        raise SpecError(
            spec.outputs[0].location, f"cannot generate C++ for {outputs}: {error}", "outputs"
        ) from None
    source = _template("function.cpp.jinja").render(as_template_variables(context))
    test = _test_context(derived, provenance)
    loader = _loader_context(
        derived,
        context.namespace,
        provenance,
        test.inplace,
        fused=context.fused is not None,
        parallel=context.fused is not None or bool(context.cpu_helpers),
    )
    return source, loader, test, context.common_helpers


def render_common_helpers(helpers: CommonHelpers) -> str:
    """The common helpers `helpers` names, as function.cpp.jinja defines them."""
    module = _template("helpers.cpp.jinja").module
    text: str = module.common(*dataclasses.astuple(helpers))  # type: ignore[attr-defined]
    return text


def _loader_context(
    derived: Derived,
    namespace: str,
    provenance: Provenance,
    inplace: InplaceTest | None,
    fused: bool,
    parallel: bool,
) -> LoaderContext:
    spec = derived.spec
    count = len(spec.outputs)
    about = (
        f"The C++ target: {spec.module}.cpp holds the LibTorch Function and registers it as"
        f" the operator {namespace}::{spec.module}. Importing this module builds it once"
        " (with torch.utils.cpp_extension, into a cache folder named by the source's hash,"
        " so an edit rebuilds and nothing else does) and exposes the names the Python"
        " target has."
    )
    return LoaderContext(
        header=tuple(header(spec.source, provenance)),
        summary=docstring(summary(spec), indent=0, closing=False),
        about=tuple(textwrap.wrap(about, width=88, break_on_hyphens=False)),
        module=spec.module,
        class_name=spec.name,
        function_name=spec.module,
        namespace=namespace,
        parameters=tuple(python_parameter(i) for i in spec.inputs),
        arguments=tuple(i.name for i in spec.inputs),
        return_annotation=(
            "torch.Tensor" if count == 1 else "tuple[" + ", ".join(["torch.Tensor"] * count) + "]"
        ),
        doc=docstring(spec.doc or summary(spec), indent=4),
        inplace=inplace,
        inplace_doc=docstring(variant_doc(spec), indent=4) if inplace else "",
        fused=fused,
        parallel=parallel,
    )


def _test_context(derived: Derived, provenance: Provenance) -> TestContext:
    """The Python target's test, for the loaded operator: no jvp (a C++ Function has none)."""
    conditions = condition_temporaries(derived)
    printer = TorchPrinter(derived.tensor_symbols, conditions=conditions)
    printer.fuse_products = False  # the reference is the formula as written
    printer.forward_helpers = False
    context = tests.test_context(derived, printer, provenance)
    return dataclasses.replace(context, has_jvp=False, custom_op=None, fused=False)


def clang_format(source: str) -> str:
    """`source` laid out by the pinned clang-format, in symgrad's style."""
    result = subprocess.run(
        [_clang_format(), f"--style={CLANG_FORMAT_STYLE}", "--assume-filename=function.cpp"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


@functools.cache
def _clang_format() -> str:
    """The clang-format of this environment (the `cpp` extra), else one on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "clang-format"
    if beside.is_file():
        return str(beside)
    found = shutil.which("clang-format")
    if found is None:
        raise ClangFormatMissingError(
            "the cpp target formats with clang-format: pip install 'symgrad[cpp]'"
        )
    return found


def _black(source: str) -> str:
    return black.format_str(source, mode=_BLACK_MODE)


@functools.cache
def _environment() -> jinja2.Environment:
    # The test template extends the Python target's, so both folders are on the path.
    root = templates_directory()
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(root / "cpp"), str(root)]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    environment.filters["unpack"] = lambda items: (
        f"({items[0]},)" if len(items) == 1 else ", ".join(items)
    )
    environment.filters["pack"] = lambda items: (
        f"({items[0]},)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    )
    return environment


def _template(name: str) -> jinja2.Template:
    return _environment().get_template(name)


def templates_directory() -> Path:
    """The templates folder: in the installed package, or templates/ of a checkout."""
    packaged = importlib.resources.files("symgrad") / "templates"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "templates"
