"""The fused loops' own math (templates/cpp/fused.cpp.jinja) against float64, compiled.

Building LibTorch code costs about 20 s, so this runs in the C++ slow mode only:

    SYMGRAD_CPP_TESTS=all python -m pytest tests/test_cpp_vec_math.py
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.utils.cpp_extension

from symgrad.backends.cpp.render import _environment
from tests.conftest import CPP_SLOW_MODE

pytestmark = CPP_SLOW_MODE

_KERNEL = """
torch::Tensor vec_exp_of(const torch::Tensor& x) {
  using Vec = at::vec::Vectorized<float>;
  torch::Tensor y = torch::empty_like(x);
  const float* in = x.const_data_ptr<float>();
  float* out = y.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); i += Vec::size()) {
    const int64_t count = std::min<int64_t>(Vec::size(), x.numel() - i);
    fused_store<Vec>(vec_exp(fused_load<false, Vec>(in, 0, i, count)), out, i, count);
  }
  return y;
}

torch::Tensor vec_log1p_unit_of(const torch::Tensor& t) {
  torch::Tensor y = torch::empty_like(t);
  AT_DISPATCH_FLOATING_TYPES(t.scalar_type(), "vec_log1p_unit_of", [&] {
    using Vec = at::vec::Vectorized<scalar_t>;
    const scalar_t* in = t.const_data_ptr<scalar_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    for (int64_t i = 0; i < t.numel(); i += Vec::size()) {
      const int64_t count = std::min<int64_t>(Vec::size(), t.numel() - i);
      fused_store<Vec>(vec_log1p_unit(fused_load<false, Vec>(in, 0, i, count)), out, i, count);
    }
  });
  return y;
}
"""


@pytest.fixture(scope="module")
def helpers(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The template's helpers and loops calling them, built as the loader builds."""
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        flags = ["-O3", "-mavx2", "-mfma", "-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2"]
    else:
        flags = ["-O3"]
    macros = _environment().get_template("fused.cpp.jinja").module
    source = (
        "#include <ATen/cpu/vec/functional.h>\n#include <ATen/cpu/vec/vec.h>\n"
        "#include <ATen/Dispatch.h>\n#include <c10/util/accumulate.h>\n"
        "#include <algorithm>\n#include <array>\n"
        + str(macros.helpers())  # type: ignore[attr-defined]
        + _KERNEL
    )
    directory: Path = tmp_path_factory.mktemp("vec_math")
    return torch.utils.cpp_extension.load_inline(
        "symgrad_vec_math",
        source,
        functions=["vec_exp_of", "vec_log1p_unit_of"],
        extra_cflags=flags,
        build_directory=str(directory),
    )


def test_vec_exp_within_one_eps_of_exp_on_every_kind_of_float(helpers: ModuleType) -> None:
    """Random bit patterns (every exponent), a dense sweep over the finite range, the
    specials, and a length that leaves a partial vector at the end."""
    generator = torch.Generator().manual_seed(0)
    bits = torch.randint(-(2**31), 2**31 - 1, (4_000_000,), dtype=torch.int32, generator=generator)
    specials = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 88.72, 88.73])
    x = torch.cat([bits.view(torch.float32), torch.linspace(-105, 90, 1_000_003), specials])
    y = helpers.vec_exp_of(x)
    exact = torch.exp(x.double())
    rounded = exact.float()
    normal = torch.isfinite(rounded) & (rounded >= torch.finfo(torch.float32).tiny)
    relative = ((y.double() - exact).abs() / exact)[normal]
    assert relative.max().item() <= torch.finfo(torch.float32).eps
    assert torch.equal(torch.isnan(y), torch.isnan(x))
    assert torch.equal(torch.isinf(y), torch.isinf(rounded))
    subnormal = ~normal & torch.isfinite(rounded)
    smallest = 2.0**-149
    assert (y[subnormal].double() - rounded[subnormal].double()).abs().max().item() <= smallest


@pytest.mark.parametrize(
    ("dtype", "ulps"), [(torch.float32, 2.0), (torch.float64, 4.0)], ids=["float", "double"]
)
def test_vec_log1p_unit_within_a_few_ulps_of_log1p_on_0_1(
    helpers: ModuleType, dtype: torch.dtype, ulps: float
) -> None:
    """Dense over [0, 1] (softplus's exp(-|u|)), tiny values down to the subnormals, and
    the ends; to a few units in the last place of log1p, relative."""
    tiny = torch.logspace(-300 if dtype == torch.float64 else -44, -3, 100_003, dtype=torch.float64)
    t = torch.cat([torch.linspace(0, 1, 2_000_003, dtype=torch.float64), tiny])
    t = t.to(dtype)
    t = t[t > 0]
    y = helpers.vec_log1p_unit_of(t)
    exact = torch.log1p(t.double())
    relative = ((y.double() - exact).abs() / exact).max().item()
    assert relative <= ulps * torch.finfo(dtype).eps
    assert helpers.vec_log1p_unit_of(torch.zeros(3, dtype=dtype)).eq(0).all()
