"""The Python API: load a spec, generate sources in memory, write them or import them."""

from __future__ import annotations

import hashlib
import linecache
import os
import shlex
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from symgrad.ad.derive import derive
from symgrad.ad.ir import Derived
from symgrad.backends import python, registry
from symgrad.backends.base import Backend, BackendUnavailableError, GeneratedFiles, Provenance
from symgrad.errors import InternalError, Location, SpecError
from symgrad.frontend import options
from symgrad.frontend.loader import load_yaml
from symgrad.frontend.model import Spec
from symgrad.frontend.parse import node_from_data, parse_spec
from symgrad.version import __version__
from symgrad.write import stale_files, write_files

if TYPE_CHECKING:
    import torch

__all__ = [
    "SpecLike",
    "generate",
    "load",
    "load_module",
    "load_spec",
    "spec_from_dict",
    "stale_files",
    "write_files",
]

T = TypeVar("T")

# What `load` and `load_module` accept: a spec, a YAML path, or the YAML's structure.
SpecLike: TypeAlias = "Spec | str | os.PathLike[str] | Mapping[str, Any]"


def display_path(path: Path) -> str:
    """`path` relative to the working directory, with forward slashes (never absolute)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        relative = path.name
    return Path(relative).as_posix()


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read and validate the YAML spec at `path`."""
    path = Path(path)
    source = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(Location(source), f"cannot read the spec: {error}") from None
    return parse_spec(load_yaml(text, source), source)


def spec_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Spec:
    """Validate a spec given as Python data; expressions may be strings or sympy objects."""
    return parse_spec(node_from_data(data, source), source)


def generate(
    spec: Spec, target: str | None = None, *, output: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """Generate `spec`'s files for a target: file name -> source text.

    The target is `target`, else the spec's `target:`, else `python` (a module and its
    test). `output` is the folder the files will be written to: each file's header gives
    the `symgrad gen` command that writes it again, `-o` included, so pass it wherever
    the files go to disk. A failure inside the generator is raised as an InternalError
    naming the spec, never as a bare traceback: a spec that parsed is one symgrad should
    handle.
    """
    backend = backend_of(spec, target)
    return _render(spec, backend, regenerate_command(spec, backend, output)).by_filename()


def regenerate_command(
    spec: Spec, backend: Backend, output: str | os.PathLike[str] | None = None
) -> str | None:
    """The `symgrad gen` command that writes `spec`'s files for `backend` into `output`.

    It names the output folder when one is given, relative to the working directory as
    the spec is, and the target when the spec alone would choose another. Files never
    written (`load`) or written from the API without `output` get the command without
    `-o`. A spec that is no file (its source a pseudo name such as `<dict>`) has none.
    """
    if spec.source.startswith("<"):
        return None
    words = ["symgrad", "gen", spec.source]
    if output is not None:
        words += ["-o", display_path(Path(output))]
    chosen = spec.target.name if spec.target is not None else registry.DEFAULT_TARGET
    if backend.name != chosen:
        words += ["--target", backend.name]
    return shlex.join(words)


def backend_of(spec: Spec, target: str | None = None) -> Backend:
    """The backend for `spec`: `target` if given, else the spec's, else the default.

    An unknown name raises registry.UnknownTargetError, or a SpecError at the spec's
    `target:` when the name comes from the spec.
    """
    if target is not None:
        return registry.get(target)
    if spec.target is None:
        return registry.get(registry.DEFAULT_TARGET)
    try:
        return registry.get(spec.target.name)
    except registry.UnknownTargetError as error:
        raise SpecError(spec.target.location, str(error), "target") from None


def _render(spec: Spec, backend: Backend, command: str | None) -> GeneratedFiles:
    """derive and render `spec` (see _generating), each variant where it has options."""
    provenance = Provenance(__version__, command)
    if not options.option_inputs(spec):
        return _generating(spec, lambda: backend.render(derive(spec), provenance))
    if backend.render_options is None:
        first = options.option_inputs(spec)[0]
        message = f"options are not in the {backend.name} target yet"
        raise SpecError(first.location, message, f"inputs.{first.name}")
    render_options = backend.render_options
    return _generating(spec, lambda: render_options(spec, _derived_variants(spec), provenance))


def _derived_variants(spec: Spec) -> list[tuple[options.Variant, Derived]]:
    """Each variant of a spec with options, derived on its own."""
    return [(variant, derive(variant.spec)) for variant in options.variants(spec)]


def _generating(spec: Spec, produce: Callable[[], T]) -> T:
    """`produce()`; an exception other than a SpecError, or a backend whose tools are
    missing (BackendUnavailableError, said as such), is an InternalError."""
    try:
        return produce()
    except (SpecError, BackendUnavailableError):
        raise
    except Exception as error:
        raise InternalError(Location(spec.source), error) from error


def _render_module(spec: Spec, formatted: bool) -> str:
    """The Python module alone (no test), with `_render`'s handling of errors."""
    provenance = Provenance(__version__, regenerate_command(spec, python.BACKEND))
    if options.option_inputs(spec):
        return _generating(
            spec,
            lambda: python.options.render_options_module(
                spec, _derived_variants(spec), provenance, formatted=formatted
            ),
        )
    return _generating(
        spec, lambda: python.render.render_module(derive(spec), provenance, formatted=formatted)
    )


def load(spec: SpecLike) -> type[torch.autograd.Function]:
    """Generate `spec`'s Function in memory and import it, for notebooks and experiments.

    The convenience function is an attribute of its module, `sys.modules[cls.__module__]`.
    """
    spec = _as_spec(spec)
    chosen = options.option_inputs(spec)
    if chosen:
        message = "a spec with options has a Function per option value: use load_module"
        raise SpecError(chosen[0].location, message, f"inputs.{chosen[0].name}")
    cls: type[torch.autograd.Function] = getattr(_import_module(spec), spec.name)
    return cls


def load_module(spec: SpecLike, *, formatted: bool = True) -> types.ModuleType:
    """Generate `spec`'s module in memory and import it (the class and the function).

    `formatted=False` skips black, which changes only the layout of the source that
    tracebacks show: for callers that load thousands of specs (the fuzzer).
    """
    return _import_module(_as_spec(spec), formatted=formatted)


def _as_spec(spec: SpecLike) -> Spec:
    """A validated spec from a spec, a YAML path or the YAML's structure as Python data."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, Mapping):
        return spec_from_dict(spec)
    return load_spec(spec)


def _import_module(spec: Spec, *, formatted: bool = True) -> types.ModuleType:
    """Import the generated module of `spec` under a name derived from its source.

    The module is registered in `sys.modules`, where torch.compile (and pickle) look
    modules up; the same source gives the same name, so loading twice gives one module.
    """
    source = _render_module(spec, formatted)
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]
    name = f"symgrad_generated_{spec.module}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    # Tracebacks and inspect read the source from linecache under this pseudo file name.
    filename = f"<symgrad {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module
