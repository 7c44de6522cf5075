// main.cu — runs the producer and the consumer of handoff.cuh together on two streams, launch after
// launch, and checks every tile's sum against the host's (harness.cuh's sample line).
//   handoff [--warmup W] [--iters N] [--seed S]
#include <cmath>
#include <vector>

#include "../harness.cuh"
#include "handoff.cuh"

constexpr int kChannels = 32, kTiles = 64;

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  float *ring, *sums;
  unsigned *full, *empty;
  CHECK(cudaMalloc(&ring, sizeof(float) * kChannels * kSlots * kTileElems));
  CHECK(cudaMalloc(&sums, sizeof(float) * kChannels * kTiles));
  CHECK(cudaMalloc(&full, sizeof(unsigned) * kChannels * kSlots));
  CHECK(cudaMalloc(&empty, sizeof(unsigned) * kChannels * kSlots));
  CHECK(cudaMemset(full, 0, sizeof(unsigned) * kChannels * kSlots));
  CHECK(cudaMemset(empty, 0, sizeof(unsigned) * kChannels * kSlots));
  cudaStream_t prod, cons;
  CHECK(cudaStreamCreateWithFlags(&prod, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&cons, cudaStreamNonBlocking));
  cudaEvent_t start, stop, consumed;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventCreate(&consumed));
  unsigned epoch = 0;
  auto once = [&]() -> float {  // one launch of each, the consumer first: it spins until the producer publishes
    CHECK(cudaEventRecord(start, prod));
    CHECK(cudaStreamWaitEvent(cons, start, 0));
    launch_consumer(ring, full, empty, sums, kChannels, kTiles, epoch, cons);
    launch_producer(ring, full, empty, kChannels, kTiles, epoch, a.seed, prod);
    CHECK(cudaEventRecord(consumed, cons));
    CHECK(cudaStreamWaitEvent(prod, consumed, 0));
    CHECK(cudaEventRecord(stop, prod));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaGetLastError());
    ++epoch;
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  };
  // A first launch of each that waits on nothing: under capture, a kernel's first launch allocates
  // its recorder buffers, and the driver may order an allocation after a kernel already running,
  // which here would be the other side, spinning.
  launch_consumer(ring, full, empty, sums, kChannels, 0, epoch, cons);
  launch_producer(ring, full, empty, kChannels, 0, epoch, a.seed, prod);
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < a.warmup; ++i) once();
  std::vector<float> ms;
  for (int i = 0; i < a.iters; ++i) ms.push_back(once());
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  std::vector<float> got(kChannels * kTiles);
  CHECK(cudaMemcpy(got.data(), sums, sizeof(float) * got.size(), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int t = 0; t < kChannels * kTiles; ++t) {
    double ref = 0;
    for (int i = 0; i < kTileElems; ++i) ref += tile_value(a.seed, t, i);
    worst = std::max(worst, std::fabs(got[t] - ref) / std::max(1.0, std::fabs(ref)));
  }
  char workload[96];
  std::snprintf(workload, sizeof workload, "handoff:channels=%d:tiles=%d:slots=%d:seed=%u", kChannels, kTiles, kSlots,
                a.seed);
  print_sample(a, ms[ms.size() / 2], worst < 1e-4, workload, worst);
  return 0;
}
