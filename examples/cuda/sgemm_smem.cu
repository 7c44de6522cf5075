// sgemm_smem.cu — compute-bound example: C = A * B in fp32 on the CUDA cores, tiled through shared
// memory. A is MxK, B is KxN, C is MxN, all row-major. A CTA of 256 threads owns a 128x128 tile of C
// and walks K in tiles of 8: each thread loads one float4 of A (stored transposed, so the FMA loop
// reads A's column as float4s) and one float4 of B into shared memory, a barrier, then each thread
// accumulates its 8x8 micro-tile in registers from shared memory (two float4s of A and two of B per
// k, 64 apart, so the 16 threads sharing a row of the micro-tiles read 16 consecutive float4s), and
// a second barrier before the tiles are overwritten. M and N must be multiples of 128, K of 8.
#include "harness.cuh"
#include <cmath>

constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN);  // 256

__global__ void __launch_bounds__(kThreads, 2)
    sgemm_smem(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float As[BK][BM];  // A's tile, transposed: As[k][m]
  __shared__ __align__(16) float Bs[BK][BN];
  const int tid = threadIdx.x, tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;  // one float4 of A's 128x8 tile
  const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;  // one float4 of B's 8x128 tile
  const float* a_ptr = A + (size_t)(m0 + a_row) * K + a_col;
  const float* b_ptr = B + (size_t)b_row * N + n0 + b_col;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    const float4 av = *reinterpret_cast<const float4*>(a_ptr + k0);
    const float4 bv = *reinterpret_cast<const float4*>(b_ptr + (size_t)k0 * N);
    As[a_col + 0][a_row] = av.x;
    As[a_col + 1][a_row] = av.y;
    As[a_col + 2][a_row] = av.z;
    As[a_col + 3][a_row] = av.w;
    *reinterpret_cast<float4*>(&Bs[b_row][b_col]) = bv;
    __syncthreads();  // the tiles are in shared memory
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[k][BM / 2 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][BN / 2 + tx * 4]);
      const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();  // every warp is done with the tiles before they are overwritten
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = m0 + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + i - 4);
    float* c = C + (size_t)r * N + n0;
    *reinterpret_cast<float4*>(c + tx * 4) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(c + BN / 2 + tx * 4) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

int main(int argc, char** argv) {
  HarnessArgs a = parse_args(argc, argv);
  const int M = 4096, N = 4096, K = 4096;
  std::vector<float> hA((size_t)M * K), hB((size_t)K * N);
  unsigned long long s = a.seed;
  for (auto& v : hA) v = lcg_uniform(s);
  for (auto& v : hB) v = lcg_uniform(s);
  float *A, *B, *C;
  CHECK(cudaMalloc(&A, hA.size() * 4));
  CHECK(cudaMalloc(&B, hB.size() * 4));
  CHECK(cudaMalloc(&C, (size_t)M * N * 4));
  CHECK(cudaMemcpy(A, hA.data(), hA.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(B, hB.data(), hB.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(C, 0xff, (size_t)M * N * 4));  // poison: every element must be written
  const dim3 grid(N / BN, M / BM);
  const double ms = time_launches(a, [&] { sgemm_smem<<<grid, kThreads>>>(A, B, C, M, N, K); });
  std::vector<float> hC((size_t)M * N);
  CHECK(cudaMemcpy(hC.data(), C, hC.size() * 4, cudaMemcpyDeviceToHost));
  // Full-output check would cost minutes of CPU; check 8 columns of every row in float64 instead
  // (30 to 33 in each of the 1024 CTA tiles, every position of the 8x8 micro-tile among them), plus a
  // NaN/poison scan of the whole output. B is transposed once so each dot product reads in order.
  std::vector<float> hBt((size_t)N * K);
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < N; ++c) hBt[(size_t)c * K + k] = hB[(size_t)k * N + c];
  double num = 0, den = 0;
  bool finite = true;
  for (float v : hC) finite = finite && std::isfinite(v);
  for (int r = 0; r < M; ++r)
    for (int cc = 0; cc < 8; ++cc) {
      const int c = (r * 131 + cc * 517) % N;
      const float* ar = &hA[(size_t)r * K];
      const float* bc = &hBt[(size_t)c * K];
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += double(ar[k]) * bc[k];
      num += (hC[(size_t)r * N + c] - ref) * (hC[(size_t)r * N + c] - ref);
      den += ref * ref;
    }
  const double rel = std::sqrt(num / den);
  const bool ok = finite && rel < 1e-5;
  char wl[128];
  std::snprintf(wl, sizeof wl, "sgemm_smem:M=%d:N=%d:K=%d:seed=%u", M, N, K, a.seed);
  print_sample(a, ms, ok, wl, rel);
  return ok ? 0 : 1;
}
