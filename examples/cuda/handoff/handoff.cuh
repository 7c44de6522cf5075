// handoff.cuh — a producer kernel and a consumer kernel that hand tiles over through flags in
// global memory while both run, on two streams (examples/specs/handoff/, docs/spec.md "Causality").
//
// Channel b (CTA b of each kernel) is a ring of kSlots tile slots. The producer writes tile j of
// its channel into slot j % kSlots once the consumer has released the tile that held it (`empty`),
// then raises the slot's `full` flag; the consumer waits for `full`, reduces the tile, and raises
// `empty`. Flags hold a sequence number that grows across launches (launch e, tile j: e * tiles + j
// + 1), so a launch never mistakes the last launch's flags for its own. Both grids must be resident
// together (each spins on the other): channels <= SMs / 2 keeps them so.
#pragma once
#include <cstdint>

constexpr int kSlots = 4;           // tiles in flight per channel
constexpr int kTileElems = 4096;    // floats per tile (16 KiB)
constexpr int kThreads = 256;

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// The value tile j of launch `epoch` publishes (never 0, the flags' initial value).
__host__ __device__ __forceinline__ unsigned tile_seq(unsigned epoch, int tiles, int j) {
  return epoch * static_cast<unsigned>(tiles) + static_cast<unsigned>(j) + 1u;
}

// Element i of tile `tile` (the producer writes it; the host's reference sums it).
__host__ __device__ __forceinline__ float tile_value(unsigned seed, int tile, int i) {
  unsigned h = (seed * 2654435761u) ^ (static_cast<unsigned>(tile) * 40503u) ^ (static_cast<unsigned>(i) * 2246822519u);
  h ^= h >> 15;
  return static_cast<float>(h & 0xffffu) / 65536.0f - 0.5f;
}

// The launchers, one per translation unit (each unit has its own recorder buffer symbol).
void launch_producer(float* ring, unsigned* full, unsigned* empty, int channels, int tiles, unsigned epoch,
                     unsigned seed, cudaStream_t stream);
void launch_consumer(const float* ring, unsigned* full, unsigned* empty, float* sums, int channels, int tiles,
                     unsigned epoch, cudaStream_t stream);
