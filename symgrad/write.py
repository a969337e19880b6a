"""Write generated files atomically, touching only files whose content changes.

The same comparison serves `symgrad gen --check` and `--diff`: `pending_changes` says
which files a write would create or rewrite, without touching the disk.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileChange:
    """A generated file whose text on disk differs from what symgrad would write."""

    path: Path
    # The text on disk, or None when the file does not exist yet.
    old: str | None
    # The text symgrad would write.
    new: str

    @property
    def verb(self) -> str:
        """`create` for a missing file, `rewrite` for a stale one."""
        return "create" if self.old is None else "rewrite"


def pending_changes(
    files: Mapping[str, str], directory: str | os.PathLike[str]
) -> list[FileChange]:
    """The files of `files` (name -> text) that writing into `directory` would change.

    Line endings are compared as text, so a checkout with CRLF line ends is current.
    """
    directory = Path(directory)
    changes = []
    for name, text in files.items():
        path = directory / name
        old = _read_text(path)
        if old != text:
            changes.append(FileChange(path, old, text))
    return changes


def stale_files(files: Mapping[str, str], directory: str | os.PathLike[str]) -> list[Path]:
    """The paths in `directory` that are missing or differ from `files` (name -> text)."""
    return [change.path for change in pending_changes(files, directory)]


def write_files(files: Mapping[str, str], directory: str | os.PathLike[str]) -> list[Path]:
    """Write `files` (name -> text) into `directory`; return the paths that changed.

    Each file is written to a temporary file beside it and renamed into place, so a
    reader never sees half a file. Unchanged files are left alone, keeping their mtime.
    """
    Path(directory).mkdir(parents=True, exist_ok=True)
    changes = pending_changes(files, directory)
    for change in changes:
        _write_atomically(change.path, change.new)
    return [change.path for change in changes]


def unified_diff(change: FileChange, label: str) -> str:
    """A unified diff of `change` in git's style, the file named `label` (a/label, b/label)."""
    old = [] if change.old is None else _lines(change.old)
    before = "/dev/null" if change.old is None else f"a/{label}"
    lines = difflib.unified_diff(old, _lines(change.new), before, f"b/{label}")
    return "".join(_terminated(line) for line in lines)


def _lines(text: str) -> list[str]:
    """`text` split after each newline (and only there, unlike `str.splitlines`)."""
    lines = [f"{line}\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _terminated(line: str) -> str:
    """`line` ending in a newline, marked as patch tools expect when the file lacked one."""
    return line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n"


def _read_text(path: Path) -> str | None:
    """The text of `path` with universal newlines, or None if there is no such file."""
    if not path.is_file():
        return None
    data = path.read_bytes().decode("utf-8", errors="replace")
    return data.replace("\r\n", "\n").replace("\r", "\n")


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
