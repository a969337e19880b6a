#!/usr/bin/env bash
# Every GPU check of one device session, in one run; everything lands under $OUT
# (default build/gpu). In the foreground, one after another, each under its own time limit:
#   1. the Triton kernels on CUDA (values, gradients, opcheck, torch.compile);
#   2. the Triton table (bench/triton_gpu.py: eager, torch.compile, fused at 1e6-1e8);
#   3. the CUDA bench of every case in float32 and bfloat16 at 1e6 and 1e7 (eager,
#      generated, fused, builtin), without torch.compile (step 2 has it);
#   4. a kernel profile of the cases that were slower than eager before (bench/profile_cases.py);
#   5. the small-size table on CUDA (bench/small.py --device cuda).
# In the background, niced, the 4-thread CPU table with the C++ fused loops, in two
# processes of four cases each (the machine has cores to spare; the C++ builds dominate).
#
#   bash bench/gpu_session.sh            # on a machine with an NVIDIA GPU and triton
#
# Where black or ninja is missing (a bare GPU image), put their wheels in .whl/ first:
# they are installed into /tmp/site.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
{ nvidia-smi -L; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
  nproc; command -v c++ g++ ninja; } > "$OUT/gpu.txt" 2>&1

cpu_table() {  # $1: a name for the files, $2: the cases
  OMP_NUM_THREADS=4 timeout "${CPU_S:-400}" nice -n 10 python3 -m bench --threads 4 \
    --sizes 1e6,1e7 --repeats 5 --cpp fused --no-primitives --cases "$2" \
    --output "$OUT/cpu_4threads_$1.md" > "$OUT/cpu_4threads_$1.log" 2>&1
}
cpu_table a silu,softplus,gelu_erf,gelu_tanh &
cpu_table b mish,swish_beta,screened_lj,huber &

timeout "${TESTS_S:-120}" python3 -m pytest -q -p no:cacheprovider -p no:xdist \
  tests/test_triton_cuda.py generated/test_mish_fused.py > "$OUT/cuda_tests.log" 2>&1
timeout "${TABLE_S:-300}" python3 -m bench.triton_gpu --out "$OUT" > "$OUT/triton_gpu.log" 2>&1
for dtype in float32 bfloat16; do
  timeout "${BENCH_S:-90}" python3 -m bench --device cuda --dtype $dtype --sizes 1e6,1e7 \
    --repeats 5 --no-primitives --no-compile --output "$OUT/bench_cuda_$dtype.md" \
    > "$OUT/bench_cuda_$dtype.log" 2>&1
done
timeout "${PROFILE_S:-60}" python3 -m bench.profile_cases --device cuda --out "$OUT" \
  --cases swish_beta,layer_norm,rms_norm,huber,screened_lj > "$OUT/profile.log" 2>&1
timeout "${SMALL_S:-60}" python3 -m bench.small --device cuda --rounds 7 --batch 20 \
  --output "$OUT/small_cuda.md" > "$OUT/small_cuda.log" 2>&1
wait
echo "done: $(ls "$OUT")"
