// consumer.cu — the consuming side of handoff.cuh: CTA b sums each tile of its channel in order.
#include <cuda_runtime.h>

#include "handoff.cuh"

__global__ void __launch_bounds__(kThreads) consume_tiles(const float* ring, unsigned* full, unsigned* empty,
                                                           float* sums, int tiles, unsigned epoch) {
  __shared__ float partial[kThreads / 32];
  const int b = blockIdx.x;
  for (int j = 0; j < tiles; ++j) {
    const int tile = b * tiles + j, slot = b * kSlots + j % kSlots;
    if (threadIdx.x == 0) {
      const unsigned want = tile_seq(epoch, tiles, j);
      while (ld_acquire(&full[slot]) < want) {
      }
    }
    __syncthreads();
    const float* src = ring + static_cast<size_t>(slot) * kTileElems;
    float s = 0.0f;
    for (int i = threadIdx.x; i < kTileElems; i += kThreads) s += __ldcg(&src[i]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
    __syncthreads();  // every warp has read the slot before thread 0 releases it
    if (threadIdx.x == 0) {
      float t = 0.0f;
      for (int w = 0; w < kThreads / 32; ++w) t += partial[w];
      sums[tile] = t;
      st_release(&empty[slot], tile_seq(epoch, tiles, j));
    }
    __syncthreads();  // partial[] is rewritten by the next tile
  }
}

void launch_consumer(const float* ring, unsigned* full, unsigned* empty, float* sums, int channels, int tiles,
                     unsigned epoch, cudaStream_t stream) {
  consume_tiles<<<channels, kThreads, 0, stream>>>(ring, full, empty, sums, tiles, epoch);
}
