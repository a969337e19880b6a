"""The registry of backends by name: the built-in ones, and any registered at run time."""

from __future__ import annotations

from symgrad.backends import cpp, python
from symgrad.backends.base import Backend

DEFAULT_TARGET = python.BACKEND.name

_BUILT_IN = (cpp.BACKEND, python.BACKEND)
_BACKENDS: dict[str, Backend] = {backend.name: backend for backend in _BUILT_IN}


class UnknownTargetError(LookupError):
    """A target name no backend is registered under."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown target {name!r}; the targets are: {', '.join(names())}")
        self.name = name


def register(backend: Backend) -> None:
    """Make `backend` available as `--target backend.name` (a plugin, or a test's toy)."""
    if backend.name in _BACKENDS and _BACKENDS[backend.name] is not backend:
        raise ValueError(f"a backend named {backend.name!r} is registered already")
    _BACKENDS[backend.name] = backend


def unregister(name: str) -> None:
    """Remove a backend registered with `register`; the built-in ones stay."""
    if any(backend.name == name for backend in _BUILT_IN):
        raise ValueError(f"the {name!r} backend is built in")
    _BACKENDS.pop(name, None)


def get(name: str) -> Backend:
    """The backend registered under `name`."""
    try:
        return _BACKENDS[name]
    except KeyError:
        raise UnknownTargetError(name) from None


def names() -> list[str]:
    """The registered targets, sorted."""
    return sorted(_BACKENDS)


def backends() -> list[Backend]:
    """The registered backends, sorted by name."""
    return [_BACKENDS[name] for name in names()]
