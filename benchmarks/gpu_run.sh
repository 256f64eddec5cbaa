#!/usr/bin/env bash
# Everything chapter 8 needs from a CUDA machine, in one go: the tests marked `gpu` (the
# Triton kernels forward and backward against the reference, the plain-PyTorch
# memory-efficient attention, chunked attention and the reference on CUDA tensors), then
# the GPU benchmark, whose results file the chapter plots.
#
#   bash benchmarks/gpu_run.sh [RESULTS_DIR] [all|tests|bench]   # default: benchmarks/results all
#
# It uses the machine's own python3 (with torch, triton and pytest; pytest-xdist if present)
# and the repository's sources, no virtualenv: GPU machines often cannot reach a package
# index, and these test files import nothing else. BENCH_BUDGET_S (default 300) bounds the
# benchmark: it stops starting measurements after that many seconds and keeps what it has.
# Commit the JSON it writes under benchmarks/results/ and rebuild the book.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-benchmarks/results}"
what="${2:-all}"
case "$what" in all|tests|bench) ;; *) echo "second argument: all, tests or bench (got '$what')"; exit 2;; esac
mkdir -p "$out"
export PYTHONPATH="src:tests${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import torch, triton; assert torch.cuda.is_available(), "no CUDA device"; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())' || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv 2>&1 | tee "$out/nvidia_smi.txt"
tests=0 bench=0
if [ "$what" != bench ]; then
  # Compiling the kernels for every dtype, head dim and shape class is most of the tests' time:
  # spread it over processes when pytest-xdist is there.
  parallel=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 8")
  timeout "${TESTS_TIMEOUT_S:-300}" python3 -m pytest -q -p no:cacheprovider -m gpu $parallel \
    tests/test_triton_attention.py tests/test_memory_efficient.py tests/test_chunked.py \
    tests/test_scaling.py tests/test_qkv.py tests/checks/test_checks_package.py 2>&1 | tee "$out/gpu_tests.txt"
  tests=${PIPESTATUS[0]}
fi
if [ "$what" != tests ]; then
  python3 benchmarks/attention_gpu.py --out "$out" --budget-s "${BENCH_BUDGET_S:-300}" 2>&1 | tee "$out/gpu_benchmark.txt"
  bench=${PIPESTATUS[0]}
fi
echo "tests exit $tests, benchmark exit $bench"
[ "$tests" = 0 ] && [ "$bench" = 0 ]
