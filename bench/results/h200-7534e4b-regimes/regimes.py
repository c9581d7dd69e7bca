"""64 tasks of empty kernels, repeated: completions/s against how completions were seen (core counters), and whose CPU."""
import sys, time
import anyio, arig
sys.path.insert(0, ".")
from bench.sweep import ArigTarget, _image, _opener

async def one(kind):
    import sniffio
    dev = await arig.open(_opener(kind), stop_timeout=10)
    t = ArigTarget(dev, await dev.load(_image(kind)), kind)
    work = t.empty
    submit, wait = dev.submit, dev.wait
    done = [0]; stop = [time.perf_counter() + 0.2]
    async def task():
        while time.perf_counter() < stop[0]:
            await wait(await submit(work)); done[0] += 1
    async with anyio.create_task_group() as tg:
        for _ in range(64): tg.start_soon(task)
    done[0] = 0
    c0 = t.counters()
    stop[0] = time.perf_counter() + 1.0
    t0, p0, l0 = time.perf_counter(), time.process_time(), time.thread_time()
    async with anyio.create_task_group() as tg:
        for _ in range(64): tg.start_soon(task)
    w, p, l = time.perf_counter() - t0, time.process_time() - p0, time.thread_time() - l0
    c1 = t.counters()
    n = done[0]
    per = {k: (c1[k] - c0[k]) / n for k in ("spin_hits", "items", "eventfd_writes", "futex_wakes")}
    print(f"{kind}/{sniffio.current_async_library():7s} {n/w:9.0f}/s  loop CPU {l*1e6/n:5.1f} us/c  other threads {(p-l)*1e6/n:5.1f} us/c  "
          + "  ".join(f"{k} {v:.3f}" for k, v in per.items()), flush=True)
    await dev.stop()

async def single(kind):
    dev = await arig.open(_opener(kind), stop_timeout=10)
    t = ArigTarget(dev, await dev.load(_image(kind)), kind)
    lat = []
    for i in range(2300):
        t0 = time.perf_counter()
        await dev.wait(await dev.submit(t.empty))
        if i >= 300:
            lat.append(time.perf_counter() - t0)
    lat.sort()
    print(f"{kind} one task: empty round trip p50 {lat[len(lat)//2]*1e6:.1f} us, p90 {lat[int(len(lat)*.9)]*1e6:.1f}", flush=True)
    await dev.stop()

for kind in ("cuda", "nv"):
    anyio.run(single, kind, backend="asyncio")
for rep in range(4):
    for kind in ("cuda", "nv"):
        for lib in ("asyncio", "trio"):
            anyio.run(one, kind, backend=lib)
