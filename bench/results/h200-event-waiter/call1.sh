#!/usr/bin/env bash
# Call 1: the blocking-event probe (C), then the event waiter against the naps (probe_watch, 3 rounds alternating),
# then the CUDA GPU tests with the event waiter.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
echo "== probe_event_wait"
gcc -O2 -o /tmp/pew scripts/probe_event_wait.c -ldl -lpthread && timeout 60 /tmp/pew arig/kernels/kernels.cubin 200 2>&1 | tee $OUT/pew.log
echo "== build"
python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "== probe_watch"
for r in 1 2 3; do for b in poll event; do
  ARIG_CUDA_BACKSTOP=$b timeout 60 python3 scripts/probe_watch.py --json $OUT/watch-$b-$r.json 2>&1
done; done | tee $OUT/watch.log
echo "== GPU tests, event waiter"
ARIG_CUDA_BACKSTOP=event ARIG_GPU_REQUIRED=1 timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/gpu/test_cuda_gpu.py tests/gpu/test_close_in_stream_order_gpu.py tests/gpu/test_interop_gpu.py tests/gpu/test_graphs_gpu.py tests/gpu/test_misuse_refused_on_a_gpu.py tests/gpu/test_release_after_loop_close_gpu.py tests/gpu/test_work_after_another_device_gpu.py tests/gpu/test_trio_gpu.py 2>&1 | tail -15 | tee $OUT/tests.log
