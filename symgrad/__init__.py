"""symgrad: generate torch.autograd.Functions from formulas, derivatives included."""

from symgrad.api import (
    SpecLike,
    generate,
    load,
    load_module,
    load_spec,
    spec_from_dict,
    stale_files,
    write_files,
)
from symgrad.errors import InternalError, Location, SpecError
from symgrad.frontend.model import Spec
from symgrad.present.show import describe
from symgrad.version import __version__

__all__ = [
    "InternalError",
    "Location",
    "Spec",
    "SpecError",
    "SpecLike",
    "__version__",
    "describe",
    "generate",
    "load",
    "load_module",
    "load_spec",
    "spec_from_dict",
    "stale_files",
    "write_files",
]
