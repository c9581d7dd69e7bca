"""arig's pytest plugin (``_arig_pytestplugin``, and ``arig.testing.plugin`` for what touches arig), run on small test files through ``pytester``.

Each test writes a test file, runs pytest on it in this process with the
plugin (through its ``pytest11`` entry point where arig is installed, else
``-p``), and checks the outcomes and the messages: passes, the failures of
a leak, an unheard loss and pending waiters, the skips, ``--arig-device``,
under pytest-asyncio and under anyio.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap

import pytest

import arig._env
from arig.testing import _devices

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _skips_are_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests check what the plugin does where hardware is missing: skip.  The GPU suite
    runs with ARIG_GPU_REQUIRED=1, under which the plugin fails such tests instead."""
    monkeypatch.setattr(arig._env, "GPU_REQUIRED", False)

_ENTRY = any(ep.name == "arig" and ep.value in ("_arig_pytestplugin", "arig.testing.plugin") for ep in importlib.metadata.entry_points(group="pytest11"))
_PLUGIN = [] if _ENTRY else ["-p", "_arig_pytestplugin"]
# Both plugins in their default modes, the loop scope said so that pytest-asyncio does not warn.
_INI = """
[pytest]
asyncio_mode = strict
asyncio_default_fixture_loop_scope = function
"""


# anyio runs every backend it finds (trio too, where installed): these tests pin asyncio, but one.
_CONFTEST = """
import pytest

@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"
"""


def failures(result: pytest.RunResult, *pairs: tuple[str, str]) -> None:
    """Each (test id, message start) failed with that message, in this order."""
    lines: list[str] = []
    for test, message in pairs:
        lines += [f"*_ {test} _*", message + "*"]
    result.stdout.fnmatch_lines(lines)


def run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makefile(".ini", pytest=_INI)
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(test_user=textwrap.dedent(source))
    return pytester.runpytest_inprocess(*_PLUGIN, "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rfEs", *args)


PASSING = """
    import numpy as np
    import pytest
    import arig

    async def roundtrip(dev):
        buf = await dev.alloc(64)
        try:
            await dev.upload(buf, np.arange(16, dtype=np.float32))
            out = np.zeros(16, np.float32)
            await dev.download(buf, out)
            assert out.tolist() == list(range(16))
        finally:
            buf.close()

    @pytest.mark.asyncio
    async def test_asyncio(arig_device):
        assert isinstance(arig_device, arig.Device) and not arig_device.stopped
        await roundtrip(arig_device)

    @pytest.mark.anyio
    async def test_anyio(arig_device, arig_host):
        assert arig_host.name == "HOST"
        await roundtrip(arig_device)
        await roundtrip(arig_host)
"""


def test_fixtures_under_asyncio_and_anyio_over_the_chosen_devices(pytester: pytest.Pytester) -> None:
    result = run(pytester, PASSING, "-v", "--arig-device", "host,fake")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_asyncio?host? PASSED*", "*test_asyncio?fake? PASSED*", "*test_anyio?host? PASSED*", "*test_anyio?fake? PASSED*"])


def test_default_devices_are_those_this_machine_opens(pytester: pytest.Pytester) -> None:
    here = _devices.available()
    assert here[0] == "host"
    result = run(pytester, PASSING, "-v")
    result.assert_outcomes(passed=2 * len(here))
    result.stdout.fnmatch_lines([f"*test_asyncio?{spec}? PASSED*" for spec in here])
    assert "fake" not in result.stdout.str()  # the fake only on request


def test_ini_option_and_missing_device(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest=_INI + "arig_device = host, cuda:7\n")
    pytester.makepyfile(
        test_user="""
        import pytest
        @pytest.mark.asyncio
        async def test_one(arig_device):
            assert arig_device.name in ("HOST", "CUDA:7")
        """
    )
    result = pytester.runpytest_inprocess(*_PLUGIN, "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rfEs", "-v")
    if _devices.cuda_count() > 7:
        result.assert_outcomes(passed=2)
    else:
        result.assert_outcomes(passed=1, skipped=1)
        result.stdout.fnmatch_lines(["*SKIPPED*no CUDA GPU 7 here*"])


def test_bad_device_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = run(pytester, PASSING, "--arig-device", "host,tpu:0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown device 'tpu:0'*"])


LEAKS = """
    import pytest
    import arig.cuda_abi as abi

    kept = []

    @pytest.mark.asyncio
    async def test_buffer(arig_device):
        await arig_device.alloc(128)

    @pytest.mark.asyncio
    async def test_image(arig_device):
        if arig_device.arch == "host":
            pytest.skip("the host device loads no images")
        await arig_device.load(b"not a real image")

    @pytest.mark.asyncio
    async def test_graph(arig_device):
        if arig_device.arch == "host":
            pytest.skip("the host device makes no graphs")
        kept.append(await arig_device.capability(abi.KEY).graph_async([]))

    @pytest.mark.asyncio
    async def test_closed_and_dropped_is_fine(arig_device):
        buf = await arig_device.alloc(128)
        buf.close()
        if arig_device.arch != "host":
            image = await arig_device.load(b"not a real image")
            image.unload()
            graph = await arig_device.capability(abi.KEY).graph_async([])
            del graph

    @pytest.mark.asyncio
    @pytest.mark.arig_allow("leaks")
    async def test_allowed(arig_device):
        await arig_device.alloc(128)
"""


def test_leaks_fail_the_test(pytester: pytest.Pytester) -> None:
    result = run(pytester, LEAKS, "--arig-device", "host,fake")
    result.assert_outcomes(passed=4, failed=4, skipped=2)
    failures(
        result,
        ("test_buffer[[]host[]]", "arig: 1 buffer(s) allocated on HOST during the test were not closed: <arig.Buffer host 128 bytes*; call buf.close()"),
        ("test_buffer[[]fake[]]", "arig: 1 buffer(s) allocated on CUDA during the test were not closed"),
        ("test_image[[]fake[]]", "arig: 1 image(s) loaded on CUDA during the test were not unloaded"),
        ("test_graph[[]fake[]]", "arig: 1 graph(s) made on CUDA during the test are still referenced"),
    )


LOSS = """
    import asyncio
    import pytest
    import arig
    import arig.cuda_abi as abi
    from arig.testing import faults

    def bad(queue, arg, v):
        raise ValueError("the fill failed")

    @pytest.mark.asyncio
    async def test_unheard(arig_device):
        await arig_device.submit(bad)   # nobody waits: the loss would go unnoticed

    @pytest.mark.asyncio
    async def test_waited(arig_device):
        v = await arig_device.submit(bad)
        with pytest.raises(arig.DeviceLost):
            await arig_device.wait(v)

    @pytest.mark.anyio
    async def test_read_lost(arig_device):
        await arig_device.submit(bad)
        while arig_device.lost is None:
            await asyncio.sleep(0.001)
        assert isinstance(arig_device.lost, ValueError)

    @pytest.mark.anyio
    async def test_unheard_anyio(arig_host):
        await arig_host.submit(bad)

    @pytest.mark.asyncio
    async def test_by_fault(arig_device):
        lost = await faults.lose(arig_device, RuntimeError("ECC"))
        assert isinstance(lost.cause, RuntimeError)

    @pytest.mark.asyncio
    async def test_graph_refused(arig_device):
        if arig_device.arch == "host":
            pytest.skip("the host device makes no graphs")
        await arig_device.submit(bad)
        while True:  # until the record refuses: DeviceLost leaving graph_async is the loss heard
            try:
                await arig_device.capability(abi.KEY).graph_async([])
            except arig.DeviceLost:
                break
            await asyncio.sleep(0.001)

    @pytest.mark.asyncio
    @pytest.mark.arig_allow("loss")
    async def test_allowed(arig_device):
        await arig_device.submit(bad)
"""


def test_unheard_loss_fails_the_test(pytester: pytest.Pytester) -> None:
    result = run(pytester, LOSS, "--arig-device", "host,fake", "-p", "no:logging")
    result.assert_outcomes(passed=9, failed=3, skipped=1)
    failures(
        result,
        ("test_unheard[[]host[]]", "arig: device HOST was lost and nothing heard of it: ValueError: the fill failed. Await the work"),
        ("test_unheard[[]fake[]]", "arig: device CUDA was lost and nothing heard of it: ValueError: the fill failed"),
        ("test_unheard_anyio", "arig: device HOST was lost and nothing heard of it"),
    )


PENDING = """
    import asyncio
    import pytest
    from arig.testing import faults

    tasks = []

    @pytest.mark.asyncio
    async def test_orphan_waiter(arig_host):
        v = await faults.stall(arig_host, 1.0)
        tasks.append(asyncio.create_task(arig_host.wait(v)))
        await asyncio.sleep(0.01)

    @pytest.mark.asyncio
    async def test_work_left_running_is_fine(arig_host):
        await faults.stall(arig_host, 0.05)   # not awaited, but it ends within the settle time

    @pytest.mark.asyncio
    async def test_awaited_waiter(arig_host):
        v = await faults.stall(arig_host, 0.05)
        await asyncio.create_task(arig_host.wait(v))
"""


def test_pending_waiters_fail_the_test(pytester: pytest.Pytester) -> None:
    result = run(pytester, PENDING, "-o", "arig_settle_timeout=0.2")
    result.assert_outcomes(passed=2, failed=1)
    failures(result, ("test_orphan_waiter", "arig: 1 task(s) still wait for values of device HOST at the end of the test"))


def test_a_loss_while_stopping_fails_the_teardown(pytester: pytest.Pytester) -> None:
    source = """
        import pytest
        from arig.testing import faults

        @pytest.mark.asyncio
        async def test_stall_outlives_stop(arig_host):
            await faults.stall(arig_host, 1.0)
    """
    result = run(pytester, source, "-o", "arig_settle_timeout=0.05", "-o", "arig_stop_timeout=0.2", "-p", "no:logging")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*_ ERROR at teardown of test_stall_outlives_stop _*", "arig: device HOST was lost and nothing heard of it: DeviceHang: stop: *"])


def test_markers_skip_without_the_hardware(pytester: pytest.Pytester) -> None:
    source = """
        import pytest

        @pytest.mark.arig_gpu
        def test_gpu():
            pass

        @pytest.mark.arig_nv
        def test_nv():
            pass

        @pytest.mark.asyncio
        async def test_arig_gpu(arig_gpu):
            assert arig_gpu.name.startswith("CUDA")
    """
    result = run(pytester, source, "--strict-markers")
    no_gpu, no_cuda, no_nv = not _devices.have_gpu(), _devices.cuda_count() == 0, not _devices.nv_indices()
    result.assert_outcomes(passed=(not no_gpu) + (not no_cuda) + (not no_nv), skipped=no_gpu + no_cuda + no_nv)
    if no_gpu:
        result.stdout.fnmatch_lines(["*SKIPPED*no NVIDIA GPU here*"], consecutive=False)
    if no_cuda:
        result.stdout.fnmatch_lines(["*SKIPPED*arig_gpu: no CUDA GPU here (libcuda sees 0); --arig-device fake runs it over arig.testing.FakeCuda*"], consecutive=False)
    if no_nv:
        result.stdout.fnmatch_lines(["*SKIPPED*no NV device here*"], consecutive=False)


def test_arig_gpu_runs_over_the_fake(pytester: pytest.Pytester) -> None:
    source = """
        import pytest

        @pytest.mark.asyncio
        async def test_arig_gpu(arig_gpu):
            assert arig_gpu.name == "CUDA" and arig_gpu.facts["name"] == "NVIDIA Fake GPU"
    """
    run(pytester, source, "--arig-device", "fake").assert_outcomes(passed=1)


def test_a_sync_test_is_told_to_be_async(pytester: pytest.Pytester) -> None:
    source = """
        def test_sync(arig_host):
            pass
    """
    result = run(pytester, source)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*arig_host is async: mark the test @pytest.mark.asyncio or @pytest.mark.anyio*"])


TRIO = """
    import anyio
    import pytest
    import trio.lowlevel
    from arig.testing import faults

    if not hasattr(trio.lowlevel, "in_trio_task"):  # anyio's pytest runner asks it; new in trio 0.23
        def in_trio_task():
            try:
                trio.lowlevel.current_task()
            except RuntimeError:
                return False
            return True

        trio.lowlevel.in_trio_task = in_trio_task

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(request):
        return request.param

    def bad(queue, arg, v):
        raise ValueError("bad fill")

    @pytest.mark.anyio
    async def test_both(arig_device, arig_host, anyio_backend):
        import sniffio
        assert sniffio.current_async_library() == anyio_backend and arig_host.name == "HOST"
        buf = await arig_device.alloc(64)
        await arig_device.run(lambda q, a, v: None)
        buf.close()

    @pytest.mark.anyio
    async def test_leak(arig_host):
        await arig_host.alloc(64)

    @pytest.mark.anyio
    async def test_unheard(arig_host):
        await arig_host.submit(bad)

    @pytest.mark.anyio
    async def test_a_cancelled_wait_is_not_left_pending(arig_host):
        v = await faults.stall(arig_host, 0.05)
        with anyio.move_on_after(0.01):  # trio's own cancel scope under trio
            await arig_host.wait(v)
"""


def test_fixtures_under_trio_open_on_the_tests_run_and_check_as_under_asyncio(pytester: pytest.Pytester) -> None:
    pytest.importorskip("trio")
    result = run(pytester, TRIO, "--arig-device", "host,fake", "-p", "no:logging")
    failures(
        result,
        ("test_leak[[]asyncio[]]", "arig: 1 buffer(s) allocated on HOST"),
        ("test_leak[[]trio[]]", "arig: 1 buffer(s) allocated on HOST"),
        ("test_unheard[[]asyncio[]]", "arig: device HOST was lost*and nothing heard of it"),
        ("test_unheard[[]trio[]]", "arig: device HOST was lost*and nothing heard of it"),
    )
    result.assert_outcomes(passed=6, failed=4)


MODULE = """
    import pytest

    pytestmark = pytest.mark.asyncio(loop_scope="module")
    seen = []

    async def test_first(arig_device_module):
        seen.append((arig_device_module.name, id(arig_device_module)))

    async def test_second(arig_device_module):
        seen.append((arig_device_module.name, id(arig_device_module)))

    async def test_leak_is_still_per_test(arig_device_module):
        await arig_device_module.alloc(64)

    async def test_one_device_per_module_and_device():
        names = [n for n, _ in seen]
        assert names == ["HOST", "HOST", "CUDA", "CUDA"]
        assert seen[0] == seen[1] and seen[2] == seen[3] and seen[0][1] != seen[2][1]
"""


def test_module_scoped_device(pytester: pytest.Pytester) -> None:
    result = run(pytester, MODULE, "--arig-device", "host,fake")
    result.assert_outcomes(passed=5, failed=2)
    failures(result, ("test_leak_is_still_per_test[[]host[]]", "arig: 1 buffer(s) allocated on HOST"), ("test_leak_is_still_per_test[[]fake[]]", "arig: 1 buffer(s) allocated on CUDA"))


def test_an_allowed_waiter_of_an_earlier_test_is_not_a_later_tests(pytester: pytest.Pytester) -> None:
    source = """
        import asyncio
        import pytest
        from arig.testing import faults

        pytestmark = pytest.mark.asyncio(loop_scope="module")
        tasks = []

        @pytest.mark.arig_allow("pending")
        async def test_leaves_a_waiter(arig_device_module):
            v = await faults.stall(arig_device_module, 0.5)
            tasks.append(asyncio.create_task(arig_device_module.wait(v)))
            await asyncio.sleep(0.01)

        async def test_clean(arig_device_module):
            pass

        async def test_its_own_waiter_still_fails(arig_device_module):
            v = await faults.stall(arig_device_module, 0.5)
            tasks.append(asyncio.create_task(arig_device_module.wait(v)))
            await asyncio.sleep(0.01)
    """
    result = run(pytester, source, "--arig-device", "host", "-o", "arig_settle_timeout=0.05")
    result.assert_outcomes(passed=2, failed=1)
    failures(result, ("test_its_own_waiter_still_fails[[]host[]]", "arig: 1 task(s) still wait for values of device HOST at the end of the test"))


def test_module_scoped_device_under_anyio(pytester: pytest.Pytester) -> None:
    source = """
        import pytest

        pytestmark = pytest.mark.anyio
        ids = []

        async def test_first(arig_device_module):
            ids.append(id(arig_device_module))

        async def test_second(arig_device_module):
            ids.append(id(arig_device_module))
            assert ids[0] == ids[1]
    """
    run(pytester, source, "--arig-device", "host").assert_outcomes(passed=2)


def test_module_scoped_device_needs_a_module_loop(pytester: pytest.Pytester) -> None:
    source = """
        import pytest

        @pytest.mark.asyncio(loop_scope="function")
        async def test_one(arig_device_module):
            pass
    """
    result = run(pytester, source, "--arig-device", "host")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*arig_device_module lives for the module: its tests must run on one loop, @pytest.mark.asyncio(loop_scope='module'), not 'function'"])


def test_the_plugin_watches_devices_without_changing_them(pytester: pytest.Pytester) -> None:
    source = """
        import pytest
        import arig
        import arig.cuda_abi as abi
        from arig.testing import faults, instruments

        def unchanged(rec):
            return type(rec) is abi.CudaAbi and vars(rec).keys().isdisjoint({"graph", "graph_async", "_build", "_enter"})

        @pytest.mark.asyncio
        async def test_plain(arig_device):
            assert type(arig_device) is arig.Device and vars(arig_device).keys().isdisjoint({"submit", "wait", "run", "alloc", "load", "lost"})
            assert [type(i).__name__ for i in instruments(arig_device)] == ["Tracker"]
            armed = faults.fail_next_fill(arig_device, RuntimeError("x"))
            assert type(arig_device) is arig.Device and "submit" not in vars(arig_device)
            armed.disarm()
            rec = arig_device.capability(abi.KEY)
            assert (rec is None) == (arig_device.arch == "host")
            if rec is not None:  # the CUDA record too: tracked, and after making a graph
                assert unchanged(rec)
                graph = await rec.graph_async([])
                assert unchanged(rec)
                del graph
    """
    run(pytester, source, "--arig-device", "host,fake").assert_outcomes(passed=2)


# -- suites that do not use arig --------------------------------------------------------------------

_HEAVY = ("numpy", "arig", "arig.cuda", "arig.nvrm", "arig.host", "arig.device")


def test_loading_the_plugin_imports_nothing_of_arig() -> None:
    """pytest imports the plugin in every run of the environment: it must not import arig (numpy,
    the device machinery, the drivers' bindings) until a test uses arig.  Measured when this was
    pinned (Python 3.11, 2 cores): 2.1 ms to import the plugin once pytest is loaded, and a
    one-test project's run as fast with it as without (min 0.97 s against 0.95 s); importing
    arig at load had cost every run 0.4-0.7 s."""
    code = f"import sys, _arig_pytestplugin; print(sorted(m for m in sys.modules if m in {_HEAVY!r} or m.startswith('arig.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_suite_that_does_not_use_arig_is_left_alone(pytester: pytest.Pytester) -> None:
    """Its own ``gpu`` and ``nv`` markers are not arig's: its tests run (no GPU needed), and the
    run never imports arig."""
    pytester.makefile(".ini", pytest="[pytest]\nmarkers =\n    gpu: the suite's own\n    nv: the suite's own\n")
    pytester.makepyfile(
        test_theirs="""
        import sys
        import pytest

        @pytest.mark.gpu
        def test_gpu():
            # arig is never imported (numpy may be: another plugin of the environment can import it)
            assert [m for m in sys.modules if m == "arig" or m.startswith("arig.")] == []

        @pytest.mark.nv
        def test_nv():
            pass
        """
    )
    # Where the installed entry point is an older one (arig.testing.plugin), load the plugin by its module.
    entry = [ep.value for ep in importlib.metadata.entry_points(group="pytest11") if ep.name == "arig"]
    plugin = [] if entry == ["_arig_pytestplugin"] else ["-p", "no:arig", "-p", "_arig_pytestplugin"]
    result = pytester.runpytest_subprocess(*plugin, "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--strict-markers", "-rs")
    result.assert_outcomes(passed=2)
