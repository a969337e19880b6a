"""A spec with options as one Python module: a Function per variant, and a dispatcher.

Each variant (symgrad.frontend.options) is rendered as the module of an ordinary spec;
the modules are merged statement by statement (imports and helpers once), and the
convenience function named after the spec checks the options in Python and calls the
variant they select: no tensor `where` on an option, no untaken branch computed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from symgrad.ad.ir import Derived
from symgrad.backends.base import GeneratedFiles, Provenance
from symgrad.backends.python import render
from symgrad.backends.python.module_context import ANNOTATIONS
from symgrad.backends.python.text import docstring, escape_docstring, header, summary
from symgrad.frontend.model import Input, InputType, Spec
from symgrad.frontend.options import Variant, describe_values

Variants = Sequence[tuple[Variant, Derived]]


def render_options(spec: Spec, variants: Variants, provenance: Provenance) -> GeneratedFiles:
    """The merged module, a test per variant and the dispatcher's test, black-formatted."""
    files = {f"{spec.module}.py": render_options_module(spec, variants, provenance)}
    for variant, derived in variants:
        tests = render.render(derived, provenance).files[f"test_{variant.spec.module}.py"]
        files[f"test_{variant.spec.module}.py"] = imports_from(tests, variant.spec, spec)
    files[f"test_{spec.module}.py"] = render.format_source(
        dispatch_test(spec, variants, provenance)
    )
    return GeneratedFiles(spec.module, files)


def render_options_module(
    spec: Spec, variants: Variants, provenance: Provenance, *, formatted: bool = True
) -> str:
    """One module: every variant's Function and function, then the dispatcher."""
    sources = [render.render_module(d, provenance, formatted=False) for _, d in variants]
    module = _merge(spec, sources, variants) + _dispatcher(spec, variants)
    return render.format_source(module) if formatted else module


def imports_from(test: str, variant: Spec, spec: Spec) -> str:
    """A variant's test, importing its Function from the spec's merged module.

    The fallback import is parenthesised, so that black can wrap the longer names that
    variants have (the type comment stays on the import's first line, where mypy reads it).
    """
    test = test.replace(f"from .{variant.module} import", f"from .{spec.module} import")
    fallback = re.compile(
        rf"^    from {variant.module} import (.*)  # type: ignore\[no-redef\]$", re.MULTILINE
    )

    def parenthesised(match: re.Match[str]) -> str:
        names = "".join(f"        {name.strip()},\n" for name in match.group(1).split(","))
        return f"    from {spec.module} import (  # type: ignore[no-redef]\n{names}    )"

    return render.format_source(fallback.sub(parenthesised, test))


def header_lines(spec: Spec, provenance: Provenance) -> list[str]:
    """The generated-file header of the spec."""
    return header(spec.source, provenance)


def _chunks(source: str) -> tuple[list[str], str | None, list[tuple[ast.stmt, str]]]:
    """The header comment lines, the module docstring and each later statement's text.

    A statement's text runs from the end of the one before it, comments included.
    """
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    body = list(tree.body)
    doc = ast.get_docstring(tree, clean=False)
    first = body[0]
    header = [line.rstrip("\n") for line in lines[: first.lineno - 1]]
    if doc is not None:
        body = body[1:]
    chunks, end = [], first.end_lineno or first.lineno
    for statement in body:
        last = statement.end_lineno or statement.lineno
        chunks.append((statement, "".join(lines[end:last])))
        end = last
    return header, doc, chunks


def _key(statement: ast.stmt, text: str) -> str:
    """What makes two statements the same: a plain definition's name, else its text.

    A decorated definition (custom_op's `register_fake` of `_`) registers something, so
    each variant keeps its own.
    """
    if isinstance(statement, (ast.FunctionDef, ast.ClassDef)) and not statement.decorator_list:
        return f"def {statement.name}"
    if isinstance(statement, ast.Assign) and ast.unparse(statement.targets[0]) == "__all__":
        return "__all__"
    return text.strip()


def _renamed_apart(source: str, definitions: dict[str, str], suffix: str) -> str:
    """`source` with each helper that an earlier variant defines otherwise renamed (a
    call's checks name the tensors a variant reads), so that no variant reads another's."""
    for statement, text in _chunks(source)[2]:
        key = _key(statement, text)
        if key.startswith("def ") and definitions.get(key, text) != text:
            name = key.removeprefix("def ")
            source = re.sub(rf"\b{re.escape(name)}\b", f"{name}_{suffix}", source)
    return source


def _merge(spec: Spec, sources: list[str], variants: Variants) -> str:
    """The variants' modules as one: imports and helpers once, `__all__` of them all."""
    header, _, _ = _chunks(sources[0])
    imports: dict[str, str] = {}
    definitions: dict[str, str] = {}
    names: list[str] = [spec.module]
    for source, (variant, _) in zip(sources, variants, strict=True):
        source = _renamed_apart(source, definitions, variant.spec.module)
        for statement, text in _chunks(source)[2]:
            key = _key(statement, text)
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                imports.setdefault(key, text.strip())
            elif key == "__all__":
                assert isinstance(statement, ast.Assign)
                names += ast.literal_eval(statement.value)
            else:
                definitions.setdefault(key, text)
    future = imports.pop("from __future__ import annotations")
    lines = [*header, f'"""{_module_doc(spec, variants)}"""', "", future, ""]
    lines += _sorted_imports(list(imports.values()))
    lines += ["", f"__all__ = {names!r}", ""]
    return "\n".join(lines) + "".join(definitions.values()) + "\n"


def _sorted_imports(imports: list[str]) -> list[str]:
    """Imports in isort's sections: the standard library, then torch."""
    stdlib = sorted(i for i in imports if "torch" not in i)
    torch = sorted(i for i in imports if "torch" in i)
    return [*sorted(stdlib, key=lambda i: (i.startswith("from"), i)), "", *torch]


def _module_doc(spec: Spec, variants: Variants) -> str:
    """The module docstring: the summary, and the Function each option value selects."""
    lines = [docstring(summary(spec), indent=0, closing=False), ""]
    lines.append(f"{spec.module}(...) calls the Function its options select:")
    lines += [f"    {escape_docstring(line)}" for line in describe_variants(variants)]
    return "\n".join(lines) + "\n"


def describe_variants(variants: Variants) -> list[str]:
    """A line per variant: its option values and its Function's name."""
    return [f"{describe_values(v.values)}: {v.spec.name}" for v, _ in variants]


def dispatcher_parameter(item: Input) -> str:
    """The dispatcher's parameter for an input, with the spec's default."""
    if item.type is InputType.STR:
        default = f" = {item.default_choice!r}" if item.default_choice is not None else ""
        return f"{item.name}: str{default}"
    if item.optional:
        return f"{item.name}: float | None = None"
    default = f" = {item.default!r}" if item.default is not None else ""
    return f"{item.name}: {ANNOTATIONS[item.type]}{default}"


def _test(item: Input, value: object) -> str:
    """The Python condition that an option has `value`."""
    if item.type is InputType.STR:
        return f"{item.name} == {value!r}"
    if item.optional:
        return f"{item.name} is {'not ' if value else ''}None"
    return item.name if value else f"not {item.name}"


def _dispatcher(spec: Spec, variants: Variants) -> str:
    """The convenience function: options checked, then the selected variant called."""
    returns = "torch.Tensor" if len(spec.outputs) == 1 else "tuple[torch.Tensor, ...]"
    parameters = ", ".join(dispatcher_parameter(i) for i in spec.inputs)
    doc = docstring(spec.doc or summary(spec), indent=4)
    lines = [f"\n\ndef {spec.module}({parameters}) -> {returns}:", f'    """{doc}"""']
    for item in spec.inputs:
        if item.type is InputType.STR:
            choices = ", ".join(repr(c) for c in item.choices)
            listed = f"({choices},)" if len(item.choices) == 1 else f"({choices})"
            lines += [
                f"    if {item.name} not in {listed}:",
                "        raise ValueError(",
                f'            f"{spec.module}: {item.name} must be one of "',
                f'            f"{escape_docstring(choices)}, "',
                f'            f"got {{{item.name}!r}}"',
                "        )",
            ]
    for variant, _ in variants:
        condition = " and ".join(_test(item, value) for item, value in variant.values)
        arguments = ", ".join(i.name for i in variant.spec.inputs)
        lines += [f"    if {condition}:", f"        return {variant.spec.module}({arguments})"]
    lines.append('    raise AssertionError("unreachable: every combination of options is handled")')
    return "\n".join(lines) + "\n"


def dispatch_test(spec: Spec, variants: Variants, provenance: Provenance) -> str:
    """The dispatcher's test: each option value reaches its Function; a bad choice raises."""
    function = spec.module
    cases = []
    for variant, _ in variants:
        options = {}
        for item, value in variant.values:
            options[item.name] = (0.5 if value else None) if item.optional else value
        passed = [i.name for i in variant.spec.inputs]
        cases.append(f"    ({options!r}, {variant.spec.module!r}, {passed!r}),")
    chosen = {item.name for item, _ in variants[0][0].values}
    required = [i.name for i in spec.inputs if i.name not in chosen]
    lines = [
        *header_lines(spec, provenance),
        f'"""The options of {function}.',
        "",
        "Each combination of options calls its own Function; a string that is no choice is",
        'refused."""',
        "",
        "from __future__ import annotations",
        "",
        "import sys",
        "from typing import Any",
        "",
        "import pytest",
        "",
        "try:",
        f"    from .{function} import {function}",
        "except ImportError:",
        f"    from {function} import {function}  # type: ignore[no-redef]",
        "",
        "CASES = [",
        *cases,
        "]",
        f"ARGUMENTS = {required!r}",
        "",
        "",
        '@pytest.mark.parametrize(("options", "variant", "passed"), CASES)',
        "def test_options_select_their_function(",
        "    options: dict[str, Any],",
        "    variant: str,",
        "    passed: list[str],",
        "    monkeypatch: pytest.MonkeyPatch,",
        ") -> None:",
        "    module = sys.modules[" + function + ".__module__]",
        "    calls: list[tuple[Any, ...]] = []",
        "    monkeypatch.setattr(module, variant, lambda *args: calls.append(args) or variant)",
        "    arguments = {name: object() for name in ARGUMENTS}",
        f"    assert {function}(**arguments, **options) == variant",
        "    values = {**arguments, **options}",
        "    assert calls == [tuple(values[name] for name in passed)]",
    ]
    for item in spec.inputs:
        if item.type is InputType.STR:
            lines += [
                "",
                "",
                f"def test_{item.name}_refuses_what_is_no_choice() -> None:",
                "    arguments = {name: object() for name in ARGUMENTS}",
                f'    with pytest.raises(ValueError, match="{item.name} must be one of"):',
                f'        {function}(**arguments, {item.name}="{item.choices[0]}_")',
            ]
    return "\n".join(lines) + "\n"
