"""A stand-in for a measured program (real process, no GPU): prints sample lines per MODE.

    python sample_prog.py MODE LATENCY_MS WARMUP ITERATIONS
MODE: good | drift_workload | drift_device | two_lines | none | failed | nonzero | hang | bad_field
      | wrong_iters | drift_after_first (good the first time it runs in a folder, drifted later)
"""
import json
import sys
import time

mode, lat, warmup, iters = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = {"latency_ms": lat, "correctness": "passed", "synchronized": True, "workload_identity": "wl-1",
     "device_identity": {"uuid": "GPU-test"}, "warmup": warmup, "iterations": iters}
if mode == "drift_workload":
    s["workload_identity"] = "wl-2"
elif mode == "drift_device":
    s["device_identity"] = {"uuid": "GPU-other"}
elif mode == "failed":
    s["correctness"] = "failed"
elif mode == "bad_field":
    s["latency_ms"] = "fast"
elif mode == "wrong_iters":
    s["iterations"] = iters + 1
elif mode == "hang":
    time.sleep(60)
line = "__ATREX_TIMELINE_SAMPLE__=" + json.dumps(s)
if mode != "none":
    print("some other output")
    print(line)
if mode == "two_lines":
    print(line)
sys.exit(3 if mode == "nonzero" else 0)
