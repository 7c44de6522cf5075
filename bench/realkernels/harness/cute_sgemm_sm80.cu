// CuTe's SM80 tutorial GEMM (CUTLASS examples/cute/tutorial/sgemm_sm80.cu, gemm_device through its
// gemm_tn: 128x128x64 CTA tiles, a 3-stage cp.async pipeline in shared memory, ldmatrix, fp16
// mma.sync with fp16 accumulation) on M = N = K = 4096, the tutorial's own main set aside. Checked
// against a naive fp32-accumulating GPU kernel of ours on every element of C.
#define main cute_tutorial_main
#include "examples/cute/tutorial/sgemm_sm80.cu"
#undef main

#include "realkernels.cuh"

// C(m, n) = sum_k A(m, k) B(n, k): A and B K-major, C column-major, as gemm_tn lays them out; 16x16
// tiles through shared memory, fp32 accumulation (milliseconds, where a thread per output reading
// global memory would take seconds).
__global__ void reference_tn(int M, int N, int K, const cute::half_t* A, const cute::half_t* B, float* C) {
  __shared__ float a[16][17], b[16][17];
  const int m0 = blockIdx.x * 16, n0 = blockIdx.y * 16, tx = threadIdx.x, ty = threadIdx.y;
  float acc = 0;
  for (int k0 = 0; k0 < K; k0 += 16) {
    a[ty][tx] = float(A[size_t(m0 + ty) * K + k0 + tx]);
    b[ty][tx] = float(B[size_t(n0 + ty) * K + k0 + tx]);
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += a[tx][k] * b[ty][k];
    __syncthreads();
  }
  C[size_t(n0 + ty) * M + m0 + tx] = acc;
}

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const int M = 4096, N = 4096, K = 4096;
  auto half_of = [](const std::vector<float>& v) {
    std::vector<cute::half_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = cute::half_t(v[i]);
    return h;
  };
  const auto A = half_of(random_f32(size_t(M) * K, a.seed, 0.5f)), B = half_of(random_f32(size_t(N) * K, a.seed + 1, 0.5f));
  cute::half_t *dA = to_device(A), *dB = to_device(B), *dC = to_device(std::vector<cute::half_t>(size_t(M) * N));
  float* dR = to_device(std::vector<float>(size_t(M) * N));
  const cute::half_t alpha(1.0f), beta(0.0f);
  auto launch = [&] { gemm_tn(M, N, K, alpha, dA, K, dB, K, beta, dC, M); };
  auto check = [&](Tolerance& tol) {
    reference_tn<<<dim3(M / 16, N / 16), dim3(16, 16)>>>(M, N, K, dA, dB, dR);
    CHECK(cudaDeviceSynchronize());
    const auto C = from_device(dC, size_t(M) * N);
    const auto R = from_device(dR, size_t(M) * N);
    for (size_t i = 0; i < C.size(); ++i) tol(float(C[i]), R[i]);
  };
  return run_harness(a, "cute_sgemm_sm80_tn:M=4096:N=4096:K=4096:fp16:seed=" + std::to_string(a.seed), [] {}, launch,
                     check, Tolerance{0.25, 0.02});
}
