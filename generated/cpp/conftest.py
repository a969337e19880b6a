"""Which generated C++ tests run: a few by default, all with SYMGRAD_CPP_TESTS=all.

Importing a module builds its C++ (about 20 s on one core, most of it parsing LibTorch's
headers; then cached by source hash), so the default run, CI's, tests six that cover
the target's features: a plain elementwise Function with number inputs (soft_clamp),
reductions with residual outputs and shape facts (layer_norm), several outputs
(logistic_moments), an in-place variant (leaky_relu), fused CPU loops
(mish_fused, built as its loader builds it), and options behind a C++ dispatcher
(weighted_squared_relu, with the tests of its two variants). They are built together in
one library, which parses the headers once; their loaders then find their operators
registered and build nothing (the loader's own build is tested in
tests/test_cpp_target.py). The slow mode builds and
tests every module through its loader:

    SYMGRAD_CPP_TESTS=all python -m pytest generated/cpp -n 2
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import torch
import torch.utils.cpp_extension

HERE = Path(__file__).parent
SUBSET = frozenset(
    {"soft_clamp", "layer_norm", "logistic_moments", "leaky_relu", "mish_fused"}
    | {"weighted_squared_relu"}
)
# The tests of the subset: a module's own, and those of the variants its options select.
SUBSET_TESTS = SUBSET | {
    "weighted_squared_relu_plain",
    "weighted_squared_relu_clamp_scale",
}
EVERY = os.environ.get("SYMGRAD_CPP_TESTS") == "all"


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    """Skip the test modules outside SUBSET unless every one is asked for."""
    if EVERY or not collection_path.name.startswith("test_"):
        return None
    return collection_path.stem.removeprefix("test_") not in SUBSET_TESTS or None


def _build_together(modules: tuple[str, ...]) -> None:
    """Build `modules` as one library and load it (their operators get registered)."""
    sources = [HERE / f"{module}.cpp" for module in modules]
    text = "".join(f'#include "{source}"\n' for source in sources)
    flags = _compile_flags()
    key = hashlib.sha256(
        b"".join(s.read_bytes() for s in sources)
        + (torch.__version__ + " ".join(flags)).encode()
    ).hexdigest()[:16]
    cache = os.environ.get("SYMGRAD_CPP_CACHE")
    root = Path(cache) if cache else Path.home() / ".cache" / "symgrad" / "cpp"
    directory = root / f"generated_subset_{key}"
    directory.mkdir(parents=True, exist_ok=True)
    bundle = directory / "subset.cpp"
    if not bundle.exists() or bundle.read_text() != text:
        bundle.write_text(text)
    torch.utils.cpp_extension.load(
        name=f"symgrad_generated_subset_{key}",
        sources=[str(bundle)],
        build_directory=str(directory),
        extra_cflags=flags,
        extra_ldflags=[flag for flag in flags if flag == "-fopenmp"],
        is_python_module=False,
    )


def _compile_flags() -> list[str]:
    """The flags a fused module's loader builds with (OpenMP, vector units, -O3)."""
    flags = ["-fopenmp"] if torch._C.has_openmp and sys.platform == "linux" else []
    flags += ["-O3"]
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        flags += ["-mavx2", "-mfma", "-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2"]
    return flags


def _has_ninja() -> bool:
    """ninja on PATH, or the ninja package's, put on PATH as the loaders do."""
    if shutil.which("ninja") is None:
        try:
            import ninja
        except ImportError:
            return False
        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
    return True


if not EVERY and shutil.which(os.environ.get("CXX", "c++")) and _has_ninja():
    _build_together(tuple(sorted(SUBSET)))
