#!/usr/bin/env bash
# The GPU checks of one device session, in one run: the Triton kernels on CUDA (values,
# gradients, opcheck, torch.compile), then the Triton table (bench/triton_gpu.py), then a
# CUDA bench of the generated Functions. Everything lands under $OUT (default build/gpu).
#
#   bash bench/gpu_session.sh            # on a machine with an NVIDIA GPU and triton
#
# Where black is missing (a bare GPU image), put its wheels in .whl/ first: they are
# installed into /tmp/site.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
{ nvidia-smi -L; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } \
  > "$OUT/gpu.txt" 2>&1
timeout "${TESTS_S:-150}" python3 -m pytest -q -p no:cacheprovider -p no:xdist \
  tests/test_triton_cuda.py generated/test_mish_fused.py > "$OUT/cuda_tests.log" 2>&1
timeout "${TABLE_S:-300}" python3 -m bench.triton_gpu --out "$OUT" > "$OUT/triton_gpu.log" 2>&1
timeout "${BENCH_S:-120}" python3 -m bench --device cuda --sizes 1e7 --repeats 5 \
  --no-primitives --no-compile --output "$OUT/bench_cuda.md" > "$OUT/bench_cuda.log" 2>&1
echo "done: $(ls "$OUT")"
