#!/usr/bin/env bash
# The whole GPU suite in one call on a GPU machine (the H200 of the device tool), within about 9 minutes:
# wheels, the native core built in place, facts, top, the demos, the GPU tests, test_cuda_gpu.py again
# with ARIG_NO_MEMOPS=1 and with ARIG_PURE=1, then the benchmarks; the bench table is printed last.
# The first test run is watched (scripts/pytest_watched.sh): one that hangs at exit after its session is killed, its threads printed.
# Writes under $OUT (5 files, within the device tool's 8): suite.log (everything), gpu_tests.xml (the first
# test run), bench/results.json, bench/table.md, and plots.tgz (the bench's plots, the example server's results).
# Usage: bash scripts/gpu_suite.sh [--no-bench] [--tests PATH] [-k EXPR]
#   -k EXPR narrows every test run (the first and the two forced-path runs); without it they run everything.
# Every step has a timeout, capped so that the whole script ends within SUITE_SECONDS (default 540).
# The test plugins (pytest, pytest-asyncio, pytest-timeout, hypothesis) and uvloop travel as wheels in .whl/
# (scripts/fetch_wheels.sh fetches them).
set -u
T0=$SECONDS
BUDGET=${SUITE_SECONDS:-540}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
BENCH=1; TESTS=tests/gpu; KEXPR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-bench) BENCH=0 ;;
    -k) KEXPR="$2"; shift ;;
    --tests) TESTS="$2"; shift ;;
  esac
  shift
done
exec > >(tee -a "$OUT/suite.log") 2>&1
TEE_PID=$!
step() { echo; echo "===== $* ($(date -u +%H:%M:%S), ${SECONDS}s)"; }
SUMMARY=""
# run NAME WANT RESERVE CMD...: CMD under `timeout`, at most WANT seconds and never into the last RESERVE
# seconds of the budget (kept for the steps after it); skipped when fewer than 15 s would be left.
run() {
  local name=$1 want=$2 reserve=$3 limit rc
  shift 3
  limit=$(( BUDGET - (SECONDS - T0) - reserve ))
  [ "$limit" -gt "$want" ] && limit=$want
  if [ "$limit" -lt 15 ]; then
    echo "$name: skipped, out of time (${limit}s left for it)"
    SUMMARY="$SUMMARY $name=skipped"
    return 0
  fi
  timeout -k 10 "$limit" "$@"
  rc=$?
  [ "$rc" = 124 ] && echo "$name: TIMED OUT after ${limit}s"
  echo "$name exit: $rc"
  SUMMARY="$SUMMARY $name=$rc"
  return 0
}
# Time kept for the benchmarks and for the two forced-path test runs (at least this much each).
BENCH_MIN=$(( BENCH ? 200 : 0 )); EXTRA_MIN=60

step "wheels"
if ls .whl/*.whl >/dev/null 2>&1; then
  timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
else
  echo "no .whl/: using the machine's packages"
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 ARIG_GPU_REQUIRED=1
step "machine"
echo "commit: ${ARIG_COMMIT:-unknown}"
timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,pci.bus_id --format=csv
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
python3 - <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
def v(p):
    try:
        return version(p)
    except PackageNotFoundError:
        return "missing"
print(sys.version.split()[0], *(f"{p} {v(p)}" for p in ("numpy", "anyio", "pytest", "pytest-asyncio", "pytest-timeout", "hypothesis", "uvloop", "torch", "cupy-cuda13x")))
EOF
if [ -f setup.py ]; then
  step "python3 setup.py build_ext --inplace -q (the native core)"
  run build 180 0 python3 setup.py build_ext --inplace -q  # never skipped for time: without it every step runs the pure path
fi
step "python -m arig info"
run info 60 $(( BENCH_MIN + 2 * EXTRA_MIN + 90 )) python3 -m arig info
echo "with ARIG_PURE=1:"; ARIG_PURE=1 timeout 60 python3 -m arig info 2>&1 | grep -i -E "^[A-Z]|completion"
step "python -m arig top --json --count 1"
run top 30 $(( BENCH_MIN + 2 * EXTRA_MIN + 90 )) python3 -m arig top --json --count 1
step "python -m arig demo --device cuda:0"
run demo_cuda 90 $(( BENCH_MIN + 2 * EXTRA_MIN + 90 )) python3 -m arig demo --device cuda:0 --quiet
step "the README's example, as printed"
awk '/^```python$/{f=1;next}/^```$/{if(f){f=0;exit}}f' README.md > /tmp/readme_example.py
run readme_example 60 $(( BENCH_MIN + 2 * EXTRA_MIN + 90 )) python3 /tmp/readme_example.py
step "every README example (tests/test_readme.py: the torch one too)"
run readme_all 120 $(( BENCH_MIN + 2 * EXTRA_MIN + 90 )) python3 -m pytest tests/test_readme.py -q -rfEs -p no:cacheprovider
step "python -m arig demo --device nv:0 (the kernel-driver device)"
run demo_nv 60 $(( BENCH_MIN + 2 * EXTRA_MIN + 90 )) python3 -m arig demo --device nv:0 --quiet
step "python -m arig demo --device host"
run demo_host 60 $(( BENCH_MIN + 2 * EXTRA_MIN + 90 )) python3 -m arig demo --device host --tasks 16 --iters 50 --quiet
step "python -m arig demo --pipeline (the machine's devices: on one GPU its CUDA and NV devices)"
run demo_pipeline 60 $(( BENCH_MIN + 2 * EXTRA_MIN + 90 )) python3 -m arig demo --pipeline

K=(); [ -n "$KEXPR" ] && K=(-k "$KEXPR")
step "GPU tests ($TESTS)"
run gpu_tests 240 $(( BENCH_MIN + 2 * EXTRA_MIN )) bash scripts/pytest_watched.sh "$OUT/gpu_tests.xml" python3 -m pytest "$TESTS" -v -rA -p no:cacheprovider --timeout 120 --junitxml "$OUT/gpu_tests.xml" ${K[@]+"${K[@]}"}
step "GPU completion tests without stream memory operations (ARIG_NO_MEMOPS=1 tests/gpu/test_cuda_gpu.py)"
run tests_no_memops 150 $(( BENCH_MIN + EXTRA_MIN )) env ARIG_NO_MEMOPS=1 python3 -m pytest tests/gpu/test_cuda_gpu.py -v -rfEs -p no:cacheprovider --timeout 120 ${K[@]+"${K[@]}"}
step "GPU completion tests on the pure-Python path (ARIG_PURE=1 tests/gpu/test_cuda_gpu.py)"
run tests_pure 150 "$BENCH_MIN" env ARIG_PURE=1 python3 -m pytest tests/gpu/test_cuda_gpu.py -v -rfEs -p no:cacheprovider --timeout 120 ${K[@]+"${K[@]}"}

step "the example server under load on cuda:0 against the run_in_executor baseline (examples/serve/bench.py)"
run serve_bench 170 $(( BENCH_MIN + 10 )) python3 -m examples.serve.bench --device cuda:0 --levels 64,256 --requests 6000 --clients 4 --max-seconds 12 --out "$OUT/serve"
step "the pytest plugin: its example file, its tests and fault injection on this GPU"
run plugin_example 90 $(( BENCH_MIN + 10 )) python3 -m pytest -q -p arig.testing.plugin examples/test_with_arig.py tests/test_testing_faults.py tests/test_testing_plugin.py -rfEs -p no:cacheprovider
step "the Ray Serve replica's own code path, without Ray (examples.ray_serve.replica_check): cuda:0 (torch model, then the kernels model) and nv:0"
run replica_cuda 60 $(( BENCH_MIN + 10 )) python3 -m examples.ray_serve.replica_check --device cuda:0
run replica_cuda_kernels 60 $(( BENCH_MIN + 10 )) python3 -m examples.ray_serve.replica_check --device cuda:0 --model kernels
run replica_nv 60 $(( BENCH_MIN + 10 )) python3 -m examples.ray_serve.replica_check --device nv:0
step "the native core's counters and CPU per thread (scripts/probe_latency.py)"
run probe 60 $(( BENCH_MIN + 10 )) python3 scripts/probe_latency.py --us 0,50,200,1000,10000 --n 100
step "the NV device on the native core: its counters, CPU per thread, GPU-to-resume times; the GPU timer's rate (scripts/probe_latency.py --device nv, scripts/probe_nv_timer.py)"
run probe_nv 45 $(( BENCH_MIN + 10 )) python3 scripts/probe_latency.py --device nv --us 0,50,200,1000,10000 --n 100
run probe_nv_timer 45 $(( BENCH_MIN + 10 )) python3 scripts/probe_nv_timer.py
step "the same slice of Python on the loop thread after it slept 0.05-50 ms, against warm (scripts/probe_cold_wake.py)"
run probe_cold 30 $(( BENCH_MIN + 10 )) python3 scripts/probe_cold_wake.py
step "this VM's wake frontier: how late and at what CPU a loop asleep in its selector sees a moment, woken a given lead ahead (scripts/probe_wake_frontier.py; no GPU)"
run probe_frontier 35 $(( BENCH_MIN + 10 )) python3 scripts/probe_wake_frontier.py --n 120
step "how soon a thread blocked in cuEventSynchronize, and a host function, see work end (scripts/probe_event_wait.c)"
run probe_event_wait 40 $(( BENCH_MIN + 10 )) bash -c 'gcc -O2 -o /tmp/probe_event_wait scripts/probe_event_wait.c -ldl -lpthread && /tmp/probe_event_wait arig/kernels/kernels.cubin 100'
step "how long the GPU takes to join another library's stream: an event, a wait on a word, a write on that stream (scripts/probe_join.c)"
run probe_join 20 $(( BENCH_MIN + 10 )) bash -c 'gcc -O2 -o /tmp/probe_join scripts/probe_join.c -ldl && /tmp/probe_join arig/kernels/kernels.cubin 2000'
step "each library's own cost of waking a parked task, asyncio against trio, no arig (scripts/loop_floor.py)"
run loop_floor 30 $(( BENCH_MIN + 10 )) python3 scripts/loop_floor.py --repeat 3
step "one round trip under trio beside asyncio, in trio's task steps and I/O waits, one task and 64 (scripts/probe_trio_steps.py)"
run probe_trio 25 $(( BENCH_MIN + 10 )) python3 scripts/probe_trio_steps.py --n 3000
run probe_trio_64 25 $(( BENCH_MIN + 10 )) python3 scripts/probe_trio_steps.py --n 12800 --tasks 64
echo "with ARIG_TRIO_SPIN=0 (no spin before trio blocks):"
run probe_trio_nospin 25 $(( BENCH_MIN + 10 )) env ARIG_TRIO_SPIN=0 python3 scripts/probe_trio_steps.py --n 3000
step "the Python fill beside the Launch and torch's busy poll: one task, 32 in a row, 64 tasks (scripts/probe_python_fill.py)"
run probe_pyfill 45 $(( BENCH_MIN + 10 )) python3 scripts/probe_python_fill.py --repeat 1
step "awaiting a torch stream, step by step, and what the loop had ready when a park spin looked (scripts/probe_interop.py)"
run probe_interop 30 $(( BENCH_MIN + 10 )) bash -c 'cd scripts && python3 probe_interop.py'
step "torch work then an arig marker, phase by phase: the host side or the GPU's (scripts/probe_torch_split.py)"
run probe_torch_split 35 $(( BENCH_MIN + 10 )) bash -c 'cd scripts && python3 probe_torch_split.py'
step "the demos' longest stall, split into the longest callback and the longest pass (scripts/probe_demo_stall.py)"
run probe_stall_nv 30 $(( BENCH_MIN + 10 )) python3 scripts/probe_demo_stall.py --device nv:0 --repeat 1
run probe_stall_cuda 30 $(( BENCH_MIN + 10 )) python3 scripts/probe_demo_stall.py --device cuda:0 --repeat 1

if [ "$BENCH" = 1 ]; then
  step "benchmarks"
  # The bench's own --max-seconds ends it (writing what it measured) before `timeout` would.
  left=$(( BUDGET - (SECONDS - T0) - 10 )); [ "$left" -gt 300 ] && left=300
  run bench "$left" 10 python3 -m bench --out "$OUT/bench" --max-seconds $(( left > 60 ? left - 25 : 35 ))
fi
step "done in $(( SECONDS - T0 )) s:$SUMMARY"
if [ "$BENCH" = 1 ] && [ -f "$OUT/bench/table.md" ]; then
  step "bench table ($OUT/bench/table.md)"
  cat "$OUT/bench/table.md"
fi
exec 1>&- 2>&-
wait "$TEE_PID" 2>/dev/null || sleep 1
# The device tool returns at most 8 files from $OUT: the plots and the example server's files go
# into one archive (plots.tgz), beside suite.log, gpu_tests.xml, bench/results.json and bench/table.md.
(cd "$OUT" && files=$(find bench serve -type f ! -name results.json ! -name table.md 2>/dev/null) \
  && [ -n "$files" ] && tar czf plots.tgz $files && rm -f $files) || true
