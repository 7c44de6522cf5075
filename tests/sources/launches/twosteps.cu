// twosteps.cu — two kernels named step in two namespaces (tests/compile/test_launches.py).
#include <cuda_runtime.h>

namespace fast {
__global__ void step(float* x) { x[threadIdx.x] += 1.f; }
}  // namespace fast
namespace slow {
__global__ void step(float* x) { x[threadIdx.x] += 2.f; }
}  // namespace slow

void run(float* x) {
  fast::step<<<1, 32>>>(x);
  slow::step<<<1, 32>>>(x);
}

namespace slow {
void run_inside(float* x) { step<<<1, 32>>>(x); }
}  // namespace slow

using namespace fast;
void run_using(float* x) { step<<<1, 32>>>(x); }
