"""The part of arig's pytest plugin that touches arig: opening the fixtures' devices, the
skips of the ``arig_gpu`` and ``arig_nv`` markers, and the checks after each test.

The plugin pytest loads is the module ``_arig_pytestplugin`` (its docstring
says what the fixtures, markers and checks are): it imports nothing of arig,
so that a pytest run that never uses arig pays nothing for it, and imports
this module the first time a test uses one of its fixtures or markers.
Everything here runs in pytest's main thread, and the async parts on the
test's own loop.

An environment installed before the plugin had its own module still names
this one as the ``pytest11`` entry point; ``pytest_plugins`` below then
brings the real plugin in.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import pytest

import arig
import arig._env

from . import _devices
from ._tracking import settle, track, tracker_of

__all__ = ["DEVICE_FIXTURES"]

#: The fixtures that hand a test a device (the plugin's own list).
DEVICE_FIXTURES = ("arig_device", "arig_host", "arig_gpu", "arig_device_module")
pytest_plugins = ["_arig_pytestplugin"]

_CHECKS = ("loss", "pending", "leaks")
_CALL_FAILED = pytest.StashKey[bool]()


def _seconds(config: pytest.Config, name: str) -> float:
    text = config.getini(name)
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise pytest.UsageError(f"{name} must be a positive number of seconds, not {text!r}")
    return value


def check_selection(config: pytest.Config) -> None:
    """``--arig-device`` (or the ini option) names known devices, else a usage error naming the bad one."""
    try:
        selected(config)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def selected(config: pytest.Config) -> list[str]:
    """The devices ``arig_device`` runs over."""
    text = config.getoption("arig_device") or config.getini("arig_device")
    return _devices.parse(text) if text else _devices.available()


def skip_without_hardware(item: pytest.Item) -> None:
    """The ``arig_gpu`` and ``arig_nv`` markers: skip ``item`` where the hardware is missing."""
    if arig._env.GPU_REQUIRED:
        return
    if item.get_closest_marker("arig_gpu") is not None and not _devices.have_gpu():
        item.add_marker(pytest.mark.skip(reason="no NVIDIA GPU here (libcuda sees none, and no NVIDIA driver is loaded)"))
    if item.get_closest_marker("arig_nv") is not None and not _devices.nv_indices():
        item.add_marker(pytest.mark.skip(reason="no NV device here (arig.nvrm.gpu(i) opens none)"))


def call_done(item: pytest.Item, failed: bool) -> None:
    """The test's call phase ended (``failed``: its report says so)."""
    item.stash[_CALL_FAILED] = failed


# -- the check after each test --------------------------------------------------------------------


def _allowed(item: pytest.Item) -> set[str]:
    allowed: set[str] = set()
    for mark in item.iter_markers("arig_allow"):
        bad = [a for a in mark.args if a not in _CHECKS]
        if bad:
            pytest.fail(f"{item.nodeid}: arig_allow takes {', '.join(map(repr, _CHECKS))}, not {', '.join(map(repr, bad))}", pytrace=False)
        allowed.update(mark.args or _CHECKS)
    return allowed


def checked(item: pytest.Function, test: Callable[..., Any], fixtures: Iterable[str]) -> Callable[..., Any]:
    """``test`` followed by the checks of the devices in its ``fixtures``, in its own coroutine."""

    @functools.wraps(test)
    async def checked(*args: Any, **kwargs: Any) -> None:
        trackers = [(dev, t) for dev in _devices_of(item, fixtures) if (t := tracker_of(dev)) is not None]
        for _, t in trackers:
            t.begin()
        await test(*args, **kwargs)
        allowed = _allowed(item)
        problems: list[str] = []
        for dev, t in trackers:
            await settle(dev, _seconds(item.config, "arig_settle_timeout"))
            problems += [text for kind, text in t.problems(dev) if kind not in allowed]
            t.release()
        if problems:
            pytest.fail("arig: " + "\narig: ".join(problems), pytrace=False)

    return checked


def _devices_of(item: pytest.Function, fixtures: Iterable[str]) -> list[arig.Device]:
    seen: dict[int, arig.Device] = {}
    for name in fixtures:
        dev = item.funcargs.get(name)
        if isinstance(dev, arig.Device):
            seen.setdefault(id(dev), dev)
    return list(seen.values())


# -- the device's lifetime, in the test's loop ----------------------------------------------------


async def lifetime(spec: str, request: pytest.FixtureRequest) -> AsyncIterator[arig.Device]:
    """Open ``spec``'s device for a fixture, tracked; stop it after, failing on a late loss."""
    async with _devices.opened(spec, stop_timeout=_seconds(request.config, "arig_stop_timeout")) as dev:
        t = track(dev)
        try:
            yield dev
        finally:
            t.release()  # the check already said what was left open; free it before the stop
    # A loss that came later than the check (while stopping, say) fails the teardown.
    node = request.node
    if isinstance(node, pytest.Item) and not node.stash.get(_CALL_FAILED, True) and "loss" not in _allowed(node):
        problems = [text for kind, text in t.problems(dev) if kind == "loss"]
        if problems:
            pytest.fail("arig: " + problems[0], pytrace=False)


# -- which device each role opens -------------------------------------------------------------------


def usable(spec: str) -> str:
    """``spec``, where this machine opens it; else the test skips (fails under ARIG_GPU_REQUIRED=1)."""
    reason = _devices.missing(spec)
    if reason is not None:
        if arig._env.GPU_REQUIRED:
            pytest.fail(f"{reason} (ARIG_GPU_REQUIRED=1)", pytrace=False)
        pytest.skip(reason)
    return spec


def gpu_spec(config: pytest.Config) -> str:
    """The device ``arig_gpu`` opens: the selection's first CUDA GPU (fake counts), else GPU 0."""
    for spec in [*selected(config), "cuda:0"]:
        if spec == "fake" or (spec.startswith("cuda:") and _devices.missing(spec) is None):
            return spec
    reason = f"arig_gpu: no CUDA GPU here (libcuda sees {_devices.cuda_count()}); --arig-device fake runs it over arig.testing.FakeCuda"
    if arig._env.GPU_REQUIRED:
        pytest.fail(reason + " (ARIG_GPU_REQUIRED=1)", pytrace=False)
    pytest.skip(reason)
