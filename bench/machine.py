"""Describe the machine and the software a run used, for the report's header."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

import torch

import symgrad


def describe(device: torch.device, threads: int) -> str:
    """One line: processor or GPU, threads, torch, Python, symgrad and its commit, date."""
    if device.type == "cuda":
        hardware = f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    else:
        hardware = f"{cpu_model()} ({os.cpu_count()} logical CPUs), {threads} thread(s) used"
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{hardware}; torch {torch.__version__}; Python {platform.python_version()}; "
        f"symgrad {symgrad.__version__} {symgrad_commit()}; {today}"
    )


def cpu_model() -> str:
    """The processor's model name from /proc/cpuinfo, else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def symgrad_commit() -> str:
    """The git commit symgrad was imported from, marked when symgrad has local changes."""
    root = Path(symgrad.__file__).resolve().parent.parent
    try:
        commit = _git(root, "rev-parse", "--short", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--", "symgrad", "templates")
    except (OSError, subprocess.CalledProcessError):
        return "(not from a git checkout)"
    return f"(git {commit}{' with local changes' if dirty else ''})"


def _git(root: Path, *args: str) -> str:
    """Output of one git command run in `root`."""
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()
