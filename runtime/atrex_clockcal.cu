// atrex_clockcal.cu — one calibration window: the device's %globaltimer read between two reads of
// the host clock, SAMPLES times, printed as one JSON object (docs/format.md, "Clock alignment").
//
// A one-thread kernel waits on a mailbox in mapped host memory; the host reads its clock, posts a
// request, spins until the kernel answers with the timer it read, and reads its clock again. A
// round trip over PCIe takes a microsecond or two; atrex_inject/clockalign.py keeps the tightest
// brackets and fits the offset. `atrex-inject capture --calibrate BUILD` runs this program before
// the captured program and after it, on the device CUDA_VISIBLE_DEVICES leaves first (or
// --device N), and writes clock.json into the capture folder.
//
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o build/clockcal runtime/atrex_clockcal.cu
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <cuda_runtime.h>

namespace {

struct Mailbox {
  volatile uint64_t request;  // the host's sample number, from 1
  volatile uint64_t answer;   // the kernel's, once it has written `timer`
  volatile uint64_t timer;    // %globaltimer, read after the request was seen
};

__global__ void probe_timer(Mailbox* box, uint64_t samples) {
  for (uint64_t i = 1; i <= samples; ++i) {
    while (box->request != i) {
    }
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    box->timer = t;
    __threadfence_system();  // the timer lands before the answer that announces it
    box->answer = i;
  }
}

uint64_t host_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // never stepped; one clock for every process of the host
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "atrex-clockcal: %s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

void uuid_text(const cudaUUID_t& u, char* out) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
  std::sprintf(out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
               b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  uint64_t samples = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--device")) device = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--samples")) samples = std::strtoull(argv[i + 1], nullptr, 10);
  }
  if (samples == 0 || !ok(cudaSetDevice(device), "set device") ||
      !ok(cudaSetDeviceFlags(cudaDeviceMapHost), "map host memory"))
    return 2;
  cudaDeviceProp prop;
  char pci[32] = {0}, uuid[48] = {0};
  if (!ok(cudaGetDeviceProperties(&prop, device), "device properties") ||
      !ok(cudaDeviceGetPCIBusId(pci, sizeof pci, device), "PCI bus id"))
    return 2;
  uuid_text(prop.uuid, uuid);
  Mailbox* box = nullptr;
  Mailbox* dbox = nullptr;
  if (!ok(cudaHostAlloc(&box, sizeof(Mailbox), cudaHostAllocMapped), "mailbox") ||
      !ok(cudaHostGetDevicePointer(&dbox, box, 0), "mailbox on the device"))
    return 2;
  box->request = box->answer = box->timer = 0;
  probe_timer<<<1, 1>>>(dbox, samples);
  if (!ok(cudaGetLastError(), "launch")) return 2;
  std::vector<uint64_t> rows;
  rows.reserve(3 * samples);
  for (uint64_t i = 1; i <= samples; ++i) {
    const uint64_t h0 = host_ns();
    box->request = i;
    while (box->answer != i) {
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t g = box->timer;
    const uint64_t h1 = host_ns();
    rows.insert(rows.end(), {h0, g, h1});
  }
  if (!ok(cudaDeviceSynchronize(), "synchronize")) return 2;
  std::printf("{\"format\": \"atrex-clock-window\", \"version\": 1, \"host_clock\": \"CLOCK_MONOTONIC\", "
              "\"device\": {\"uuid\": \"%s\", \"pci_bus_id\": \"%s\", \"name\": \"%s\", \"ordinal\": %d}, \"samples\": [",
              uuid, pci, prop.name, device);
  for (size_t i = 0; i < rows.size(); i += 3)
    std::printf("%s[%llu, %llu, %llu]", i ? ", " : "", static_cast<unsigned long long>(rows[i]),
                static_cast<unsigned long long>(rows[i + 1]), static_cast<unsigned long long>(rows[i + 2]));
  std::printf("]}\n");
  cudaFreeHost(box);
  return 0;
}
