// atrex_timeline.cuh — what the rewriter includes in an instrumented source: the device recorder
// (atrex_recorder.cuh) and the host capture session (atrex_capture.cuh). Header-only; build with
// nvcc -I$(atrex-inject include-dir).
#pragma once
#include "atrex_recorder.cuh"
#include "atrex_capture.cuh"
