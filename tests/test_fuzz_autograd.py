"""Random specs against autograd (tests/fuzz_specs.py): generation, forward, vjp with
cotangents on every output, jvp, gradcheck and gradgradcheck must all agree.

CI runs SYMGRAD_FUZZ_SPECS seeds (40 by default); `python tools/fuzz_autograd.py
--specs 10000` runs thousands in parallel and summarises.
"""

from __future__ import annotations

import os

import pytest

from tests.fuzz_specs import check_case, random_case

SPECS = int(os.environ.get("SYMGRAD_FUZZ_SPECS", "40"))


@pytest.mark.filterwarnings("ignore:`torch.jit.script.*is deprecated:DeprecationWarning")
@pytest.mark.parametrize("seed", range(SPECS))
def test_random_spec_agrees_with_autograd(seed: int) -> None:
    case = random_case(seed)
    failure = check_case(case)
    assert failure is None, f"seed {seed}: {failure}\n{case.yaml()}"
