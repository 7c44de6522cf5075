// atrex_capture.cuh — atrex-inject's host capture session: binds a buffer to a launch, reads it
// back and writes the capture files (docs/format.md).
//
// atrex::host::Capture brackets one launch of the target kernel (the rewriter wraps each launch it
// finds). With ATREX_TIMELINE_OUT unset it binds nothing and on() is false: the wrapped launch runs
// the clean kernel. Set, it allocates and clears a buffer, writes the launch header, binds the
// buffer to atrex_tl_buffer and on() is true (the launch runs K__atrex); finish() synchronizes,
// reads the buffer back and writes <kernel>-launch<N>.atrex and its JSON sidecar atomically.
// ATREX_TIMELINE_DEFER=1 keeps the buffers and writes them at exit (measurement mode).
#pragma once
#ifndef __CUDACC_RTC__  // NVRTC (CUDA source in a Python string, docs/kernelpy.md) compiles device code only
#include "atrex_recorder.cuh"
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace atrex {
namespace host {

inline bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "atrex: capture failed at %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Capture's own text and arrays, on malloc: <string> would add about a third of a second and
// <vector> a tenth to every host compile of an instrumented unit (g++, C++17), and capture only
// appends. Text that only grows; good() is false once an allocation failed.
class Text {
 public:
  Text() = default;
  Text(Text&& o) noexcept : s_(o.s_), n_(o.n_), good_(o.good_) { o.s_ = nullptr; o.n_ = 0; }
  Text(const Text&) = delete;
  Text& operator=(const Text&) = delete;
  ~Text() { std::free(s_); }
  Text& add(const char* t) { return addf("%s", t ? t : ""); }
  Text& addf(const char* fmt, ...) {
    va_list a, b;
    va_start(a, fmt);
    va_copy(b, a);
    const int k = std::vsnprintf(nullptr, 0, fmt, a);
    va_end(a);
    char* more = k < 0 ? nullptr : static_cast<char*>(std::realloc(s_, n_ + static_cast<size_t>(k) + 1));
    if (more) {
      s_ = more;
      std::vsnprintf(s_ + n_, static_cast<size_t>(k) + 1, fmt, b);
      n_ += static_cast<size_t>(k);
    } else {
      good_ = false;
    }
    va_end(b);
    return *this;
  }
  const char* c_str() const { return s_ ? s_ : ""; }
  size_t size() const { return n_; }
  bool good() const { return good_; }

 private:
  char* s_ = nullptr;
  size_t n_ = 0;
  bool good_ = true;
};

// An array of trivially copyable items that only grows; what holds one (a static) lives for the
// process, so its memory is never given back. push() is false when an allocation failed.
template <typename T>
struct Grow {
  T* items = nullptr;
  size_t n = 0, cap = 0;
  bool push(const T& v) {
    if (n == cap) {
      const size_t c = cap ? 2 * cap : 8;
      T* more = static_cast<T*>(std::realloc(items, c * sizeof(T)));
      if (!more) return false;
      items = more;
      cap = c;
    }
    items[n++] = v;
    return true;
  }
  T* begin() const { return items; }
  T* end() const { return items + n; }
};

// Write to a temporary name, fsync, rename: a file that exists under its final name is whole.
inline bool write_atomic(const char* path, const void* data, size_t n) {
  if (!*path) return false;  // a name that could not be made
  Text tmp;
  tmp.add(path).add(".part");
  if (!tmp.good()) return false;
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  bool good = std::fwrite(data, 1, n, f) == n && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  good = (std::fclose(f) == 0) && good;
  if (good) good = std::rename(tmp.c_str(), path) == 0;
  if (!good) std::remove(tmp.c_str());
  return good;
}

// ATREX_TIMELINE_DEFER=1 (measurement mode): written launches are neither synchronized nor
// written when they finish; their buffers are allocated at the first launch of the process
// (normally a warmup launch) and written once, at exit. Probes record exactly as in capture mode.
inline bool defer_writes() {
  const char* d = std::getenv("ATREX_TIMELINE_DEFER");
  return d && *d && *d != '0';
}

// CRC-32 (IEEE, as zlib.crc32) of the raw file, recorded in the sidecar: decode refuses a file
// that was altered or torn after it was written.
inline uint32_t crc32(const unsigned char* p, size_t n) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

inline Text json_escape(const char* s) {
  Text o;
  for (; s && *s; ++s) {
    if (static_cast<unsigned char>(*s) < 0x20) continue;
    o.addf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
  }
  return o;
}

// One identity per process, in every sidecar it writes: validation keeps one run per capture folder.
inline const char* run_id() {
  static char id[33] = {0};
  if (!id[0]) {
    unsigned char r[16] = {0};
    FILE* f = std::fopen("/dev/urandom", "rb");
    const bool got = f && std::fread(r, 1, sizeof r, f) == sizeof r;
    if (f) std::fclose(f);
    if (!got) {  // no /dev/urandom: time and process id still differ between runs
      const uint64_t a = static_cast<uint64_t>(std::time(nullptr)), b = static_cast<uint64_t>(getpid());
      std::memcpy(r, &a, 8);
      std::memcpy(r + 8, &b, 8);
    }
    for (int i = 0; i < 16; ++i) std::snprintf(id + 2 * i, 3, "%02x", r[i]);
  }
  return id;
}

// What the rewriter knows about one instrumented kernel; one static instance per kernel (a type
// every unit shares: it holds data only, no unit's code).
struct KernelPlan {
  const char* kernel;
  const char* source_id_hex;  // 64 hex digits
  const GroupDesc* groups;
  uint32_t n_groups, capacity;
  uint64_t capture_skip, capture_count;  // launches [skip, skip+count) are written; count 0 = all
  uint64_t launches;                     // launches seen so far in this process
  unsigned char* scratch;                // device buffer for launches that are not written
  uint64_t scratch_bytes;
  unsigned char* bound;      // pointer this plan last bound to atrex_tl_buffer: rebinding costs a copy per launch
  uint32_t scratch_dims[6];  // geometry the scratch header was written for
  uint32_t staging_warps = 0;  // staged or resident rings: warps per CTA they were sized for
  bool staging_refused = false;  // a launch was refused for too many warps (reported once)
  bool too_big_refused = false;  // a launch was refused for a buffer over 4 GiB (reported once)
  LaunchHeader bound_header = {};  // last copy bound to atrex_tl_header (launch_seq 0; magic 0: none yet)
  // Deferred mode: the written launches' buffers and their sizes, allocated at this kernel's first
  // launch for its geometry; a later launch that needs more allocates its own. The kernel's own:
  // one pool shared by the process's kernels could hand a kernel a buffer sized for another
  // kernel's launch.
  struct Buffer {
    unsigned char* at;
    uint64_t bytes;
  };
  Grow<Buffer> preallocated = {};
};

// Everything below has internal linkage, one copy per translation unit: it binds the unit's own
// recorder symbols (atrex_recorder.cuh) and reads the unit's event layout (kFlags, kEventBytes, set
// by the unit's macros). As ordinary inline functions the linker would keep one unit's copy for
// all, and a second instrumented unit's launches would bind the first unit's symbols while its own
// kernels read null (two kernels in two .cu files: the consumer of examples/cuda/handoff/ recorded
// nothing).
namespace {

inline void fill_header(const KernelPlan& p, dim3 g, dim3 b, uint64_t seq, LaunchHeader& h) {
  std::memset(&h, 0, sizeof h);
  h.magic = kMagic;
  h.version = kFormatVersion;
  h.header_bytes = sizeof(LaunchHeader);
  for (int i = 0; i < 32; ++i) {
    unsigned v = 0;
    std::sscanf(p.source_id_hex + 2 * i, "%2x", &v);
    h.source_id[i] = static_cast<uint8_t>(v);
  }
  h.launch_seq = seq;
  h.grid[0] = g.x; h.grid[1] = g.y; h.grid[2] = g.z;
  h.block[0] = b.x; h.block[1] = b.y; h.block[2] = b.z;
  h.capacity = p.capacity;
  h.n_groups = p.n_groups;
  h.flags = kFlags;
  const uint32_t n_ctas = g.x * g.y * g.z, n_threads = b.x * b.y * b.z;
  uint32_t base = 0;
  for (uint32_t i = 0; i < p.n_groups; ++i) {
    GroupDesc d = p.groups[i];
    d.owner_base = base;
    d.n_owners = ctas_selected(d, n_ctas) * owners_per_cta(d, n_threads);
    base += d.n_owners;
    h.groups[i] = d;
  }
  h.n_owners = base;
  h.owner_bytes = sizeof(OwnerHeader);
  h.event_bytes = kEventBytes;
  h.owners_offset = sizeof(LaunchHeader);
  h.events_offset = h.owners_offset + static_cast<uint64_t>(base) * sizeof(OwnerHeader);
  h.total_bytes = h.events_offset + static_cast<uint64_t>(base) * p.capacity * kEventBytes;
}

// Which plan's buffer and header this translation unit's symbols hold: the symbols are the unit's
// (atrex_recorder.cuh), shared by every instrumented kernel it compiles, so what a plan remembers
// having bound is still bound only while no other plan of the unit has bound since.
const KernelPlan* atrex_tl_buffer_of = nullptr;
const KernelPlan* atrex_tl_header_of = nullptr;

// Brackets one launch: construct before the launch, finish() after it (or let it go out of scope).
class Capture {
 public:
  Capture(KernelPlan& plan, dim3 grid, dim3 block, cudaStream_t stream = 0)
      : plan_(plan), grid_(grid), block_(block), stream_(stream), buf_(nullptr), write_(false) {
    seq_ = plan_.launches++;
    const char* out = std::getenv("ATREX_TIMELINE_OUT");
    unsigned char* bind = nullptr;
    const uint32_t warps = (block_.x * block_.y * block_.z + 31u) / 32u;
    if (plan_.staging_warps && warps > plan_.staging_warps) {
      if (!plan_.staging_refused)
        std::fprintf(stderr, "atrex: launch %llu of %s has %u warps per CTA, more than the %u its staging rings were "
                     "sized for (spec [capture] staging.warps): probes off, not captured (reported once)\n",
                     static_cast<unsigned long long>(seq_), plan_.kernel, warps, plan_.staging_warps);
      plan_.staging_refused = true;
      out = nullptr;
    }
    if (out && *out) {
      fill_header(plan_, grid_, block_, seq_, header_);
      if (header_.total_bytes > 0xFFFFFFFFull) {  // the recorder addresses slots with 32-bit offsets
        if (!plan_.too_big_refused)
          std::fprintf(stderr, "atrex: launch %llu of %s would need a %llu-byte buffer, over the recorder's 4 GiB: "
                       "probes off, not captured (reported once); lower [capture] capacity or the CTA density\n",
                       static_cast<unsigned long long>(seq_), plan_.kernel,
                       static_cast<unsigned long long>(header_.total_bytes));
        plan_.too_big_refused = true;
        out = nullptr;
      }
    }
    if (out && *out) {
      write_ = seq_ >= plan_.capture_skip &&
               (plan_.capture_count == 0 || seq_ < plan_.capture_skip + plan_.capture_count);
      if (defer_writes() && seq_ == 0) preallocate();
      bind = write_ ? alloc_fresh() : scratch();
    }
    // probes off (no buffer) with another plan's buffer bound: the clean kernel runs, nothing to copy
    if (bind != plan_.bound || write_ || (bind && atrex_tl_buffer_of != &plan_)) {
      plan_.bound = bind;
      atrex_tl_buffer_of = &plan_;
      ok(cudaMemcpyToSymbolAsync(atrex_tl_buffer, &plan_.bound, sizeof bind, 0, cudaMemcpyHostToDevice, stream_),
         "bind buffer");
    }
    if (bind) bind_header();
  }

  // Is a buffer bound for this launch (probes on)? The rewriter's launch picks the kernel's
  // instrumented copy when it is, the clean kernel when it is not.
  bool on() const { return plan_.bound != nullptr; }

  // A session that goes out of scope unfinished (the launch was returned: `return LAUNCH;`, or an
  // error-check macro returned early) finishes then; finish() runs once.
  ~Capture() { finish(); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // After the launch: synchronize, read back and write one raw file plus its JSON sidecar; in
  // deferred mode, only remember the buffer (flush_deferred writes it at exit).
  void finish() {
    if (!write_) return;
    write_ = false;
    if (!ok(cudaGetLastError(), "kernel launch")) return;
    Pending p{buf_, header_, seq_, grid_, block_, stream_, plan_.kernel, plan_.source_id_hex};
    if (defer_writes() && deferred().push(p)) return;
    write(p);
    cudaFree(buf_);
  }

  struct Pending {
    unsigned char* buf;
    LaunchHeader header;
    uint64_t seq;
    dim3 grid, block;
    cudaStream_t stream;
    const char* kernel;
    const char* source_id_hex;
  };

  static Grow<Pending>& deferred() {
    static Grow<Pending> v;
    return v;
  }

  // Writes every deferred launch; registered with atexit, callable earlier by the program.
  static void flush_deferred() {
    for (const Pending& p : deferred()) write(p);
    deferred().n = 0;
  }

  static void write(const Pending& p) {
    Text base;
    base.addf("%s/%s-launch%llu", std::getenv("ATREX_TIMELINE_OUT"), p.kernel, static_cast<unsigned long long>(p.seq));
    const size_t n = static_cast<size_t>(p.header.total_bytes);
    void* host = std::malloc(n);
    bool good = host && base.good() && ok(cudaStreamSynchronize(p.stream), "synchronize") &&
                ok(cudaMemcpy(host, p.buf, n, cudaMemcpyDeviceToHost), "read back");
    if (good) good = write_atomic(Text().addf("%s.atrex", base.c_str()).c_str(), host, n);
    if (good) {
      const Text side =
          sidecar(p, base.c_str(), crc32(static_cast<const unsigned char*>(host), n), stamp_resolution_ns(p.header, host));
      good = side.good() && write_atomic(Text().addf("%s.json", base.c_str()).c_str(), side.c_str(), side.size());
    }
    if (!good) std::fprintf(stderr, "atrex: launch %llu of %s was not captured\n",
                            static_cast<unsigned long long>(p.seq), p.kernel);
    std::free(host);
  }

 private:
  // The device reads the header from its constant copy (atrex_tl_header); copied only when it
  // differs from the last one this plan bound or another plan bound since, so a timed loop of
  // same-shaped launches copies nothing.
  void bind_header() {
    LaunchHeader h = header_;
    h.launch_seq = 0;
    if (atrex_tl_header_of == &plan_ && std::memcmp(&h, &plan_.bound_header, sizeof h) == 0) return;
    plan_.bound_header = h;
    atrex_tl_header_of = &plan_;
    ok(cudaMemcpyToSymbolAsync(atrex_tl_header, &plan_.bound_header, sizeof h, 0, cudaMemcpyHostToDevice, stream_),
       "bind header");
  }

  // Deferred mode: the written launches' buffers are allocated at the first launch (for its
  // geometry), so no allocation happens inside a timed loop; their writes wait for exit.
  void preallocate() {
    std::atexit(flush_deferred);
    if (plan_.capture_count == 0 || plan_.capture_count > 64) return;
    for (uint64_t i = 0; i < plan_.capture_count; ++i) {
      unsigned char* b = nullptr;
      if (ok(cudaMalloc(&b, header_.total_bytes), "preallocate") && !plan_.preallocated.push({b, header_.total_bytes}))
        cudaFree(b);
    }
  }

  unsigned char* alloc_fresh() {
    const size_t n = static_cast<size_t>(header_.total_bytes);
    auto& pool = plan_.preallocated;
    if (pool.n && pool.items[pool.n - 1].bytes >= n) {
      buf_ = pool.items[--pool.n].at;
    } else if (!ok(cudaMalloc(&buf_, n), "allocate")) {
      write_ = false;
      return nullptr;
    }
    if (!ok(cudaMemsetAsync(buf_, 0, n, stream_), "clear") ||
        !ok(cudaMemcpyAsync(buf_, &header_, sizeof header_, cudaMemcpyHostToDevice, stream_), "write header")) {
      write_ = false;
      return nullptr;
    }
    return buf_;
  }

  // Launches that are not written record into a reused scratch buffer: same code path, no file,
  // and no host work per launch unless the geometry changes.
  unsigned char* scratch() {
    const uint32_t dims[6] = {grid_.x, grid_.y, grid_.z, block_.x, block_.y, block_.z};
    if (plan_.scratch && std::memcmp(dims, plan_.scratch_dims, sizeof dims) == 0) return plan_.scratch;
    if (plan_.scratch_bytes < header_.total_bytes) {
      if (plan_.scratch) cudaFree(plan_.scratch);
      plan_.scratch = nullptr;
      plan_.scratch_bytes = 0;
      if (!ok(cudaMalloc(&plan_.scratch, header_.total_bytes), "allocate scratch")) return nullptr;
      plan_.scratch_bytes = header_.total_bytes;
    }
    if (!ok(cudaMemcpyAsync(plan_.scratch, &header_, sizeof header_, cudaMemcpyHostToDevice, stream_),
            "write scratch header"))
      return nullptr;
    std::memcpy(plan_.scratch_dims, dims, sizeof dims);
    return plan_.scratch;
  }

  // The largest power of two (ns) dividing every claimed owner's start and end stamp (%globaltimer):
  // the timer's tick, or a multiple of it when few owners recorded; 0 with no stamp. The sidecar says it
  // (timer_resolution_ns); decode recomputes it and refuses a packed capture under 32 ns (layout.py).
  static uint64_t stamp_resolution_ns(const LaunchHeader& h, const void* host) {
    const OwnerHeader* oh = reinterpret_cast<const OwnerHeader*>(static_cast<const unsigned char*>(host) + h.owners_offset);
    uint64_t low = 0;
    for (uint32_t i = 0; i < h.n_owners; ++i) {
      if (!oh[i].claims) continue;
      const uint64_t s[2] = {(uint64_t(oh[i].t0_hi) << 32) | oh[i].t0_lo, (uint64_t(oh[i].t1_hi) << 32) | oh[i].t1_lo};
      for (uint64_t v : s)
        if (v && (!low || (v & (~v + 1u)) < low)) low = v & (~v + 1u);
    }
    return low;
  }

  static Text sidecar(const Pending& p, const char* base, uint32_t crc, uint64_t resolution) {
    int dev = 0, drv = 0, rt = 0;
    cudaGetDevice(&dev);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    cudaDeviceProp prop;
    std::memset(&prop, 0, sizeof prop);
    cudaGetDeviceProperties(&prop, dev);
    char uuid[64];
    const unsigned char* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    char when[32];
    std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    const char* workload = std::getenv("ATREX_WORKLOAD");
    const char* slash = std::strrchr(base, '/');
    Text side;
    side.addf("{\"format\": \"atrex-timeline-capture\", \"version\": %u, \"file\": \"%s.atrex\", \"kernel\": \"%s\", "
              "\"launch_seq\": %llu, \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"source_id\": \"%s\", "
              "\"workload\": \"%s\", \"device\": {\"name\": \"%s\", \"uuid\": \"%s\", \"sm_count\": %d, "
              "\"cc\": \"%d.%d\"}, \"driver_version\": %d, \"runtime_version\": %d, \"time_utc\": \"%s\", "
              "\"timer_resolution_ns\": %llu, \"run_id\": \"%s\", \"bytes\": %llu, \"crc32\": %u}\n",
              kFormatVersion, slash ? slash + 1 : base, p.kernel, static_cast<unsigned long long>(p.seq), p.grid.x, p.grid.y,
              p.grid.z, p.block.x, p.block.y, p.block.z, p.source_id_hex, json_escape(workload).c_str(),
              json_escape(prop.name).c_str(), uuid, prop.multiProcessorCount, prop.major, prop.minor, drv, rt, when,
              static_cast<unsigned long long>(resolution), run_id(), static_cast<unsigned long long>(p.header.total_bytes), crc);
    return side;
  }

  KernelPlan& plan_;
  dim3 grid_, block_;
  cudaStream_t stream_;
  unsigned char* buf_;
  bool write_;
  uint64_t seq_;
  LaunchHeader header_;
};

}  // namespace

}  // namespace host
}  // namespace atrex
#endif  // __CUDACC_RTC__
