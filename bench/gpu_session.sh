#!/usr/bin/env bash
# Every GPU check of one device session, in one run; everything lands under $OUT
# (default build/gpu). $STEPS names the steps to run (default all), in this order, each
# under its own time limit (<STEP>_S seconds):
#   tests    the Triton kernels on CUDA (values, gradients, saved tensors, double backward;
#            TESTS_K selects, e.g. "not compiled and not opcheck" to leave out the slow ones);
#   table    the Triton table (bench/triton_gpu.py: eager, torch.compile, fused, built-in
#            at 1e6-1e8, float32 then bfloat16; rows are written as they come);
#   bench    the CUDA bench of every case at 1e6 and 1e7 for each dtype of $DTYPES (eager,
#            generated, fused, builtin; torch.compile too unless BENCH_COMPILE=0);
#   profile  a kernel profile of the cases slower than eager before (bench/profile_cases.py);
#   small    the small-size table on CUDA (bench/small.py --device cuda);
#   cpu      in the background, niced, from the start: the 4-thread CPU table with the C++
#            fused loops, in two processes of four cases (the C++ builds dominate).
#
#   bash bench/gpu_session.sh            # on a machine with an NVIDIA GPU and triton
#   STEPS="tests table" TABLE_S=120 bash bench/gpu_session.sh
#
# Where black or ninja is missing (a bare GPU image), put their wheels in .whl/ first:
# they are installed into /tmp/site.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu}
STEPS=" ${STEPS:-tests table bench profile small cpu} "
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
{ nvidia-smi -L; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
  nproc; command -v c++ g++ ninja; } > "$OUT/gpu.txt" 2>&1
step() { [[ "$STEPS" == *" $1 "* ]]; }

cpu_table() {  # $1: a name for the files, $2: the cases
  OMP_NUM_THREADS=4 timeout "${CPU_S:-400}" nice -n 10 python3 -m bench --threads 4 \
    --sizes 1e6,1e7 --repeats 5 --cpp fused --no-primitives --cases "$2" \
    --output "$OUT/cpu_4threads_$1.md" > "$OUT/cpu_4threads_$1.log" 2>&1
}
if step cpu; then
  cpu_table a silu,softplus,gelu_erf,gelu_tanh &
  cpu_table b mish,swish_beta,screened_lj,huber &
fi
if step tests; then
  timeout "${TESTS_S:-120}" python3 -m pytest -q -p no:cacheprovider -p no:xdist \
    ${TESTS_K:+-k "$TESTS_K"} tests/test_triton_cuda.py generated/test_mish_fused.py \
    > "$OUT/cuda_tests.log" 2>&1
fi
if step table; then
  timeout "${TABLE_S:-300}" python3 -m bench.triton_gpu --out "$OUT" > "$OUT/triton_gpu.log" 2>&1
fi
if step bench; then
  for dtype in ${DTYPES:-float32 bfloat16}; do
    timeout "${BENCH_S:-90}" python3 -m bench --device cuda --dtype "$dtype" --sizes 1e6,1e7 \
      --repeats 5 --no-primitives $([ "${BENCH_COMPILE:-1}" = 0 ] && echo --no-compile) \
      --output "$OUT/bench_cuda_$dtype.md" > "$OUT/bench_cuda_$dtype.log" 2>&1
  done
fi
if step profile; then
  timeout "${PROFILE_S:-60}" python3 -m bench.profile_cases --device cuda --out "$OUT" \
    --cases swish_beta,layer_norm,rms_norm,huber,screened_lj > "$OUT/profile.log" 2>&1
fi
if step small; then
  timeout "${SMALL_S:-60}" python3 -m bench.small --device cuda --rounds 7 --batch 20 \
    --output "$OUT/small_cuda.md" > "$OUT/small_cuda.log" 2>&1
fi
wait
echo "done: $(ls "$OUT")"
