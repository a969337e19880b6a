"""A spec with options as one C++ source: a Function per variant, and a dispatcher.

Each variant (symgrad.frontend.options) is rendered as the C++ of an ordinary spec, its
own namespace and operator; the sources are joined into one translation unit (includes
once). The dispatcher is an operator of the spec's own namespace that takes the options
with their C++ types (`c10::string_view`, `std::optional<double>`, `bool`), refuses a
string that is no choice with TORCH_CHECK_VALUE (a ValueError in Python, as the Python
target raises), and calls the variant's operator through the dispatcher, so autograd,
torch.compile and vmap see the variant's own operator.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import textwrap

from symgrad.backends.base import GeneratedFiles, Provenance
from symgrad.backends.cpp import render
from symgrad.backends.cpp.contexts import CommonHelpers, LoaderContext
from symgrad.backends.cpp.module import INPUT_TYPES, comment_header, op_return

# The module, not its names: symgrad.backends.python imports this package (through the
# Triton kernels' loop forms) while its options module is still being initialised.
from symgrad.backends.python import options as python_options
from symgrad.backends.python.contexts import TestContext
from symgrad.backends.python.text import docstring, escape_comment, header, summary
from symgrad.frontend.domains import default_shape
from symgrad.frontend.model import Input, InputType, Spec

# C++ and schema types of an input: a str option's own, else the Function's.
_CPP_TYPES = {
    **{kind: (cpp, schema) for kind, (cpp, schema, _, _) in INPUT_TYPES.items()},
    InputType.STR: ("c10::string_view", "str"),
}


def render_options(
    spec: Spec, variants: python_options.Variants, provenance: Provenance
) -> GeneratedFiles:
    """One C++ source and its loader, a test per variant and the dispatcher's test."""
    shared = _shared_namespace(spec)
    rendered = [render.render_parts(d, provenance, f"::{shared}") for _, d in variants]
    parts = [(source, loader, test) for source, loader, test, _ in rendered]
    common = functools.reduce(operator.or_, (helpers for *_, helpers in rendered))
    lines = comment_header(spec.source, provenance)
    sources = [_body(source, len(lines)) for source, _, _ in parts]
    includes = list(dict.fromkeys(i for included, _ in sources for i in included))
    cpp = "\n".join(
        [
            "//",
            *(f"// {line}" if line else "//" for line in _about(spec, variants)),
            "",
            *includes,
            "#include <optional>",
            "",
            _shared_helpers(shared, common),
            *(body for _, body in sources),
            _dispatcher(spec, variants),
        ]
    )
    files = {
        f"{spec.module}.cpp": render.clang_format("\n".join(lines) + "\n" + cpp),
        f"{spec.module}.py": _loader(spec, variants, parts, provenance),
    }
    for (variant, _), (_, _, test) in zip(variants, parts, strict=True):
        source = render.render_test(test)
        test_file = f"test_{variant.spec.module}.py"
        files[test_file] = python_options.imports_from(source, variant.spec, spec)
    dispatching = dispatch_test(spec, variants, provenance)
    files[f"test_{spec.module}.py"] = render.format_python(dispatching)
    return GeneratedFiles(spec.module, files)


def _about(spec: Spec, variants: python_options.Variants) -> list[str]:
    """The source's opening comment: the summary, and the Function each option selects."""
    lines = textwrap.wrap(escape_comment(summary(spec)), width=84)
    lines += ["", f"The operator symgrad_{spec.module}::{spec.module} calls the Function its"]
    lines += ["options select; each variant below is its own operator and namespace:"]
    lines += [f"    {line}" for line in python_options.describe_variants(variants)]
    return lines


def _shared_namespace(spec: Spec) -> str:
    """The namespace of the helpers every variant uses: `detail` in the spec's own
    (`detail_` where the dispatcher, named after the module, is called `detail`)."""
    return f"symgrad_{spec.module}::detail{'_' if spec.module == 'detail' else ''}"


def _shared_helpers(shared: str, common: CommonHelpers) -> str:
    """The helpers every variant uses, defined once (each variant's `detail` uses them)."""
    outer, inner = shared.split("::")
    lines = [f"namespace {outer} {{", ""]
    lines += ["// The helpers the variants below share: each variant's `detail` uses them."]
    lines += [f"namespace {inner} {{", ""]
    lines += [render.render_common_helpers(common).strip("\n"), ""]
    lines += [f"}}  // namespace {inner}", f"}}  // namespace {outer}", ""]
    return "\n".join(lines)


def _body(source: str, header_lines: int) -> tuple[list[str], str]:
    """A variant's source as its include lines and the rest (its comment, its namespace)."""
    lines = source.splitlines()[header_lines:]
    includes = [line for line in lines if line.startswith("#include")]
    first = lines.index(includes[0])
    namespace = next(n for n, line in enumerate(lines) if line.startswith("namespace "))
    return includes, "\n".join([*lines[:first], *lines[namespace:]]) + "\n"


def _cpp_parameter(item: Input) -> str:
    """The dispatcher's C++ parameter for an input."""
    cpp = "std::optional<double>" if item.optional else _CPP_TYPES[item.type][0]
    return f"{cpp} {item.name}"


def _schema_parameters(spec: Spec) -> str:
    """The dispatcher's schema parameters, with the spec's defaults on the trailing ones
    that all have one (a schema, as Python, takes no required argument after a default)."""
    parameters: list[str] = []
    defaults: list[str | None] = []
    for item in spec.inputs:
        schema = "float?" if item.optional else _CPP_TYPES[item.type][1]
        parameters.append(f"{schema} {item.name}")
        if item.optional:
            defaults.append("None")
        elif item.type is InputType.STR:
            default = item.default_choice
            defaults.append(None if default is None else f'\\"{default}\\"')
        else:
            defaults.append(None if item.default is None else repr(item.default))
    for n in reversed(range(len(parameters))):
        if defaults[n] is None:
            break
        parameters[n] += f"={defaults[n]}"
    return ", ".join(parameters)


def _condition(item: Input, value: object) -> str:
    """The C++ condition that an option has `value`."""
    if item.type is InputType.STR:
        return f'{item.name} == "{value}"'
    if item.optional:
        return f"{'' if value else '!'}{item.name}.has_value()"
    return item.name if value else f"!{item.name}"


def _call(variant_spec: Spec, spec: Spec) -> str:
    """The typed dispatcher call of a variant's operator with the spec's arguments."""
    optional = {i.name for i in spec.inputs if i.optional}
    types = ", ".join(_CPP_TYPES[i.type][0] for i in variant_spec.inputs)
    returns = op_return(len(variant_spec.outputs))
    arguments = ", ".join(
        f"*{i.name}" if i.name in optional else i.name for i in variant_spec.inputs
    )
    name = f"symgrad_{variant_spec.module}::{variant_spec.module}"
    return (
        f'    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("{name}", "")'
        f".typed<{returns}({types})>();\n    return op.call({arguments});"
    )


def _dispatcher(spec: Spec, variants: python_options.Variants) -> str:
    """The dispatcher's namespace: the choices checked, the variant's operator called."""
    module, namespace = spec.module, f"symgrad_{spec.module}"
    count = len(spec.outputs)
    returns = op_return(count)
    lines = [f"namespace {namespace} {{", ""]
    lines += [f"// {line}" for line in textwrap.wrap(escape_comment(spec.doc or summary(spec)), 84)]
    parameters = ", ".join(_cpp_parameter(i) for i in spec.inputs)
    lines.append(f"inline {returns} {module}({parameters}) {{")
    for item in spec.inputs:
        if item.type is InputType.STR:
            test = " || ".join(f'{item.name} == "{c}"' for c in item.choices)
            choices = ", ".join(f"'{c}'" for c in item.choices)
            message = f'"{module}: {item.name} must be one of {choices}, got \'"'
            lines.append(f'  TORCH_CHECK_VALUE({test}, {message}, std::string({item.name}), "\'");')
    for variant, _ in variants:
        condition = " && ".join(_condition(item, value) for item, value in variant.values)
        lines += [f"  if ({condition}) {{", _call(variant.spec, spec), "  }"]
    lines += ['  TORCH_CHECK(false, "unreachable: every combination of options is handled");', "}"]
    schema = _schema_parameters(spec)
    result = "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"
    lines += [
        "",
        f"TORCH_LIBRARY({namespace}, m) {{",
        f'  m.def("{module}({schema}) -> {result}");',
        "}",
        "",
        f"TORCH_LIBRARY_IMPL({namespace}, CompositeImplicitAutograd, m) {{",
        f'  m.impl("{module}", &{namespace}::{module});',
        "}",
        "",
        f"}}  // namespace {namespace}",
    ]
    return "\n".join(lines) + "\n"


def _loader(
    spec: Spec,
    variants: python_options.Variants,
    parts: list[tuple[str, LoaderContext, TestContext]],
    provenance: Provenance,
) -> str:
    """The Python loader: the dispatcher's operator, and each variant's under its names."""
    loaders = [loader for _, loader, _ in parts]
    names = [spec.name, spec.module]
    more = []
    for (variant, _), loader in zip(variants, loaders, strict=True):
        own = variant.spec
        names += [own.name, own.module]
        signature = ", ".join(loader.parameters)
        call = f"_operator_{own.module}({', '.join(loader.arguments)})"
        more += [
            "",
            "",
            f"_operator_{own.module} = torch.ops.symgrad_{own.module}.{own.module}",
            "",
            "",
            f"class {own.name}:",
            f'    """{loader.doc}"""',
            "",
            "    @staticmethod",
            f"    def apply({signature}) -> {loader.return_annotation}:",
            '        """The Function\'s outputs, as `torch.autograd.Function.apply` gives them."""',
            f"        return {call}",
            "",
            "",
            f"def {own.module}({signature}) -> {loader.return_annotation}:",
            f'    """{loader.doc}"""',
            f"    return {call}",
        ]
    about = (
        f"The C++ target: {spec.module}.cpp holds a LibTorch Function per option value and the"
        f" operator symgrad_{spec.module}::{spec.module}, which checks the options and calls"
        " the one they select. Importing this module builds it once (into a cache folder"
        " named by the source's hash) and exposes the names the Python target has."
    )
    count = len(spec.outputs)
    context = dataclasses.replace(
        loaders[0],
        header=tuple(header(spec.source, provenance)),
        summary=docstring(summary(spec), indent=0, closing=False),
        about=tuple(textwrap.wrap(about, width=88, break_on_hyphens=False)),
        module=spec.module,
        class_name=spec.name,
        function_name=spec.module,
        namespace=f"symgrad_{spec.module}",
        parameters=tuple(python_options.dispatcher_parameter(i) for i in spec.inputs),
        arguments=tuple(i.name for i in spec.inputs),
        return_annotation=(
            "torch.Tensor" if count == 1 else f"tuple[{', '.join(['torch.Tensor'] * count)}]"
        ),
        doc=docstring(spec.doc or summary(spec), indent=4),
        fused=any(loader.fused for loader in loaders),
        parallel=any(loader.parallel for loader in loaders),
    )
    more += ["", f"__all__ += {names[2:]!r}"]
    return render.render_loader(context, "\n".join(more) + "\n")


# The generated test's skip where the C++ cannot be built, as every C++ test has it.
_NEEDS_A_COMPILER = [
    "# Importing the module builds its C++: that takes a compiler and ninja.",
    'if shutil.which(os.environ.get("CXX", "c++")) is None:',
    '    pytest.skip("no C++ compiler: install g++ or clang++, or set CXX",'
    " allow_module_level=True)",
    "pytest.importorskip(",
    '    "ninja", reason="torch builds C++ with ninja: pip install \'symgrad[cpp]\'"',
    ")",
]


def _sample(item: Input, spec: Spec) -> str:
    """Python for a test value of a non-option input: a tensor of its shape, or a number."""
    if item.is_tensor:
        shape = list(item.shape if item.shape is not None else default_shape(spec))
        if item.type is InputType.INDEX:
            return f"torch.zeros({shape}, dtype=torch.int64)"
        return f"torch.randn({shape}, dtype=torch.float64)"
    if item.default is not None:
        return repr(item.default)
    if item.domain is not None:
        return repr((item.domain[0] + item.domain[1]) / 2)
    return "1" if item.type is InputType.INT else "0.5"


def dispatch_test(spec: Spec, variants: python_options.Variants, provenance: Provenance) -> str:
    """The dispatcher's test: each option value gives its variant's result; a string that
    is no choice is refused by the C++ check."""
    function = spec.module
    chosen = {item.name for item, _ in variants[0][0].values}
    cases = []
    for variant, _ in variants:
        options = []
        for item, value in variant.values:
            code = (_sample(item, spec) if value else "None") if item.optional else repr(value)
            options.append(f"{item.name!r}: {code}")
        passed = [i.name for i in variant.spec.inputs]
        cases.append(f"    ({{{', '.join(options)}}}, {variant.spec.module}, {passed!r}),")
    names = ", ".join([function, *(v.spec.module for v, _ in variants)])
    arguments = [
        f"        {i.name!r}: {_sample(i, spec)}," for i in spec.inputs if i.name not in chosen
    ]
    lines = [
        *header(spec.source, provenance),
        f'"""The options of {function}, the C++ dispatcher.',
        "",
        "Each combination of options gives its own Function's result; a string that is no",
        'choice is refused."""',
        "",
        "from __future__ import annotations",
        "",
        "import os",
        "import shutil",
        "from collections.abc import Callable",
        "from typing import Any",
        "",
        "import pytest",
        "import torch",
        "",
        *_NEEDS_A_COMPILER,
        "",
        "try:",
        f"    from .{function} import {names}",
        "except ImportError:",
        f"    from {function} import (  # type: ignore[no-redef]",
        *(f"        {name.strip()}," for name in names.split(",")),
        "    )",
        "",
        "CASES: list[tuple[dict[str, Any], Callable[..., Any], list[str]]] = [",
        *cases,
        "]",
        "",
        "",
        "def _arguments() -> dict[str, Any]:",
        "    torch.manual_seed(0)",
        "    return {",
        *arguments,
        "    }",
        "",
        "",
        '@pytest.mark.parametrize(("options", "variant", "passed"), CASES)',
        "def test_options_select_their_function(",
        "    options: dict[str, Any], variant: Callable[..., Any], passed: list[str]",
        ") -> None:",
        "    arguments = _arguments()",
        "    values = {**arguments, **options}",
        f"    actual = {function}(**arguments, **options)",
        "    torch.testing.assert_close(actual, variant(*(values[name] for name in passed)))",
    ]
    for item in spec.inputs:
        if item.type is InputType.STR:
            lines += [
                "",
                "",
                f"def test_{item.name}_refuses_what_is_no_choice() -> None:",
                f'    with pytest.raises(ValueError, match="{item.name} must be one of"):',
                f'        {function}(**_arguments(), {item.name}="{item.choices[0]}_")',
            ]
    return "\n".join(lines) + "\n"
