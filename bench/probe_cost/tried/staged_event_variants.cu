// experiment: what a staged event costs, by timer, slot width and where the pointer bump sits
#include <cstdint>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(3);} } while (0)

template <int T> __device__ __forceinline__ uint32_t tnow() {
  uint32_t t;
  if (T == 0) asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
  else asm volatile("mov.u32 %0, %%clock;" : "=r"(t));
  return t;
}
__device__ __forceinline__ uint32_t lane() { uint32_t l; asm("mov.u32 %0, %%laneid;" : "=r"(l)); return l; }

template <int S> struct Body;
template <> struct Body<0> {  // four independent chains
  float a0, a1, a2, a3;
  __device__ Body(float z) { a0 = threadIdx.x; a1 = a0 + 1.f; a2 = a0 + 2.f; a3 = a0 + 3.f; }
  __device__ __forceinline__ void run(float) {
#pragma unroll
    for (int j = 0; j < 32; ++j) { a0 = fmaf(a0, 1.0001f, 0.5f); a1 = fmaf(a1, 0.9999f, 0.25f); a2 = fmaf(a2, 1.0002f, 0.125f); a3 = fmaf(a3, 0.9998f, 0.0625f); }
  }
  __device__ float sum() const { return a0 + a1 + a2 + a3; }
};
template <> struct Body<1> {  // one dependent chain
  float x, y;
  __device__ Body(float) { x = threadIdx.x * 1e-3f; y = 0.5f; }
  __device__ __forceinline__ void run(float z) {
#pragma unroll
    for (int j = 0; j < 64; ++j) { x = fmaf(x, y, z); y = fmaf(y, z, x); }
  }
  __device__ float sum() const { return x + y; }
};

// V: 0 clean; 1 fixed slot STS.32 t; 2 fixed slot STS.32 t|site (LOP3)
//    3 trips W8 bump after; 4 trips W8 bump before; 5 trips W4 (t|site) bump after; 6 trips W4 bump before
//    7 trips W8 bump after, lane 0 only (predicated store)
template <int S, int V, int T, bool END>
__global__ void __launch_bounds__(256) k(float* out, int iters, float z, uint32_t* buf) {
  __shared__ uint2 ring[8][33];
  Body<S> b(z);
  const uint32_t w = threadIdx.x >> 5;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(&ring[w][0]));
  if (V == 0) {
    for (int i = 0; i < iters; ++i) b.run(z);
  } else if (V <= 2) {
    for (int i = 0; i < iters; ++i) {
      uint32_t t;
      if (!END) { t = tnow<T>(); if (V == 2) t |= 3u; asm volatile("st.shared.u32 [%0], %1;" :: "r"(base), "r"(t) : "memory"); }
      b.run(z);
      if (END) { t = tnow<T>(); if (V == 2) t |= 3u; asm volatile("st.shared.u32 [%0], %1;" :: "r"(base), "r"(t) : "memory"); }
    }
  } else {
    const uint32_t W = (V == 5 || V == 6) ? 4u : 8u;
    asm volatile("st.shared.u32 [%0], %1;" :: "r"(base), "r"(0x80000000u) : "memory");
    uint32_t valid;
    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(valid) : "r"(base) : "memory");
    uint32_t a = base, off = (blockIdx.x * 8u + w) * (uint32_t)iters * W;
    const uint32_t j = lane();
    int i = 0;
    auto rec = [&]() {
      const uint32_t t = tnow<T>();
      if (V == 3 || V == 7) {
        if (V == 7) asm volatile("{.reg .pred p; setp.eq.u32 p, %3, 0; @p st.shared.v2.u32 [%0], {%1, %2};}" :: "r"(a), "r"(t), "r"(valid), "r"(j) : "memory");
        else asm volatile("st.shared.v2.u32 [%0], {%1, %2};" :: "r"(a), "r"(t), "r"(valid) : "memory");
        a += 8u;
      } else if (V == 4) {
        a += 8u;
        asm volatile("st.shared.v2.u32 [%0+-8], {%1, %2};" :: "r"(a), "r"(t), "r"(valid) : "memory");
      } else if (V == 5) {
        asm volatile("st.shared.u32 [%0], %1;" :: "r"(a), "r"(t | 1u) : "memory");
        a += 4u;
      } else {
        a += 4u;
        asm volatile("st.shared.u32 [%0+-4], %1;" :: "r"(a), "r"(t | 1u) : "memory");
      }
    };
    for (; i < iters && iters - i > 31; ) {
      for (const uint32_t e = a + 32u * W; a != e;) {
        if (!END) rec();
        b.run(z);
        if (END) rec();
        ++i;
      }
      a = base;
      if (W == 8) {
        uint2 v;
        asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(base + j * 8u) : "memory");
        *reinterpret_cast<uint2*>(reinterpret_cast<char*>(buf) + off + j * 8u) = v;
      } else {
        uint32_t v;
        asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(base + j * 4u) : "memory");
        buf[off / 4u + j] = v;
      }
      off += 32u * W;
    }
    for (; i < iters; ++i) b.run(z);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = b.sum();
}

typedef void (*K)(float*, int, float, uint32_t*);
struct Arm { const char* name; K f; };
#define ARMS(S, T, E) \
  {#S "/" #T "/" #E "/1fixed", k<S, 1, T, E>}, {#S "/" #T "/" #E "/2fixed_site", k<S, 2, T, E>}, \
  {#S "/" #T "/" #E "/3w8_after", k<S, 3, T, E>}, {#S "/" #T "/" #E "/4w8_before", k<S, 4, T, E>}, \
  {#S "/" #T "/" #E "/5w4_after", k<S, 5, T, E>}, {#S "/" #T "/" #E "/6w4_before", k<S, 6, T, E>}, \
  {#S "/" #T "/" #E "/7w8_lane0", k<S, 7, T, E>}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 2048, rounds = argc > 2 ? atoi(argv[2]) : 5, reps = 21;
  std::vector<Arm> arms = {{"0/-/-/0clean", k<0, 0, 0, false>}, {"1/-/-/0clean", k<1, 0, 0, false>},
    ARMS(0, 0, 0), ARMS(0, 0, 1), ARMS(0, 1, 0), ARMS(0, 1, 1), ARMS(1, 0, 0), ARMS(1, 0, 1), ARMS(1, 1, 0), ARMS(1, 1, 1)};
  int sms; CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms * 8;
  float* out; uint32_t* buf;
  CHECK(cudaMalloc(&out, blocks * 256 * 4));
  CHECK(cudaMalloc(&buf, (size_t)blocks * 8 * iters * 8));
  std::vector<std::vector<float>> med(arms.size());
  cudaEvent_t ea, eb; CHECK(cudaEventCreate(&ea)); CHECK(cudaEventCreate(&eb));
  for (int r = 0; r < rounds; ++r)
    for (size_t a = 0; a < arms.size(); ++a) {
      std::vector<float> ms(reps);
      for (int w = 0; w < 3; ++w) arms[a].f<<<blocks, 256>>>(out, iters, 0.1f, buf);
      for (int q = 0; q < reps; ++q) {
        CHECK(cudaEventRecord(ea)); arms[a].f<<<blocks, 256>>>(out, iters, 0.1f, buf); CHECK(cudaEventRecord(eb));
        CHECK(cudaEventSynchronize(eb)); CHECK(cudaEventElapsedTime(&ms[q], ea, eb));
      }
      std::sort(ms.begin(), ms.end()); med[a].push_back(ms[reps / 2]);
    }
  for (size_t a = 0; a < arms.size(); ++a) {
    auto m = med[a]; std::sort(m.begin(), m.end());
    auto c = med[arms[a].name[0] == '0' ? 0 : 1]; std::sort(c.begin(), c.end());
    printf("%-26s %8.4f ms %+6.2f%%\n", arms[a].name, m[m.size() / 2], 100.0 * (m[m.size() / 2] / c[c.size() / 2] - 1.0));
  }
}
