// tricky.cu — a source built to confuse naive probe placement. Never run; compiled in tests.
// { an unbalanced brace in a comment
/* and } another in a block comment; */
#include <cstdint>
#include <cuda_runtime.h>
#define TWICE(x) \
  do { (x); (x); } while (0)  /* { */
#define UNROLL _Pragma("unroll")
#if 0
  __global__ void disabled( {   // unbalanced, never compiled
#endif

template <int N, typename T>
struct Pair { T v[N]; };

namespace ns {
template <int BM, int BN>
__global__ void __launch_bounds__(128, 1) tricky(float* out, const float* in, int n) {
  const char* s = "};{ \" \\";  // braces and semicolons in a string
  const char c = '}';
  const char* r = R"raw(}{;)raw";
  Pair<2, Pair<1, int>> nested{};  // template closing >>
  auto add = [&](float a, float b) { return a + b; };  // lambda with its own return
  int lane = threadIdx.x & 31;
  if (n <= 0) return;
  float acc = 0.f;
  UNROLL
  for (int i = 0; i < 4; ++i) acc = add(acc, in[i]);
  for (int k = threadIdx.x; k < n; k += blockDim.x) {
    if (in[k] < 0.f) continue;
    if (in[k] > 1e30f) break;
    acc += in[k] * (k % 2 ? 1.f : -1.f);
  }
  uint32_t flag = lane == 0;
  asm volatile(
      "{\n\t"
      ".reg .pred p;\n\t"
      "setp.ne.u32 p, %1, 0;\n\t"
      "@p mov.b32 %0, %%laneid;\n\t"
      "}"
      : "=r"(flag) : "r"(flag));
  asm volatile("bar.sync 0;" ::: "memory");
  TWICE(acc += 1.f);
  switch (lane) {
    case 0: acc += 1.f; break;
    default: { acc -= 1.f; }
  }
  do { acc *= 0.5f; } while (acc > 10.f);
  if (flag) out[blockIdx.x] = acc + nested.v[0].v[0] + s[0] + c + r[0];
  else
    out[blockIdx.x] = 0.f;
}
}  // namespace ns

void host_launch(float* out, const float* in, int n, cudaStream_t st) {
  if (n > 0) ns::tricky<64, 64><<<dim3(4), dim3(128), 0, st>>>(out, in, n);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(2);
  cfg.blockDim = dim3(128);
  cudaLaunchKernelEx(&cfg, ns::tricky<64, 64>, out, in, n);
}
