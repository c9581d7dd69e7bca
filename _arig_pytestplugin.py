"""arig's pytest plugin (the ``arig`` entry of ``pytest11``: loaded by every pytest run in an
environment where arig is installed).

It is a module of its own, outside the ``arig`` package, because pytest
imports it in every project of the environment, most of which never use
arig: importing it imports pytest alone (and pytest-asyncio, which pytest
loads anyway where it is installed), never arig, numpy or a driver.  What
touches arig is ``arig.testing.plugin``, imported the first time a test uses
one of the fixtures or markers below.  A test that uses neither is left as
it is: no skip, no check, no import.

Fixtures, each an open ``arig.Device`` stopped after the test:

* ``arig_device``: parametrized over every device this machine opens
  (``host``; ``cuda:i`` for each GPU libcuda sees; ``nv:i`` once
  ``arig.nvrm.gpu(i)`` opens), or over ``--arig-device host,cuda:0,fake``
  (also the ini option ``arig_device``); ``fake`` is GPU 0 of a fresh
  ``arig.testing.FakeCuda``, the real CUDA backend over a fake libcuda.
* ``arig_host``: the host device.  ``arig_gpu``: the first CUDA GPU of the
  selection (``fake`` counts), else GPU 0; skipped, saying why, where there is none.
* ``arig_device_module``: as ``arig_device``, one device per module and
  device (under pytest-asyncio, mark the module's tests
  ``@pytest.mark.asyncio(loop_scope="module")``: a device serves one loop).

The tests are async: ``@pytest.mark.asyncio`` (pytest-asyncio, strict mode
is fine) or ``@pytest.mark.anyio`` (anyio's plugin, on its asyncio or trio
backend: the device is opened in the test's own run).  The fixture names are sync fixtures that pick, per test,
an async fixture run by whichever of the two plugins runs the test, on the
test's own loop.

After each test using them, the test fails (naming what) if a device was
lost and nothing heard of it, tasks the test started still wait for its
values, or buffers, images or graphs made on it during the test are still
open (``arig.testing._tracking`` says how this is known).  Opt out per test
with ``@pytest.mark.arig_allow("loss", "pending", "leaks")``.  The markers
``arig_gpu`` and ``arig_nv`` skip a test without a CUDA GPU or an NV device
(``ARIG_GPU_REQUIRED=1`` makes them run, and fail, anyway).  Their names
are arig's own: a suite's ``gpu`` or ``nv`` markers are not the plugin's
business.  Tests made by hypothesis's ``@given`` get the fixtures but not the
checks.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import pytest

try:
    import pytest_asyncio
except ImportError:  # pytest-asyncio is optional: anyio's plugin (arig depends on anyio) is always there
    pytest_asyncio = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import arig
    import arig.testing.plugin

__all__ = ["DEVICE_FIXTURES", "MARKERS"]

#: The fixtures that hand a test a device.
DEVICE_FIXTURES = ("arig_device", "arig_host", "arig_gpu", "arig_device_module")
#: The markers the plugin registers and acts on.
MARKERS = {
    "arig_gpu": "arig_gpu: needs an NVIDIA GPU (skipped where libcuda sees none and no NVIDIA driver is loaded)",
    "arig_nv": "arig_nv: needs an NV device, arig.nvrm.gpu(i) (skipped where none opens)",
    "arig_allow": "arig_allow(*checks): let this test leave arig devices as the named checks would refuse: 'loss', 'pending', 'leaks'",
}
_LOOP_SCOPES = ("function", "class", "module", "package", "session")
_SPEC_FIXTURES = (("_arig_spec_device", "function"), ("_arig_spec_device_module", "module"))
_MODULE_LOOP = pytest.StashKey[str]()  # the loop scope of a module's tests that use arig_device_module


def _impl() -> Any:
    """``arig.testing.plugin``: imported the first time a test needs arig."""
    import arig.testing.plugin

    return arig.testing.plugin


def _uses_devices(item: pytest.Item) -> bool:
    return any(f in getattr(item, "fixturenames", ()) for f in DEVICE_FIXTURES)


# -- options, markers, parametrization ------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("arig")
    group.addoption(
        "--arig-device",
        dest="arig_device",
        default=None,
        metavar="DEVICES",
        help="devices arig_device runs over, a comma list of host, cuda:i, nv:i, fake or all (default: every device this machine opens)",
    )
    parser.addini("arig_device", "default of --arig-device", default="")
    parser.addini("arig_settle_timeout", "seconds the check after a test waits for work the test did not await (default 5)", default="5")
    parser.addini("arig_stop_timeout", "stop_timeout of the devices the fixtures open (default arig's, 30)", default="30")


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS.values():
        config.addinivalue_line("markers", line)
    if config.getoption("arig_device") or config.getini("arig_device"):  # arig's own options: check them now, as a usage error
        _impl().check_selection(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, scope in _SPEC_FIXTURES:
        if name in metafunc.fixturenames:
            specs = _impl().selected(metafunc.config)
            metafunc.parametrize(name, specs, indirect=True, ids=specs, scope=scope)  # type: ignore[arg-type]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("arig_gpu") is not None or item.get_closest_marker("arig_nv") is not None:
            _impl().skip_without_hardware(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and _uses_devices(item):
        _impl().call_done(item, report.failed)
    return report


# -- the check after each test --------------------------------------------------------------------


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Run the checks inside the test's own coroutine, once it returned: on its loop, and as
    part of the test, so that a problem fails the test itself rather than its teardown.

    The test function is swapped only for the call (anyio makes new items after
    collection, and pytest-asyncio wraps ``item.obj`` when the test runs)."""
    test = getattr(item, "obj", None)
    if not isinstance(item, pytest.Function) or not _uses_devices(item) or not inspect.iscoroutinefunction(test) or hasattr(test, "hypothesis"):
        return (yield)
    item.obj = _impl().checked(item, test, DEVICE_FIXTURES)
    try:
        return (yield)
    finally:
        item.obj = test


# -- the device's lifetime, in the test's loop ----------------------------------------------------


def _with_args(fn: Any, *names: str) -> Any:
    """Give ``fn(**kw)`` the signature ``(request, *names)``: pytest reads a fixture's
    dependencies from its signature, and a static one (unlike ``getfixturevalue``)
    is torn down and set up again with it, as a parametrized spec changes."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    fn.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in ("request", *names)])
    return fn


def _inner_fixture(role: str, runner: str, loop_scope: str | None) -> Any:
    """The async fixture that opens ``role``'s device for tests of ``runner``."""
    scope: Any = "module" if role == "device_module" else "function"
    spec_fixture = f"_arig_spec_{role}"

    async def fixture(request: pytest.FixtureRequest, **kw: Any) -> AsyncIterator[arig.Device]:
        async for dev in _impl().lifetime(kw[spec_fixture], request):
            yield dev

    fixture.__name__ = name = _inner_name(role, runner, loop_scope)
    _with_args(fixture, spec_fixture)
    if runner == "anyio":
        return pytest.fixture(scope=scope, name=name)(fixture)
    assert pytest_asyncio is not None
    loop: Any = loop_scope
    return pytest_asyncio.fixture(scope=scope, name=name, loop_scope=loop)(fixture)


def _inner_name(role: str, runner: str, loop_scope: str | None) -> str:
    return f"_arig_{role}_{runner}" + (f"_{loop_scope}" if loop_scope else "")


_ROLES = ("device", "host", "gpu", "device_module")
for _role in _ROLES:
    globals()[_inner_name(_role, "anyio", None)] = _inner_fixture(_role, "anyio", None)
    if pytest_asyncio is not None:
        for _scope in _LOOP_SCOPES if _role != "device_module" else _LOOP_SCOPES[2:]:
            globals()[_inner_name(_role, "asyncio", _scope)] = _inner_fixture(_role, "asyncio", _scope)


def _loop_scope(item: pytest.Item) -> str | None:
    """The scope of the loop pytest-asyncio runs ``item`` on; None if it does not run it."""
    marker = item.get_closest_marker("asyncio")
    if marker is None and (pytest_asyncio is None or item.config.getini("asyncio_mode") != "auto"):
        return None
    scope = (marker.kwargs.get("loop_scope") or marker.kwargs.get("scope")) if marker is not None else None
    if scope is None:
        try:
            scope = item.config.getini("asyncio_default_test_loop_scope")
        except ValueError:  # a pytest-asyncio before 0.24
            scope = None
    return str(scope or "function")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A module's device serves one loop: its tests must share the module's loop (or a wider one)."""
    if "arig_device_module" not in getattr(item, "fixturenames", ()) or "anyio_backend" in getattr(item, "fixturenames", ()):
        return
    scope = _loop_scope(item)
    if scope in _LOOP_SCOPES[:2]:
        pytest.fail(f"arig_device_module lives for the module: its tests must run on one loop, @pytest.mark.asyncio(loop_scope='module'), not {scope!r}", pytrace=False)
    module = item.getparent(pytest.Module)
    if scope is not None and module is not None:
        module.stash[_MODULE_LOOP] = scope


def _pick(request: pytest.FixtureRequest, role: str) -> str:
    """The inner fixture for this test: anyio's, or pytest-asyncio's on the test's loop scope."""
    fixture = f"arig_{role}"
    if "anyio_backend" in request.fixturenames:
        backend = request.getfixturevalue("anyio_backend")  # a name, or (name, options)
        backend = backend[0] if isinstance(backend, tuple) else backend
        if backend not in ("asyncio", "trio"):
            pytest.skip(f"{fixture}: arig devices run on asyncio and trio, not on anyio's {backend} backend")
        return _inner_name(role, "anyio", None)
    node = request.node
    scope = node.stash.get(_MODULE_LOOP, None) if role == "device_module" else _loop_scope(node) if isinstance(node, pytest.Item) else None
    if scope is None or pytest_asyncio is None:
        pytest.fail(f"{fixture} is async: mark the test @pytest.mark.asyncio or @pytest.mark.anyio", pytrace=False)
    return _inner_name(role, "asyncio", scope)


# -- which device each role opens -------------------------------------------------------------------


@pytest.fixture
def _arig_spec_device(request: pytest.FixtureRequest) -> str:
    return str(_impl().usable(str(request.param)))


@pytest.fixture(scope="module")
def _arig_spec_device_module(request: pytest.FixtureRequest) -> str:
    return str(_impl().usable(str(request.param)))


@pytest.fixture
def _arig_spec_host() -> str:
    return "host"


@pytest.fixture
def _arig_spec_gpu(request: pytest.FixtureRequest) -> str:
    return str(_impl().gpu_spec(request.config))


# -- the fixtures tests use -------------------------------------------------------------------------


def _public(role: str, scope: Any, doc: str) -> Callable[..., arig.Device]:
    spec_fixture = f"_arig_spec_{role}"

    def fixture(request: pytest.FixtureRequest, **kw: Any) -> arig.Device:
        # The spec fixture (a dependency) skipped already where the device is missing.
        dev: arig.Device = request.getfixturevalue(_pick(request, role))
        return dev

    fixture.__doc__ = doc
    fixture.__name__ = f"arig_{role}"
    _with_args(fixture, spec_fixture)
    return pytest.fixture(scope=scope, name=f"arig_{role}")(fixture)


arig_device = _public("device", "function", "An open device, per test; the test runs once per device of the selection (--arig-device).")
arig_host = _public("host", "function", "The host device, open for the test.")
arig_gpu = _public("gpu", "function", "A CUDA GPU (the first of the selection, fake counts; else GPU 0), open for the test; skips where there is none.")
arig_device_module = _public("device_module", "module", "As arig_device, one device per module and device.")
