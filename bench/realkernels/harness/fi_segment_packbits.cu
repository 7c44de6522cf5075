// flashinfer's segmented bit packing (quantization.cuh, SegmentPackBitsKernel through
// flashinfer::quantization::SegmentPackBits, big-endian bits): 512 boolean masks of 96K-128K
// elements each (attention masks of long sequences), one CTA of 256 threads per mask walking it in
// chunks of 2048 through cub::BlockLoad. Checked: every packed byte against a CPU packing (exact).
#include "flashinfer/quantization.cuh"
#include "realkernels.cuh"

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const uint32_t segments = 512;
  unsigned long long s = a.seed;
  std::vector<int32_t> in_ptr(segments + 1, 0), out_ptr(segments + 1, 0);
  for (uint32_t b = 0; b < segments; ++b) {
    const int32_t len = 98304 + 8 * int32_t((lcg_uniform(s) + 1) * 2048);  // 96K..128K, a multiple of 8
    in_ptr[b + 1] = in_ptr[b] + len;
    out_ptr[b + 1] = out_ptr[b] + len / 8;
  }
  std::vector<uint8_t> bits(in_ptr[segments]);
  for (auto& x : bits) x = lcg_uniform(s) > 0.2f;
  bool* din = reinterpret_cast<bool*>(to_device(bits));
  uint8_t* dout = to_device(std::vector<uint8_t>(out_ptr[segments]));
  int32_t *dip = to_device(in_ptr), *dop = to_device(out_ptr);
  auto launch = [&] {
    CHECK(flashinfer::quantization::SegmentPackBits(din, dout, dip, dop, segments,
                                                    flashinfer::quantization::BitOrder::kBig, nullptr));
  };
  auto check = [&](Tolerance& tol) {
    const auto out = from_device(dout, out_ptr[segments]);
    for (uint32_t b = 0; b < segments; ++b)
      for (int32_t j = 0; j < (in_ptr[b + 1] - in_ptr[b]) / 8; ++j) {
        unsigned want = 0;
        for (int k = 0; k < 8; ++k) want = (want << 1) | bits[in_ptr[b] + 8 * j + k];
        tol(out[out_ptr[b] + j], want);
      }
  };
  return run_harness(a, "flashinfer_segment_packbits:segments=512:len=96K-128K:seed=" + std::to_string(a.seed),
                     [] {}, launch, check, Tolerance{0, 0});
}
