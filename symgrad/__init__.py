"""symgrad: generate torch.autograd.Functions from formulas, derivatives included."""

from symgrad.api import generate, load_spec, spec_from_dict, write_files
from symgrad.errors import SpecError

__version__ = "0.1.0"

__all__ = ["SpecError", "__version__", "generate", "load_spec", "spec_from_dict", "write_files"]
