"""PyTorch's OpInfo samples as a peer test suite: every op variant the mapping claims.

For each op variant in tests/opinfo_specs.py, each of its OpInfo samples (a deterministic
subset; SYMGRAD_OPINFO_ALL=1 runs all) becomes a symgrad spec whose generated Function
must agree with the torch op: forward values and a vector-Jacobian product in float64
and float32, and gradcheck on a few float64 samples. A sample the spec language cannot
express is skipped; an op whose functions are not in the language yet is skipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("expecttest")  # torch's OpInfo database imports it

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opinfo_specs import MAPPINGS, OpMapping, run_mapping


@pytest.mark.parametrize("mapping", MAPPINGS, ids=[m.key for m in MAPPINGS])
def test_opinfo(mapping: OpMapping) -> None:
    result = run_mapping(mapping)
    failures = result.failures
    if failures:
        lines = [f.status for f in failures]
        pytest.fail(f"{len(failures)} of {result.samples} samples fail:\n" + "\n".join(lines))
    if not result.passes:
        pytest.skip(result.status)
