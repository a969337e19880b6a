"""The names a spec gives (class, module, inputs), each refused where code cannot use it.

The module name derived from a class name keeps acronyms and ML words together.
"""

from __future__ import annotations

import keyword
import re

from symgrad.errors import Location, SpecError
from symgrad.frontend import fields as read
from symgrad.frontend.loader import Node
from symgrad.language.names import is_function_name

# Names the generated code itself uses at module or function scope.
RESERVED_NAMES = frozenset({"ctx", "torch", "math", "inspect", "_"})
CLASS_NAME = re.compile(r"[A-Z][A-Za-z0-9]*\Z")
_MODULE_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")


# Words of the ML vocabulary that CamelCase rules would split or run together: each is
# one word of a module name (SwiGLU -> swiglu, StudentTNLL -> student_t_nll).
_KNOWN_WORDS = (
    "SwiGLU", "GeGLU", "GEGLU", "ReGLU", "PReLU", "ReLU", "SiLU", "GeLU", "GELU", "SELU",
    "CELU", "ELU", "GLU", "NLL", "MSE", "MAE", "BCE", "NCE", "KL", "RMS", "LSE", "STE",
)  # fmt: skip
_WORD = re.compile(
    "|".join(
        [
            *(
                f"{re.escape(word)}(?![a-z])"
                for word in sorted(_KNOWN_WORDS, key=len, reverse=True)
            ),
            r"[A-Z]+[0-9]*(?![a-z])",  # an acronym: RMS in RMSNorm, L2 in L2Normalize
            r"[A-Z]?[a-z]+[0-9]*",  # a word: Soft, norm, conv2
            r"[0-9]+",
        ]
    )
)
_ALL_CAPS_WORDS = tuple(word for word in _KNOWN_WORDS if word.isupper())


def snake_case(name: str) -> str:
    """The module name for a class name: SoftClamp -> soft_clamp, RMSNorm -> rms_norm.

    Acronyms stay together (GELUTanh -> gelu_tanh, BCEWithLogits -> bce_with_logits), and
    the words of _KNOWN_WORDS are one word each, also at the end of an acronym run:
    StudentTNLL -> student_t_nll, SwiGLU -> swiglu, GaussianNLLLoss -> gaussian_nll_loss.
    """
    words: list[str] = []
    for word in _WORD.findall(name):
        suffix = next((w for w in _ALL_CAPS_WORDS if word.endswith(w) and word != w), None)
        if word.isupper() and suffix is not None and word not in _KNOWN_WORDS:
            words += [word[: -len(suffix)], suffix]
        else:
            words.append(word)
    return "_".join(word.lower() for word in words)


def class_name(node: Node) -> str:
    name = read.string(node, "name")
    if not CLASS_NAME.match(name) or keyword.iskeyword(name):
        raise SpecError(
            node.location, f"expected a CamelCase class name like SoftClamp, got {name!r}", "name"
        )
    return name


def derived_module(node: Node, name: str) -> str:
    """snake_case(name), refused where it cannot name a module (Class -> class)."""
    module = snake_case(name)
    if module in RESERVED_NAMES or keyword.iskeyword(module):
        message = f"the module name {module!r} (from {name!r}) is reserved; set `module:`"
        raise SpecError(node.location, message, "name")
    return module


def module_name(node: Node) -> str:
    module = read.string(node, "module")
    if module in RESERVED_NAMES:
        raise SpecError(node.location, reserved_message(module), "module")
    if not _MODULE_NAME.match(module) or keyword.iskeyword(module):
        raise SpecError(
            node.location, f"expected a snake_case module name, got {module!r}", "module"
        )
    return module


def check_name(name: str, location: Location, path: str, class_name: str) -> None:
    """Refuse names that are not identifiers or that the generated code needs."""
    if not name.isidentifier():
        raise SpecError(location, f"{name!r} is not a valid Python identifier", path)
    if keyword.iskeyword(name):
        raise SpecError(location, f"{name!r} is a Python keyword", path)
    if name in RESERVED_NAMES:
        raise SpecError(location, reserved_message(name), path)
    if is_function_name(name):
        raise SpecError(location, f"{name!r} is a function of the language", path)
    if name == class_name:
        raise SpecError(location, f"{name!r} is the name of the class", path)


def reserved_message(name: str) -> str:
    reserved = ", ".join(sorted(RESERVED_NAMES))
    return f"{name!r} is reserved (reserved names: {reserved})"
