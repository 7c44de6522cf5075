"""The measurement protocol for the CuTe DSL runners (docs/measure.md): time launches with CUDA
events after warmup, and print the one __ATREX_TIMELINE_SAMPLE__ line."""
import json

import torch


# GPU cycles a launch is given to be queued behind the spin that starts the timed launches: a
# launch through Python (the DSL's JIT function, torch's reset) takes tens of microseconds of host
# time, and a start event recorded on an idle GPU fires at once, so it would time the host's
# launch overhead as the kernel's.
QUEUE_CYCLES_PER_LAUNCH = 400_000


def median_ms(launch, warmup: int, iters: int, before=None) -> float:
    """Median per-launch GPU time in ms: each timed launch between two CUDA events, all of them
    queued behind one GPU spin (torch.cuda._sleep) and synchronized once at the end, so the GPU
    runs them back to back as the CUDA harnesses' launches run. `before` runs untimed ahead of each
    timed launch (e.g. a reset)."""
    for _ in range(warmup):
        launch()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    torch.cuda._sleep(QUEUE_CYCLES_PER_LAUNCH * iters)
    for s, e in events:
        if before is not None:
            before()
        s.record()
        launch()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in events)
    return times[len(times) // 2]


def print_sample(latency_ms: float, passed: bool, workload: str, warmup: int, iters: int, **extra) -> None:
    sample = {"latency_ms": latency_ms, "correctness": "passed" if passed else "failed", "synchronized": True,
              "workload_identity": workload,
              "device_identity": {"uuid": "GPU-" + str(torch.cuda.get_device_properties(0).uuid)},
              "warmup": warmup, "iterations": iters, **extra}
    print("__ATREX_TIMELINE_SAMPLE__=" + json.dumps(sample))
