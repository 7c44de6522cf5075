// Test stand-in for <torch/extension.h> (torch is not installed on the CPU test machines): the
// declarations the load_inline example's launcher uses, enough for nvcc to compile its CUDA
// string for sm_90a. The GPU check (scripts/gpu-kernelpy.sh) builds it against real torch.
#pragma once
#include <cstdint>
#include <stdexcept>

#define TORCH_CHECK(cond, msg) \
  do {                         \
    if (!(cond)) throw std::runtime_error(msg); \
  } while (0)

namespace torch {
enum ScalarType { kFloat32 };
class Tensor {
 public:
  bool is_cuda() const;
  ScalarType scalar_type() const;
  int64_t dim() const;
  bool is_contiguous() const;
  int64_t size(int64_t d) const;
  template <typename T> T* data_ptr() const;
};
Tensor empty_like(const Tensor& t);
}  // namespace torch
