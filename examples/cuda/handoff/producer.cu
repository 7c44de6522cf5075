// producer.cu — the producing side of handoff.cuh: CTA b fills its channel's tiles in order.
#include <cuda_runtime.h>

#include "handoff.cuh"

__global__ void __launch_bounds__(kThreads) produce_tiles(float* ring, unsigned* full, unsigned* empty, int tiles,
                                                           unsigned epoch, unsigned seed) {
  const int b = blockIdx.x;
  for (int j = 0; j < tiles; ++j) {
    const int tile = b * tiles + j, slot = b * kSlots + j % kSlots;
    if (threadIdx.x == 0) {
      const unsigned want = j >= kSlots ? tile_seq(epoch, tiles, j - kSlots) : 0u;
      while (ld_acquire(&empty[slot]) < want) {
      }
    }
    __syncthreads();
    float* dst = ring + static_cast<size_t>(slot) * kTileElems;
    for (int i = threadIdx.x; i < kTileElems; i += kThreads) dst[i] = tile_value(seed, tile, i);
    __syncthreads();  // every thread's stores are issued before thread 0 publishes the tile
    if (threadIdx.x == 0) {
      __threadfence();
      st_release(&full[slot], tile_seq(epoch, tiles, j));
    }
  }
}

void launch_producer(float* ring, unsigned* full, unsigned* empty, int channels, int tiles, unsigned epoch,
                     unsigned seed, cudaStream_t stream) {
  produce_tiles<<<channels, kThreads, 0, stream>>>(ring, full, empty, tiles, epoch, seed);
}
