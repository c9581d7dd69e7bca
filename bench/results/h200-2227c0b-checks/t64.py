"""64 tasks of empty kernels on one device: completions/s and CPU per completion, per loop."""
import sys, json
from bench._common import run_in_loop, concurrency_level
from bench._methods import open_method

async def main(kind):
    async with open_method("arig") as m:
        await concurrency_level(lambda _k: m.make_op(0), 64, 0.2, 0.5)
        r = await concurrency_level(lambda _k: m.make_op(0), 64, 0.3, 1.5)
        return r["completions_per_s"], r["cpu_us_per_completion"]

tag = sys.argv[1]
for loop in sys.argv[2:]:
    cps, cpu = run_in_loop(loop, main, loop)
    print(f"T64 {tag:6s} {loop:8s} {cps:10.0f}/s  {cpu:6.2f} us/compl", flush=True)
