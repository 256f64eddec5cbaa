#!/usr/bin/env bash
# Everything chapter 8 needs from a CUDA machine, in one go: the tests that run on the GPU
# (the Triton kernel against SDPA, the reference and chunked attention in float16/bfloat16,
# the checks on CUDA tensors), then the GPU benchmark, whose results file the chapter plots.
#
#   bash benchmarks/gpu_run.sh [RESULTS_DIR] [all|tests|bench]   # default: benchmarks/results all
#
# Where one command may run only so long, run "tests" and "bench" as two commands.
# It uses the machine's own python3 (with torch, triton, pytest and hypothesis) and the
# repository's sources, no virtualenv: GPU machines often cannot reach a package index.
# Commit the JSON it writes and rebuild the book.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-benchmarks/results}"
what="${2:-all}"
case "$what" in all|tests|bench) ;; *) echo "second argument: all, tests or bench (got '$what')"; exit 2;; esac
mkdir -p "$out"
export PYTHONPATH="src:tests${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import torch, triton; assert torch.cuda.is_available(), "no CUDA device"; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())' || exit 1
tests=0 bench=0
if [ "$what" != bench ]; then
  # Only the test files whose imports a bare GPU image has (no nbgrader, jupyter-book, playwright).
  python3 -m pytest -q -p no:cacheprovider \
    tests/test_triton_attention.py tests/test_chunked.py tests/test_efficient.py \
    tests/test_scaling.py tests/test_multi_head.py tests/test_qkv.py \
    tests/test_checks_more.py tests/test_properties.py tests/test_masking.py 2>&1 | tee "$out/gpu_tests.txt"
  tests=${PIPESTATUS[0]}
fi
if [ "$what" != tests ]; then
  python3 benchmarks/attention_gpu.py --out "$out" 2>&1 | tee "$out/gpu_benchmark.txt"
  bench=${PIPESTATUS[0]}
fi
echo "tests exit $tests, benchmark exit $bench"
[ "$tests" = 0 ] && [ "$bench" = 0 ]
