"""Write generated files atomically, touching only files whose content changes."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path


def write_files(files: Mapping[str, str], directory: str | os.PathLike[str]) -> list[Path]:
    """Write `files` (name -> text) into `directory`; return the paths that changed.

    Each file is written to a temporary file beside it and renamed into place, so a
    reader never sees half a file. Unchanged files are left alone, keeping their mtime.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in files.items():
        path = directory / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        _write_atomically(path, text)
        changed.append(path)
    return changed


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
