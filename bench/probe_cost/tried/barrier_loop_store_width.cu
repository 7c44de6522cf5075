// experiment: the product's staged trip against a fixed-slot store, and the trip loop unrolled
#include <cstdint>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <string>
#include "../../../runtime/atrex_recorder.cuh"
#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(3);} } while (0)

template <int S> struct Body;
template <> struct Body<0> {
  float a0, a1, a2, a3;
  __device__ Body(float) { a0 = threadIdx.x; a1 = a0 + 1.f; a2 = a0 + 2.f; a3 = a0 + 3.f; }
  __device__ __forceinline__ void run(float, int) {
#pragma unroll
    for (int j = 0; j < 32; ++j) { a0 = fmaf(a0, 1.0001f, 0.5f); a1 = fmaf(a1, 0.9999f, 0.25f); a2 = fmaf(a2, 1.0002f, 0.125f); a3 = fmaf(a3, 0.9998f, 0.0625f); }
  }
  __device__ float sum() const { return a0 + a1 + a2 + a3; }
};
template <> struct Body<1> {
  float x, y;
  __device__ Body(float) { x = threadIdx.x * 1e-3f; y = 0.5f; }
  __device__ __forceinline__ void run(float z, int) {
#pragma unroll
    for (int j = 0; j < 64; ++j) { x = fmaf(x, y, z); y = fmaf(y, z, x); }
  }
  __device__ float sum() const { return x + y; }
};
template <> struct Body<2> {  // smem
  float v;
  __device__ Body(float) { v = threadIdx.x; }
  __device__ __forceinline__ void run(float, int i) {
    __shared__ float buf[2][256];
    const int t = threadIdx.x;
    float* b = buf[i & 1];
    b[t] = v;
    __syncthreads();
    v *= 0.5f;
#pragma unroll
    for (int k = 1; k <= 8; ++k) v = fmaf(b[(t + 32 * k) & 255], 0.0625f, v);
  }
  __device__ float sum() const { return v; }
};
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> struct Body<3> {  // mma
  float d[4][4];
  __device__ Body(float) { for (int j = 0; j < 4; ++j) for (int k = 0; k < 4; ++k) d[j][k] = 0.f; }
  __device__ __forceinline__ void run(float, int) {
    const uint32_t a[4] = {0x3b803b80u, 0x3b803b80u, 0x3b803b80u, 0x3b803b80u}, b[2] = {0x3b803b80u, 0x3b803b80u};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int j = 0; j < 4; ++j) mma_bf16(d[j], a, b);
    }
  }
  __device__ float sum() const { float s = 0.f; for (int j = 0; j < 4; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3]; return s; }
};

// V: 0 clean; 1 fixed slot STS.32 t|site (IKeT's store, no trigger); 2.. product staged trips, trip loop unrolled U = V - 1
template <int S, int V, bool END>
__global__ void __launch_bounds__(256) k(float* out, int iters, float z) {
  Body<S> b(z);
  if (V == 0) {
    for (int i = 0; i < iters; ++i) b.run(z, i);
  } else if (V == 8 || V == 10) {
    __shared__ uint2 ring8[8][32];
    const uint32_t s0 = static_cast<uint32_t>(__cvta_generic_to_shared(&ring8[threadIdx.x >> 5][0]));
    uint32_t a = 0u;
    for (int i = 0; i < iters; ++i) {
      if (!END) { asm volatile("st.shared.v2.u32 [%0], {%1, %2};" :: "r"(s0 + a), "r"(atrex::globaltimer_lo()), "r"(0x80000000u) : "memory"); if (V == 10) a = (a + 8u) & 255u; }
      b.run(z, i);
      if (END) { asm volatile("st.shared.v2.u32 [%0], {%1, %2};" :: "r"(s0 + a), "r"(atrex::globaltimer_lo()), "r"(0x80000000u) : "memory"); if (V == 10) a = (a + 8u) & 255u; }
    }
  } else if (V == 1) {
    __shared__ uint32_t slot[8];
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(&slot[threadIdx.x >> 5]));
    for (int i = 0; i < iters; ++i) {
      if (!END) asm volatile("st.shared.u32 [%0], %1;" :: "r"(s), "r"(atrex::globaltimer_lo() | 1u) : "memory");
      b.run(z, i);
      if (END) asm volatile("st.shared.u32 [%0], %1;" :: "r"(s), "r"(atrex::globaltimer_lo() | 1u) : "memory");
    }
  } else {
    atrex::BasicRecorder<32u, 8u, 0u> r(0u);
    int i = 0;
    r.trips_begin();
    for (; (i < iters) && iters - i > 31;) {
#pragma unroll (V == 9 ? 4 : V - 1)
      for (const unsigned e = r.trip_end(32u); r.in_trip(e);) {
        if (!END) r.rec_held(0u);
        b.run(z, i);
        if (END) r.rec_held(0u);
        ++i;
      }
      r.flush(V == 9 ? 0u : 32u);
    }
    for (; i < iters; ++i) { if (!END) r.rec(0u); b.run(z, i); if (END) r.rec(0u); }
    out[blockIdx.x * blockDim.x + threadIdx.x] = b.sum();
    atrex::finish(r);
    return;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = b.sum();
}

typedef void (*K)(float*, int, float);
struct Arm { const char* name; int shape; K f; };
#define ARMS(S, E) {#S "/" #E "/1fixed_site", S, k<S, 1, E>}, {#S "/" #E "/2trips", S, k<S, 2, E>}, \
  {#S "/" #E "/3trips_u2", S, k<S, 3, E>}, {#S "/" #E "/5trips_u4", S, k<S, 5, E>}
#define ARMS2(S, E) {#S "/" #E "/1fixed_site", S, k<S, 1, E>}, {#S "/" #E "/8fixed64", S, k<S, 8, E>}, \
  {#S "/" #E "/10circular64", S, k<S, 10, E>}, {#S "/" #E "/5trips_u4", S, k<S, 5, E>}, {#S "/" #E "/9trips_u4_nocopy", S, k<S, 9, E>}
#define SHAPE(S) {#S "/-/0clean", S, k<S, 0, false>}, ARMS2(S, 0), ARMS2(S, 1)

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 2048, rounds = argc > 2 ? atoi(argv[2]) : 5, reps = 21;
  std::vector<Arm> arms = {SHAPE(2), SHAPE(3)};
  int sms; CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms * 8;
  float* out;
  CHECK(cudaMalloc(&out, blocks * 256 * 4));
  std::vector<std::vector<float>> med(arms.size());
  cudaEvent_t ea, eb; CHECK(cudaEventCreate(&ea)); CHECK(cudaEventCreate(&eb));
  for (int r = 0; r < rounds; ++r)
    for (size_t a = 0; a < arms.size(); ++a) {
      std::vector<float> ms(reps);
      for (int w = 0; w < 3; ++w) arms[a].f<<<blocks, 256>>>(out, iters, 0.1f);
      for (int q = 0; q < reps; ++q) {
        CHECK(cudaEventRecord(ea)); arms[a].f<<<blocks, 256>>>(out, iters, 0.1f); CHECK(cudaEventRecord(eb));
        CHECK(cudaEventSynchronize(eb)); CHECK(cudaEventElapsedTime(&ms[q], ea, eb));
      }
      CHECK(cudaGetLastError());
      std::sort(ms.begin(), ms.end()); med[a].push_back(ms[reps / 2]);
    }
  size_t clean = 0;
  for (size_t a = 0; a < arms.size(); ++a) {
    if (std::string(arms[a].name).find("clean") != std::string::npos) clean = a;
    auto m = med[a]; std::sort(m.begin(), m.end());
    auto c = med[clean]; std::sort(c.begin(), c.end());
    printf("%-22s %8.4f ms %+6.2f%%  (rounds", arms[a].name, m[m.size() / 2], 100.0 * (m[m.size() / 2] / c[c.size() / 2] - 1.0));
    for (size_t q = 0; q < med[a].size(); ++q) printf(" %+.2f", 100.0 * (med[a][q] / med[clean][q] - 1.0));
    printf(")\n");
  }
}
