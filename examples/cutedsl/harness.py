"""The measurement protocol for the CuTe DSL runners (docs/measure.md): time launches with CUDA
events after warmup, and print the one __ATREX_TIMELINE_SAMPLE__ line."""
import json

import torch


def median_ms(launch, warmup: int, iters: int, before=None) -> float:
    """Median per-launch time in ms; `before` runs untimed ahead of each timed launch (e.g. a reset)."""
    for _ in range(warmup):
        launch()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        if before is not None:
            before()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        launch()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    torch.cuda.synchronize()
    return sorted(times)[len(times) // 2]


def print_sample(latency_ms: float, passed: bool, workload: str, warmup: int, iters: int, **extra) -> None:
    sample = {"latency_ms": latency_ms, "correctness": "passed" if passed else "failed", "synchronized": True,
              "workload_identity": workload,
              "device_identity": {"uuid": "GPU-" + str(torch.cuda.get_device_properties(0).uuid)},
              "warmup": warmup, "iterations": iters, **extra}
    print("__ATREX_TIMELINE_SAMPLE__=" + json.dumps(sample))
