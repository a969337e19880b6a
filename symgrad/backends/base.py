"""What a backend is: a name, a line of description, and a renderer from IR to files."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from symgrad.ad.ir import Derived
from symgrad.frontend.model import Spec
from symgrad.frontend.options import Variant


class UnprintableError(Exception):
    """An expression contains something a backend's printer has no spelling for."""


class BackendUnavailableError(RuntimeError):
    """A backend cannot run here: a tool it needs is missing (the message says which)."""


@dataclass(frozen=True)
class GeneratedFiles:
    """What a backend writes for one spec: file name -> text."""

    # The name the files are importable under (the spec's `module`).
    module_name: str
    files: Mapping[str, str]

    def by_filename(self) -> dict[str, str]:
        return dict(self.files)


@dataclass(frozen=True)
class Provenance:
    """Where generated files come from, for their header: symgrad's version and the
    command that writes them again as they are."""

    # symgrad's version, e.g. "0.1.0".
    version: str
    # The `symgrad gen` command, run where symgrad ran, that writes the files again: the
    # spec, `-o DIR` and `--target NAME` where they matter, relative paths with forward
    # slashes. None for a spec that is no file (spec_from_dict's `<dict>`).
    command: str | None


# A renderer: the derived spec and its provenance (for the header) -> the files.
Renderer = Callable[[Derived, Provenance], GeneratedFiles]
# A renderer of a spec with options: the spec, each variant derived, the provenance.
OptionsRenderer = Callable[[Spec, Sequence[tuple[Variant, Derived]], Provenance], GeneratedFiles]


@dataclass(frozen=True)
class Backend:
    """A target of `symgrad gen --target NAME`: how a derived spec becomes files.

    A backend owns its printer, its context and its templates; it reads the IR and
    changes nothing upstream of it.
    """

    name: str
    # One line for `symgrad targets`.
    description: str
    render: Renderer
    # Renders a spec with options (symgrad.frontend.options); None: refused, located.
    render_options: OptionsRenderer | None = None
