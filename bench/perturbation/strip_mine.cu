// strip_mine.cu — which part of a strip-mined recording loop costs (runs 27 and 29 in bench/RESULTS.md):
// reduce_sumsq's grid-stride loop, every CTA recording into a real buffer, variants timed side by
// side in one process (median of 41 launches, 3 rounds). On the GPU host, from the repository root:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -Iruntime -o /tmp/sm bench/perturbation/strip_mine.cu && /tmp/sm
#include "atrex_timeline.cuh"
#include <cstdio>
#include <vector>
#include <algorithm>
#define ACC(v) acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w
template <int V>
__global__ void __launch_bounds__(256) k(const float4* __restrict__ x, long n4, float* out) {
  atrex::Recorder r(0u);
  // V 15/16: lane 0 of each warp stages its events in a shared ring of 80 slots (the spec's
  // capacity), copied to global memory once, at exit: no global store inside the loop
  __shared__ __align__(16) uint2 ring[8][80];
  const uint32_t ring_at = static_cast<uint32_t>(__cvta_generic_to_shared(&ring[threadIdx.x >> 5][0]));
  uint32_t sa = ring_at, se = (threadIdx.x & 31) == 0 ? ring_at + 80 * 8 : ring_at;
  auto stage = [&](uint32_t site) {
    const uint32_t t = atrex::globaltimer_lo();
    asm volatile("{\n\t.reg .pred p;\n\tsetp.lt.u32 p, %0, %1;\n\t@p st.shared.v2.u32 [%0], {%2, %3};\n\t}"
                 ::"r"(sa), "r"(se), "r"(t), "r"(site | atrex::kTagValid));
    sa += 8;
  };
  // V 17: begin held in registers, begin+end written by one 16-byte store at the group's end;
  // V 18: one 8-byte record per group {t_begin, t_end} (no tags)
  uint32_t pair_off = (threadIdx.x & 31) == 0 ? 4096u + 8u * 80u * (blockIdx.x * 8u + (threadIdx.x >> 5)) : 0u;
  const uint32_t pair_end = (threadIdx.x & 31) == 0 ? pair_off + 16u * 40u : 0u;
  uint32_t tb = 0u;
  float acc = 0.f;
  const long S = (long)gridDim.x * 256;
  long i = blockIdx.x * 256L + threadIdx.x;
  if (V == 0) {
    for (; i < n4; i += S) { float4 v = x[i]; ACC(v); }
  } else {
    for (; (i < n4) && n4 - i > 3 * S; i += S) {
      if (V == 1 || V == 2 || V == 5) r.rec(1u);
      if (V == 15 || V == 16) stage(1u);
      if (V == 17 || V == 18) tb = atrex::globaltimer_lo();
      const long i1 = i + S, i2 = i + 2 * S, i3 = i + 3 * S;
      float4 a = x[i], b = x[i1], c = x[i2], d = x[i3];
      if (V == 6 || V == 7) r.rec(1u);  // the group's loads issued first, then the begin probe
      uint32_t tc;
      if (V == 8) { asm volatile("mov.u32 %0, %%clock;" : "=r"(tc)); if ((threadIdx.x & 31) == 0 && tc == 0xffffffffu) out[1] = 0.f; }
      if (V == 9) { asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(tc)); if ((threadIdx.x & 31) == 0 && tc == 0xffffffffu) out[1] = 0.f; }
      if (V == 10) { if ((threadIdx.x & 31) == 0) reinterpret_cast<uint2*>(atrex_tl_buffer + 4096)[blockIdx.x * 8 + (threadIdx.x >> 5)] = make_uint2((uint32_t)i, 1u); }
      if (V == 12 || V == 13) {  // the end probe's store with an L2 eviction-priority hint
        asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(tc));
        uint64_t pol;
        if (V == 12) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
        else asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
        if ((threadIdx.x & 31) == 0)
          asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1, %2}, %3;" ::"l"(atrex_tl_buffer + 4096 + 8 * (blockIdx.x * 8 + (threadIdx.x >> 5))), "r"(tc), "r"(1u), "l"(pol));
      }
      if (V == 14) {  // st.global.cs (streaming, evict-first in L1 and L2)
        asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(tc));
        if ((threadIdx.x & 31) == 0)
          asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(atrex_tl_buffer + 4096 + 8 * (blockIdx.x * 8 + (threadIdx.x >> 5))), "r"(tc), "r"(1u));
      }
      if (V == 11) { asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(tc)); if ((threadIdx.x & 31) == 0) reinterpret_cast<uint2*>(atrex_tl_buffer + 4096)[blockIdx.x * 8 + (threadIdx.x >> 5)] = make_uint2(tc, 1u); }
      { float4 v = a; ACC(v); } i += S;
      { float4 v = b; ACC(v); } i += S;
      { float4 v = c; ACC(v); } i += S;
      { float4 v = d; ACC(v); }
      if (V == 1 || V == 3 || V == 7) r.rec(2u);
      if (V == 15) stage(2u);
      if (V == 17) {
        const uint32_t te = atrex::globaltimer_lo();
        asm volatile("{\n\t.reg .pred p;\n\tsetp.lt.u32 p, %1, %2;\n\t@p st.global.v4.u32 [%0], {%3, %4, %5, %6};\n\t}"
                     ::"l"(atrex_tl_buffer + pair_off), "r"(pair_off), "r"(pair_end), "r"(tb), "r"(1u | atrex::kTagValid),
                     "r"(te), "r"(2u | atrex::kTagValid));
        pair_off += 16u;
      }
      if (V == 18) {
        const uint32_t te = atrex::globaltimer_lo();
        asm volatile("{\n\t.reg .pred p;\n\tsetp.lt.u32 p, %1, %2;\n\t@p st.global.v2.u32 [%0], {%3, %4};\n\t}"
                     ::"l"(atrex_tl_buffer + pair_off), "r"(pair_off), "r"(pair_end), "r"(tb), "r"(te));
        pair_off += 8u;
      }
    }
    for (; i < n4; i += S) { float4 v = x[i]; ACC(v); }
  }
  if ((V == 15 || V == 16) && se != ring_at) {  // lane 0 copies its staged events out
    uint2* dst = reinterpret_cast<uint2*>(atrex_tl_buffer + 4096) + (blockIdx.x * 8 + (threadIdx.x >> 5)) * 80;
    for (uint32_t a = ring_at; a < sa && a < se; a += 8) dst[(a - ring_at) / 8] = ring[threadIdx.x >> 5][(a - ring_at) / 8];
  }
  r.finish();
  if (threadIdx.x == 0) atomicAdd(out, acc);
}
template <class F> float tm(F f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b); for (int i = 0; i < 3; ++i) f(); cudaDeviceSynchronize();
  std::vector<float> t; for (int r = 0; r < 41; ++r) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
int main() {
  const long n4 = 1L << 24; float4* x; float* out;
  cudaMalloc(&x, n4 * 16); cudaMemset(x, 0, n4 * 16); cudaMalloc(&out, 4);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int grid = sms * 4;
  // a real buffer: every CTA, lane 0 of each warp records, capacity 80
  static atrex::GroupDesc groups[] = {{atrex::kLane0, 1u, 0u, 0xffffffffu, 0u, 0u}};
  static const char sid[] = "0000000000000000000000000000000000000000000000000000000000000000";
  static atrex::host::KernelPlan plan = {"k", sid, groups, 1u, 80u, 0u, 1u, 0u, nullptr, 0u, nullptr, {0u}};
  atrex::LaunchHeader h; atrex::host::fill_header(plan, dim3(grid), dim3(256), 0, h);
  unsigned char* buf; cudaMalloc(&buf, h.total_bytes); cudaMemset(buf, 0, h.total_bytes);
  cudaMemcpy(buf, &h, sizeof h, cudaMemcpyHostToDevice);
  cudaMemcpyToSymbol(atrex_tl_buffer, &buf, sizeof buf);
  const char* names[] = {"clean", "begin+end", "begin", "end", "none", "begin(dup)", "loads,begin", "loads,begin+end", "clock-only", "gtimer-only", "store-only", "gtimer+store same slot", "store evict_last", "store evict_first", "store .cs", "shared ring begin+end", "shared ring begin", "pair 16B begin+end", "interval 8B begin+end"};
  for (int round = 0; round < 3; ++round) {
    float t[19];
    t[0] = tm([&] { k<0><<<grid, 256>>>(x, n4, out); });
    t[1] = tm([&] { k<1><<<grid, 256>>>(x, n4, out); });
    t[2] = tm([&] { k<2><<<grid, 256>>>(x, n4, out); });
    t[3] = tm([&] { k<3><<<grid, 256>>>(x, n4, out); });
    t[4] = tm([&] { k<4><<<grid, 256>>>(x, n4, out); });
    t[5] = tm([&] { k<5><<<grid, 256>>>(x, n4, out); });
    t[6] = tm([&] { k<6><<<grid, 256>>>(x, n4, out); });
    t[7] = tm([&] { k<7><<<grid, 256>>>(x, n4, out); });
    t[8] = tm([&] { k<8><<<grid, 256>>>(x, n4, out); });
    t[9] = tm([&] { k<9><<<grid, 256>>>(x, n4, out); });
    t[10] = tm([&] { k<10><<<grid, 256>>>(x, n4, out); });
    t[11] = tm([&] { k<11><<<grid, 256>>>(x, n4, out); });
    t[12] = tm([&] { k<12><<<grid, 256>>>(x, n4, out); });
    t[13] = tm([&] { k<13><<<grid, 256>>>(x, n4, out); });
    t[14] = tm([&] { k<14><<<grid, 256>>>(x, n4, out); });
    t[15] = tm([&] { k<15><<<grid, 256>>>(x, n4, out); });
    t[16] = tm([&] { k<16><<<grid, 256>>>(x, n4, out); });
    t[17] = tm([&] { k<17><<<grid, 256>>>(x, n4, out); });
    t[18] = tm([&] { k<18><<<grid, 256>>>(x, n4, out); });
    printf("round %d clean %.4f ms", round, t[0]);
    for (int v = 1; v < 19; ++v) printf(" | %s %+.2f%%", names[v], 100 * (t[v] / t[0] - 1));
    printf("\n");
  }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
