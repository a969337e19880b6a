"""symgrad's errors: a message tied to a place in a spec file, and the hint for a misspelling."""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A 1-based line and column in a spec source (a file path or a label like `<dict>`)."""

    source: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        parts = [self.source]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def shifted(self, line_offset: int, column_offset: int) -> Location:
        """Return the location `line_offset` lines and `column_offset` columns further on."""
        if self.line is None:
            return self
        column = (self.column or 1) + column_offset if line_offset == 0 else column_offset + 1
        return Location(self.source, self.line + line_offset, column)


class SpecError(Exception):
    """A spec is malformed; `str(error)` is `file:line:col: key.path: message`."""

    def __init__(self, location: Location, message: str, key_path: str = "") -> None:
        self.location = location
        self.key_path = key_path
        self.message = message
        prefix = f"{key_path}: " if key_path else ""
        super().__init__(f"{location}: {prefix}{message}")


class InternalError(SpecError):
    """symgrad failed on a spec it accepted: a bug to report, said like a spec error."""

    def __init__(self, location: Location, error: BaseException) -> None:
        detail = " ".join(f"{type(error).__name__}: {error}".split())
        message = (
            f"internal error: {detail[:300]} (a bug in symgrad: please report it " "with this spec)"
        )
        super().__init__(location, message)


def did_you_mean(name: str, candidates: object, count: int = 1) -> str:
    """Return ' (did you mean X?)', or ' (did you mean X, Y or Z?)', for the closest
    candidates (at most `count`), or ''."""
    names = sorted(str(c) for c in candidates)  # type: ignore[attr-defined]
    close = [repr(c) for c in difflib.get_close_matches(name, names, n=count)]
    if not close:
        return ""
    listed = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f" (did you mean {listed}?)"
