// atrex_timeline.cuh — atrex-inject's device recorder and host capture session.
//
// Header-only. The rewriter includes it at the top of an instrumented .cu file; nothing else in
// the user's code depends on it. Buffer layout (format v1) is documented in docs/format.md and
// decoded by atrex_inject/decode.py; the two must change together (bump kFormatVersion).
//
// Device side: the rewriter versions the kernel body on `atrex::bound() && atrex::cta_selected(...)`
// (docs/perturbation.md): CTAs that record nothing, and every CTA when probes are off, run the
// clean body verbatim. In the instrumented copy, one atrex::Recorder per owner group is constructed
// once and reused by every site of that group. The hot path (Recorder::rec) is a %globaltimer_lo
// read, one compare, the address (the buffer's base is a constant-bank operand) and one predicated
// 8- or 16-byte store: no atomics, no branch, no local memory. Threads that are not the group's
// writer (or whose CTA/warp the density excludes) get an empty slot range, so the same predicate
// that guards overflow also masks them. With the spec's [capture] staging,
// atrex::BasicRecorder<K, W, G> stages events in a per-warp shared-memory ring instead and copies
// it out coalesced (see BasicRecorder).
//
// Host side: atrex::host::Capture brackets one launch of the target kernel. With
// ATREX_TIMELINE_OUT unset it binds a null buffer (probes off, nothing written).
//
// NVRTC (CUDA source kept in a Python string, docs/kernelpy.md) compiles device code only and has
// no host headers: it gets the device recorder alone, and Python binds the buffer.
#pragma once
#ifdef __CUDACC_RTC__
typedef unsigned char uint8_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#include <cuda_runtime.h>
#endif

#ifndef ATREX_TL_CLOCK
#define ATREX_TL_CLOCK 0  // 1: also record %clock (low 32 bits of the SM cycle counter) per event
#endif
#ifndef ATREX_TL_WIDE
#define ATREX_TL_WIDE ATREX_TL_CLOCK  // 1: 16-byte events {t, clock, payload, tag}; 0: 8-byte {t, tag}
#endif

namespace atrex {

constexpr uint32_t kMaxGroups = 8;
constexpr uint32_t kTagValid = 0x80000000u;  // set in every written event: zero slots are "never written"
constexpr uint32_t kEventBytes = ATREX_TL_WIDE ? 16u : 8u;
#ifndef __CUDACC_RTC__  // the launch header's fields only the host writes
constexpr uint64_t kMagic = 0x31304C5458525441ull;  // "ATRXTL01" little-endian
constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kFlags = (ATREX_TL_CLOCK ? 1u : 0u) | (ATREX_TL_WIDE ? 2u : 0u);
#endif

enum Role : uint32_t { kThread = 0, kLane0 = 1, kWarpgroup = 2, kCta = 3, kPredicate = 4 };

// One owner group: which threads own a recorder. Sites share a group when role and density match.
struct GroupDesc {
  uint32_t role, cta_stride, cta_limit, warp_mask, owner_base, n_owners;
};

// 512 bytes, written by the host before the launch, read (never written) by the device.
struct LaunchHeader {
  uint64_t magic;
  uint32_t version, header_bytes;
  uint8_t source_id[32];  // sha256 of the instrumented source with this digest zeroed (docs/format.md)
  uint64_t launch_seq;
  uint32_t grid[3], block[3];
  uint32_t capacity, n_groups, n_owners, flags;  // flags bit0: clock recorded, bit1: 16-byte events
  uint64_t owners_offset, events_offset, total_bytes;
  uint32_t owner_bytes, event_bytes;
  GroupDesc groups[kMaxGroups];
  uint8_t tail[512 - 128 - kMaxGroups * sizeof(GroupDesc)];  // groups start at byte 128
};
static_assert(sizeof(LaunchHeader) == 512, "launch header is 512 bytes");

// 32 bytes per owner, written by the owner's writer thread.
struct OwnerHeader {
  uint32_t claims;     // atomically incremented at construction: 1 for a valid capture
  uint32_t attempted;  // events attempted (may exceed capacity: overflow), written at kernel exit
  uint32_t smid, cta, thread;
  uint32_t t0_lo, t0_hi;  // full %globaltimer at construction: decode unwraps event times against it
  uint32_t clk0;
};
static_assert(sizeof(OwnerHeader) == 32, "owner header is 32 bytes");

__host__ __device__ inline uint32_t popc32(uint32_t v) {
#ifdef __CUDA_ARCH__
  return __popc(v);
#else
  return static_cast<uint32_t>(__builtin_popcount(v));
#endif
}

// Warps of a CTA eligible for a role, before the density mask.
__host__ __device__ inline uint32_t role_warp_mask(uint32_t role, uint32_t n_warps) {
  uint32_t valid = n_warps >= 32 ? 0xffffffffu : ((1u << n_warps) - 1u);
  if (role == kWarpgroup) return valid & 0x11111111u;
  if (role == kCta) return valid & 1u;
  return valid;
}

__host__ __device__ inline bool thread_level(uint32_t role) { return role == kThread || role == kPredicate; }

__host__ __device__ inline uint32_t owners_per_cta(const GroupDesc& d, uint32_t n_threads) {
  uint32_t m = d.warp_mask & role_warp_mask(d.role, (n_threads + 31u) / 32u);
  return popc32(m) * (thread_level(d.role) ? 32u : 1u);
}

__host__ __device__ inline uint32_t ctas_selected(const GroupDesc& d, uint32_t n_ctas) {
  uint32_t n = (n_ctas + d.cta_stride - 1u) / d.cta_stride;
  return (d.cta_limit && d.cta_limit < n) ? d.cta_limit : n;
}

}  // namespace atrex

// The launch's buffer, bound by the host before each launch; null = probes off. In constant memory:
// every CTA reads it first thing to choose between the instrumented and the clean copy of the
// kernel body, and a constant-cache hit costs a few cycles where a global load costs hundreds.
// extern "C" keeps the symbol name plain for cuModuleGetGlobal (Python capture).
extern "C" {
__constant__ unsigned char* atrex_tl_buffer = nullptr;
}

namespace atrex {

// Is a capture buffer bound to this launch (probes on)?
__device__ __forceinline__ bool bound() { return atrex_tl_buffer != nullptr; }

// Does an owner group with this CTA density (spec `ctas`) select this CTA? The rewriter passes the
// density as literals, so the test is a few integer instructions and no memory access.
__device__ __forceinline__ bool cta_selected(uint32_t stride, uint32_t limit) {
  const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  return cta % stride == 0u && (limit == 0u || cta / stride < limit);
}

__device__ __forceinline__ uint32_t globaltimer_lo() {
  uint32_t t;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
  return t;
}

__device__ __forceinline__ uint32_t lane_id() {
  uint32_t l;
  asm("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}

__device__ __forceinline__ uint32_t clock_lo() {
#if ATREX_TL_CLOCK
  uint32_t c;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(c));
  return c;
#else
  return 0u;
#endif
}

// What a thread learns at construction: where its owner's events go and how many fit.
struct Slot {
  uint32_t off, end;  // the owner's slot range, byte offsets into the buffer; empty: writes nothing
  bool active;        // its CTA and warp are selected (every lane of a recording warp)
};

// Resolves the calling thread's owner in group `group` and, if it is the owner's writer, claims the
// owner (counted atomically: a second claim is visible to decode) and stamps its header. Not inlined,
// so its header reads, divisions and address arithmetic stay out of the kernel's own schedule
// (instrumented reduce_sumsq: 40 registers instead of 42).
__device__ __noinline__ Slot claim(uint32_t group, bool pred, bool staged, bool too_many_warps) {
  Slot o{0u, 0u, false};
  unsigned char* buf = atrex_tl_buffer;
  const LaunchHeader* h = reinterpret_cast<const LaunchHeader*>(buf);
  const GroupDesc d = h->groups[group];
  if (staged && (too_many_warps || thread_level(d.role))) return o;  // the host refuses these launches
  const uint32_t tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t warp = tid >> 5, lane = tid & 31u;
  const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (cta % d.cta_stride != 0u) return o;
  const uint32_t cta_rank = cta / d.cta_stride;
  if (d.cta_limit != 0u && cta_rank >= d.cta_limit) return o;
  const uint32_t n_threads = blockDim.x * blockDim.y * blockDim.z;
  const uint32_t m = d.warp_mask & role_warp_mask(d.role, (n_threads + 31u) / 32u);
  if (((m >> warp) & 1u) == 0u) return o;
  if (d.role == kPredicate && !pred) return o;
  o.active = true;  // warp-uniform except for explicit predicates
  // warp-level roles: lane 0 owns the recorder (and, staged, every lane helps flush)
  if (!staged && !thread_level(d.role) && lane != 0u) return o;
  const uint32_t rank = popc32(m & ((1u << warp) - 1u));
  const uint32_t local = thread_level(d.role) ? rank * 32u + lane : rank;
  const uint32_t owner = d.owner_base + cta_rank * owners_per_cta(d, n_threads) + local;
  o.off = static_cast<uint32_t>(h->events_offset) + owner * h->capacity * kEventBytes;
  o.end = o.off + h->capacity * kEventBytes;
  if (staged && lane != 0u) return o;
  OwnerHeader* oh = reinterpret_cast<OwnerHeader*>(buf + h->owners_offset) + owner;
  uint64_t t0;
  uint32_t sm;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  atomicAdd(&oh->claims, 1u);
  oh->smid = sm;
  oh->cta = cta;
  oh->thread = tid;
  oh->t0_lo = static_cast<uint32_t>(t0);
  oh->t0_hi = static_cast<uint32_t>(t0 >> 32);
  oh->clk0 = clock_lo();
  return o;
}

// Publishes an owner's attempt count at kernel exit, from its slot range [first, end) and next slot
// `off`; one-off work, kept out of line like claim(). The slot range it needs stays live through
// the kernel: on layernorm that alone takes the instrumented kernel from 32 to 46 registers
// (docs/perturbation.md).
__device__ __noinline__ void publish(uint32_t off, uint32_t end) {
  const LaunchHeader* h = reinterpret_cast<const LaunchHeader*>(atrex_tl_buffer);
  const uint32_t per_owner = h->capacity * kEventBytes;
  const uint32_t first = end - per_owner;
  const uint32_t owner = (first - static_cast<uint32_t>(h->events_offset)) / per_owner;
  (reinterpret_cast<OwnerHeader*>(atrex_tl_buffer + h->owners_offset) + owner)->attempted = (off - first) / kEventBytes;
}

// Shared-memory staging rings of one owner group: W + 1 rings of K slots, one per warp of the CTA
// plus a sink for warps past W (they record nothing). One static array per group.
template <uint32_t K, uint32_t W, uint32_t G>
struct StageRing {
  // Shared address of this warp's ring.
  __device__ __forceinline__ static uint32_t of_warp(uint32_t warp) {
    __shared__ __align__(16) unsigned char ring[(W + 1u) * K * kEventBytes];
    return static_cast<uint32_t>(__cvta_generic_to_shared(ring)) + (warp < W ? warp : W) * K * kEventBytes;
  }
  __device__ __forceinline__ static bool too_many(uint32_t warp) { return warp >= W; }
};
template <uint32_t W, uint32_t G>
struct StageRing<0u, W, G> {  // no staging
  __device__ __forceinline__ static uint32_t of_warp(uint32_t) { return 0u; }
  __device__ __forceinline__ static bool too_many(uint32_t) { return false; }
};

// K = 0: events go straight to global memory (predicated store per event).
// K > 0 (spec [capture] staging): every lane of a recording warp stores the same event into its
// warp's shared-memory ring of K slots, and when the ring is full the 32 lanes copy it to global
// memory together (coalesced), checking capacity once per slot there instead of per event. Each
// lane later reads back only slots it wrote itself, so this needs the whole warp at every site
// and at exit (warp-uniform control flow); it is offered for warp-level roles only.
template <uint32_t K, uint32_t W, uint32_t G>
class BasicRecorder {
  static_assert(K <= 32u, "a staging ring holds at most 32 events: one per lane when it is copied out");

 public:
  // Constructed once per group at kernel entry. `pred` is the explicit predicate (kPredicate).
  __device__ __forceinline__ explicit BasicRecorder(uint32_t group, bool pred = true) : off_(0u), end_(0u) {
    const uint32_t warp = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) >> 5;
    if (K != 0u) {
      a_ = StageRing<K, W, G>::of_warp(warp);
      ring_end_ = a_ + K * kEventBytes;
    }
    if (atrex_tl_buffer == nullptr) return;
    const Slot o = claim(group, pred, K != 0u, StageRing<K, W, G>::too_many(warp));
    off_ = o.off;
    end_ = o.end;
    active_ = o.active;
  }

  // The hot path for dense sites. Global: a timer read, one compare, the address (the buffer's
  // base is a constant-bank operand), one predicated store and an increment; non-writers have an
  // empty slot range. Staged: a timer read, one shared store by every lane (no predicate), a
  // pointer bump and a warp-uniform branch taken once per K events.
  __device__ __forceinline__ void rec(uint32_t site, uint32_t payload = 0u) {
    const uint32_t t = globaltimer_lo();
    if (K != 0u) {
#if ATREX_TL_WIDE
      payload = __shfl_sync(0xffffffffu, payload, 0);  // lane 0's value, as on the global path
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(a_), "r"(t), "r"(clock_lo()), "r"(payload),
                   "r"(site | kTagValid));
#else
      asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(a_), "r"(t), "r"(site | kTagValid));
      (void)payload;
#endif
      a_ += kEventBytes;
      if (a_ == ring_end_) drain(K);
      return;
    }
#if ATREX_TL_WIDE
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.lt.u32 p, %1, %2;\n\t"
        "@p st.global.v4.u32 [%0], {%3, %4, %5, %6};\n\t}"
        ::"l"(atrex_tl_buffer + off_), "r"(off_), "r"(end_), "r"(t), "r"(clock_lo()), "r"(payload),
        "r"(site | kTagValid));
#else
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.lt.u32 p, %1, %2;\n\t"
        "@p st.global.v2.u32 [%0], {%3, %4};\n\t}"
        ::"l"(atrex_tl_buffer + off_), "r"(off_), "r"(end_), "r"(t), "r"(site | kTagValid));
    (void)payload;
#endif
    off_ += kEventBytes;
  }

  // Density-limited sites: warps that do not record skip the whole probe through one
  // warp-uniform branch instead of paying for a masked-off store.
  __device__ __forceinline__ void rec_active(uint32_t site, uint32_t payload = 0u) {
    if (active_) rec(site, payload);
  }

  // Sampled sites (every Nth hit, counted per thread in `hits`): the hit counter is touched only
  // in recording warps, so the rest pay one branch.
  __device__ __forceinline__ void rec_every(uint32_t& hits, uint32_t every, uint32_t site, uint32_t payload = 0u) {
    if (active_) {
      if (hits == 0u) rec(site, payload);
      hits = hits + 1u == every ? 0u : hits + 1u;
    }
  }

  // Called on every exit path: publishes the attempt count (attempted > capacity = overflow),
  // after copying a staged ring's remaining events out. The owner's index and first slot are
  // recomputed from the slot range and the header here, once, rather than kept in registers for
  // the whole kernel: registers decide occupancy and how many loads the compiler keeps in flight.
  __device__ __forceinline__ void finish() {
    if (K != 0u) drain((a_ - (ring_end_ - K * kEventBytes)) / kEventBytes);
    if (end_ == 0u) return;
    if (K != 0u && lane_id() != 0u) return;  // staged: every lane drains, lane 0 publishes
    publish(off_, end_);
  }

 private:
  // Staged: copy the ring's first `count` (<= K <= 32) events to global memory, lane j taking
  // slot j, which it stored itself; off_ advances past the events handed over (kept or not).
  __device__ __forceinline__ void drain(uint32_t count) {
    const uint32_t ring = ring_end_ - K * kEventBytes, j = lane_id(), p = off_ + j * kEventBytes;
    if (j < count && p < end_) {
#if ATREX_TL_WIDE
      uint4 v;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(ring + j * 16u) : "memory");
      *reinterpret_cast<uint4*>(atrex_tl_buffer + p) = v;
#else
      uint2 v;
      asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(ring + j * 8u) : "memory");
      *reinterpret_cast<uint2*>(atrex_tl_buffer + p) = v;
#endif
    }
    off_ += count * kEventBytes;
    a_ = ring;
  }

  // This owner's slots as byte offsets into the buffer (the host keeps a buffer under 4 GiB):
  // off_ is the next slot, end_ the end of the owner's range; both 0 for a thread that writes
  // nothing. Two registers for the whole kernel instead of a pointer, a count, a capacity and an
  // owner index.
  uint32_t off_, end_;
  bool active_ = false;  // this thread's CTA and warp are selected (every lane of a recording warp)
  uint32_t a_ = 0u, ring_end_ = 0u;  // staged: next slot and end of this warp's ring (shared addresses)
};

// The default recorder: no staging.
using Recorder = BasicRecorder<0u, 0u, 0u>;

}  // namespace atrex

// ---------------------------------------------------------------------------------------------
// Host capture session.
#ifndef __CUDACC_RTC__
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <unistd.h>
#include <vector>

namespace atrex {
namespace host {

// What the rewriter knows about one instrumented kernel; one static instance per kernel.
struct KernelPlan {
  const char* kernel;
  const char* source_id_hex;  // 64 hex digits
  const GroupDesc* groups;
  uint32_t n_groups, capacity;
  uint64_t capture_skip, capture_count;  // launches [skip, skip+count) are written; count 0 = all
  uint64_t launches;                     // launches seen so far in this process
  unsigned char* scratch;                // device buffer for launches that are not written
  uint64_t scratch_bytes;
  unsigned char* bound;      // pointer last bound to atrex_tl_buffer: rebinding costs a copy per launch
  uint32_t scratch_dims[6];  // geometry the scratch header was written for
  uint32_t staging_warps = 0;  // spec [capture] staging: warps per CTA its shared rings were sized for
  bool staging_refused = false;  // a launch was refused for too many warps (reported once)
  bool too_big_refused = false;  // a launch was refused for a buffer over 4 GiB (reported once)
};

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

inline bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "atrex: capture failed at %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Write to a temporary name, fsync, rename: a file that exists under its final name is whole.
inline bool write_atomic(const std::string& path, const void* data, size_t n) {
  const std::string tmp = path + ".part";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  bool good = std::fwrite(data, 1, n, f) == n && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  good = (std::fclose(f) == 0) && good;
  if (good) good = std::rename(tmp.c_str(), path.c_str()) == 0;
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

inline std::string json_escape(const char* s) {
  std::string o;
  for (; s && *s; ++s) {
    if (*s == '"' || *s == '\\') o += '\\';
    if (static_cast<unsigned char>(*s) < 0x20) continue;
    o += *s;
  }
  return o;
}

// Brackets one launch: construct before the launch, finish() after it.
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
    if (bind != plan_.bound || write_) {
      plan_.bound = bind;
      ok(cudaMemcpyToSymbolAsync(atrex_tl_buffer, &plan_.bound, sizeof bind, 0, cudaMemcpyHostToDevice, stream_),
         "bind buffer");
    }
  }

  // Is a buffer bound for this launch (probes on)? The rewriter's launch picks the kernel's
  // instrumented copy when it is, the clean kernel when it is not.
  bool on() const { return plan_.bound != nullptr; }

  // After the launch: synchronize, read back and write one raw file plus its JSON sidecar; in
  // deferred mode, only remember the buffer (flush_deferred writes it at exit).
  void finish() {
    if (!write_) return;
    write_ = false;
    if (!ok(cudaGetLastError(), "kernel launch")) return;
    Pending p{buf_, header_, seq_, grid_, block_, stream_, plan_.kernel, plan_.source_id_hex};
    if (defer_writes()) {
      deferred().push_back(p);
      return;
    }
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

  static std::vector<Pending>& deferred() {
    static std::vector<Pending> v;
    return v;
  }

  // Writes every deferred launch; registered with atexit, callable earlier by the program.
  static void flush_deferred() {
    for (const Pending& p : deferred()) write(p);
    deferred().clear();
  }

  static void write(const Pending& p) {
    const std::string base = std::string(std::getenv("ATREX_TIMELINE_OUT")) + "/" + p.kernel + "-launch" +
                             std::to_string(p.seq);
    const size_t n = static_cast<size_t>(p.header.total_bytes);
    void* host = std::malloc(n);
    bool good = host && ok(cudaStreamSynchronize(p.stream), "synchronize") &&
                ok(cudaMemcpy(host, p.buf, n, cudaMemcpyDeviceToHost), "read back");
    if (good) good = write_atomic(base + ".atrex", host, n);
    const std::string side = good ? sidecar(p, base, crc32(static_cast<const unsigned char*>(host), n)) : std::string();
    if (good) good = write_atomic(base + ".json", side.c_str(), side.size());
    if (!good) std::fprintf(stderr, "atrex: launch %llu of %s was not captured\n",
                            static_cast<unsigned long long>(p.seq), p.kernel);
    std::free(host);
  }

 private:
  // Deferred mode: the written launches' buffers are allocated at the first launch (for its
  // geometry), so no allocation happens inside a timed loop; their writes wait for exit.
  void preallocate() {
    // deferred() first: a function-local static is destroyed in the reverse order of construction
    // and atexit registration, so it must exist before flush_deferred is registered to outlive it.
    deferred();
    std::atexit(flush_deferred);
    if (plan_.capture_count == 0 || plan_.capture_count > 64) return;
    for (uint64_t i = 0; i < plan_.capture_count; ++i) {
      unsigned char* b = nullptr;
      if (ok(cudaMalloc(&b, header_.total_bytes), "preallocate")) preallocated().push_back(b);
    }
  }

  unsigned char* alloc_fresh() {
    const size_t n = static_cast<size_t>(header_.total_bytes);
    std::vector<unsigned char*>& pool = preallocated();
    if (!pool.empty()) {
      buf_ = pool.back();
      pool.pop_back();
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

  static std::vector<unsigned char*>& preallocated() {
    static std::vector<unsigned char*> v;
    return v;
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

  // One identity per process, in every sidecar it writes: validation keeps one run per capture folder.
  static const char* run_id() {
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

  static std::string sidecar(const Pending& p, const std::string& base, uint32_t crc) {
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
    const std::string file = base.substr(base.find_last_of('/') + 1) + ".atrex";
    char buf[2048];
    std::snprintf(buf, sizeof buf,
                  "{\"format\": \"atrex-timeline-capture\", \"version\": %u, \"file\": \"%s\", \"kernel\": \"%s\", "
                  "\"launch_seq\": %llu, \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"source_id\": \"%s\", "
                  "\"workload\": \"%s\", \"device\": {\"name\": \"%s\", \"uuid\": \"%s\", \"sm_count\": %d, "
                  "\"cc\": \"%d.%d\"}, \"driver_version\": %d, \"runtime_version\": %d, \"time_utc\": \"%s\", "
                  "\"run_id\": \"%s\", \"bytes\": %llu, \"crc32\": %u}\n",
                  kFormatVersion, file.c_str(), p.kernel, static_cast<unsigned long long>(p.seq), p.grid.x, p.grid.y,
                  p.grid.z, p.block.x, p.block.y, p.block.z, p.source_id_hex, json_escape(workload).c_str(),
                  json_escape(prop.name).c_str(), uuid, prop.multiProcessorCount, prop.major, prop.minor, drv, rt, when,
                  run_id(), static_cast<unsigned long long>(p.header.total_bytes), crc);
    return buf;
  }

  KernelPlan& plan_;
  dim3 grid_, block_;
  cudaStream_t stream_;
  unsigned char* buf_;
  bool write_;
  uint64_t seq_;
  LaunchHeader header_;
};

}  // namespace host
}  // namespace atrex
#endif  // __CUDACC_RTC__
