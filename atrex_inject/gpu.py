"""The GPU this process sees, through cuda-python's driver bindings (cuda.bindings.driver): whether
there is one, what it is (the name, UUID and SM count every capture's sidecar records), and the
driver's errors raised as CaptureError. A module of its own because every capture writer asks it
(a launch captured from Python, run-iket's normalized output) and so does `demo --live`; none of
them needs the others for it."""
from __future__ import annotations

from .errors import CaptureError


def driver():
    """cuda.bindings.driver; CaptureError saying what to install when cuda-python is missing."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise CaptureError("cuda-python is not installed", hint="pip install 'atrex-inject[cuda]'") from e
    return driver


def gpu_available() -> bool:
    """True when a driver and at least one device answer; False on a machine without them."""
    try:
        d = driver()
        err, = d.cuInit(0)
        if err != d.CUresult.CUDA_SUCCESS:
            return False
        err, n = d.cuDeviceGetCount()
        return err == d.CUresult.CUDA_SUCCESS and n > 0
    except CaptureError:
        return False
    except Exception as e:  # cuda.pathfinder's DynamicLibNotFoundError: no libcuda on this machine
        if type(e).__name__ == "DynamicLibNotFoundError":
            return False
        raise


def device_info() -> dict:
    """Name, UUID and SM count of the current (or first) device; {} without a GPU."""
    if not gpu_available():
        return {}
    d = driver()
    err, dev = d.cuCtxGetDevice()
    if err != d.CUresult.CUDA_SUCCESS:
        dev = check(d.cuDeviceGet(0), "cuDeviceGet")
    name = check(d.cuDeviceGetName(256, dev), "cuDeviceGetName").split(b"\0")[0].decode()
    u = bytes(check(d.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes).hex()
    sms = check(d.cuDeviceGetAttribute(d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                "cuDeviceGetAttribute")
    return {"name": name, "uuid": f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}", "sm_count": int(sms)}


def check(result, what: str):
    """A driver call's result without its status (one value, or the list of them); CaptureError
    naming `what` and the driver's message when the status is not success."""
    d = driver()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != d.CUresult.CUDA_SUCCESS:
        _, msg = d.cuGetErrorString(err)
        raise CaptureError(f"{what} failed: {msg.decode() if msg else err}")
    return rest[0] if len(rest) == 1 else rest
