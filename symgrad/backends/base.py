"""What a backend is: a name, a line of description, and a renderer from IR to files."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from symgrad.ad.ir import Derived


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


# A renderer: the derived spec and symgrad's version (for the header) -> the files.
Renderer = Callable[[Derived, str], GeneratedFiles]


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
