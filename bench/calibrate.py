"""`python -m bench --calibrate`: measure the primitives and store symgrad's cost table.

The table (symgrad/ad/costs.json) is what generation reads to decide what to save, which
identities pay and which CPU forms replace torch's kernels (symgrad.ad.costs). It is
measured on CPU, float32, at one size and thread count, and records the machine and the
command, so a committed table says where its numbers came from.
"""

from __future__ import annotations

from pathlib import Path

import torch

from bench.machine import describe
from bench.primitives import time_primitives
from symgrad.ad import costs

# The package's table, rewritten by --calibrate unless --output names another file.
TABLE = Path("symgrad/ad/costs.json")
CALIBRATION_SIZE = 1_000_000


def calibrate(elements: int, repeats: int, threads: int, command: str) -> costs.CostTable:
    """The cost table measured on this machine's CPU."""
    device = torch.device("cpu")
    measured = time_primitives(elements, repeats, device)
    relative = {cost.name: cost.relative for cost in measured}
    machine = f"{describe(device, threads)}; {elements:.0e} float32 elements".replace("+0", "")
    return costs.CostTable(machine, command, relative)


def write_table(table: costs.CostTable, path: Path) -> None:
    """Store `table` as JSON (symgrad.ad.costs.dump), checking that it parses back."""
    text = costs.dump(table)
    costs.parse(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
