"""The public surface: ``arig.__all__``, the error tree, lazy GPU modules."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import arig
import arig._backend
import arig._errors
import arig.device

LAZY = {"cuda", "cuda_abi", "nvrm"}


def test_all_is_sorted_unique_and_public() -> None:
    assert len(arig.__all__) == len(set(arig.__all__))
    assert all(isinstance(n, str) and not n.startswith("_") for n in arig.__all__)
    for name in ("open", "host", "Device", "Buffer", "Image", "Queue", "ArigError", "OpenError", "DeviceLost", "DeviceStopped", "DeviceHang", "FillError"):
        assert name in arig.__all__


@pytest.mark.parametrize("name", sorted(set(arig.__all__) - LAZY))
def test_every_name_in_all_exists(name: str) -> None:
    assert getattr(arig, name) is not None


@pytest.mark.parametrize("name", sorted(LAZY))
def test_lazy_gpu_modules_import_without_a_gpu(name: str) -> None:
    assert name in arig.__all__
    module = getattr(arig, name)
    assert inspect.ismodule(module)
    assert module.__name__ == f"arig.{name}"


def test_import_arig_loads_no_gpu_module() -> None:
    code = "import sys, arig; print(sorted(m for m in sys.modules if m.startswith('arig.') and m.split('.')[1] in ('cuda', 'cuda_abi', 'nvrm')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        arig.no_such_thing  # noqa: B018
    assert not hasattr(arig, "no_such_thing")


def test_open_is_a_coroutine_function() -> None:
    assert inspect.iscoroutinefunction(arig.open)
    assert isinstance(arig.__version__, str)


# -- the error tree ---------------------------------------------------------------------------


def _error_classes() -> list[type[BaseException]]:
    found = {obj for obj in vars(arig).values() if isinstance(obj, type) and issubclass(obj, BaseException)}
    found |= {getattr(arig._errors, n) for n in arig._errors.__all__}
    return sorted(found, key=lambda c: c.__name__)


def test_every_arig_error_descends_from_arig_error() -> None:
    classes = _error_classes()
    assert len(classes) >= 8
    for cls in classes:
        assert issubclass(cls, arig.ArigError), cls
        assert issubclass(cls, Exception), cls
    assert arig.ArigError.__bases__ == (Exception,)


def test_misuse_errors_are_the_builtin_ones_too() -> None:
    assert issubclass(arig.ArigValueError, ValueError)
    assert issubclass(arig.ArigTypeError, TypeError)
    assert not issubclass(arig.ArigValueError, TypeError)
    assert not issubclass(arig.DeviceLost, (ValueError, TypeError))
    for cls in (arig.OpenError, arig.DeviceLost, arig.DeviceStopped, arig.DeviceHang, arig.FillError):
        assert issubclass(cls, arig.ArigError)


def test_device_lost_chains_and_names_its_cause() -> None:
    cause = arig.FillError(700, "illegal address")
    lost = arig.DeviceLost("CUDA:1", cause)
    assert lost.__cause__ is cause
    assert lost.cause is cause
    assert lost.device == "CUDA:1"
    assert "CUDA:1" in str(lost)
    assert "FillError" in str(lost)
    assert "700" in str(lost) and "illegal address" in str(lost)
    try:
        raise lost
    except arig.ArigError as caught:
        assert caught.__cause__ is cause


def test_fill_error_carries_its_code() -> None:
    err = arig.FillError(3)
    assert err.code == 3
    assert "3" in str(err)
    assert arig.FillError(1, "why").code == 1
    assert "why" in str(arig.FillError(1, "why"))


def test_the_device_module_still_offers_the_backend_seams_names() -> None:
    """Backends written against ``arig.device`` keep working: it re-exports the seam's names, the same objects."""
    for name in ("Backend", "Opener", "DEFERRED", "defers_work", "deferred_result", "fill_result", "callable_name"):
        assert name in arig.device.__all__ and getattr(arig.device, name) is getattr(arig._backend, name)
