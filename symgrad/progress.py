"""A dependency-free progress bar that draws only on an interactive terminal.

In a pipe or a CI log a bar is noise (each redraw becomes a line), so `Progress` is
silent unless its stream is a TTY.
"""

from __future__ import annotations

from types import TracebackType
from typing import TextIO

# Characters of the bar itself, between the brackets.
_BAR_WIDTH = 30


class Progress:
    """Counts finished items and redraws one `\\r` line for them on a TTY."""

    def __init__(self, total: int, stream: TextIO, *, label: str, enabled: bool = True) -> None:
        self.total = total
        self.done = 0
        self.label = label
        self.stream = stream
        # Draw only when asked to and when a person is watching the stream.
        self.active = enabled and total > 0 and stream.isatty()
        self._width = 0

    def __enter__(self) -> Progress:
        self._draw()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def advance(self) -> None:
        """Count one more finished item and redraw."""
        self.done += 1
        self._draw()

    def close(self) -> None:
        """Erase the bar, so that what is printed next starts on a clean line."""
        if self.active and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        self._width = 0

    def line(self) -> str:
        """The bar as text, e.g. `generating [#####-----] 3/6`."""
        filled = _BAR_WIDTH * self.done // self.total if self.total else _BAR_WIDTH
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        return f"{self.label} [{bar}] {self.done}/{self.total}"

    def _draw(self) -> None:
        if not self.active:
            return
        text = self.line()
        self.stream.write("\r" + text)
        self.stream.flush()
        self._width = len(text)
