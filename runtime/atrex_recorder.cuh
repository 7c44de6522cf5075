// atrex_recorder.cuh — atrex-inject's device recorder: the buffer format and the code that writes it.
//
// For CUDA engineers reading instrumented code: the rewriter copies the target kernel K to K__atrex,
// puts the probes in the copy, and launches the copy only while recording (docs/design.md).
// In the copy, one atrex::Recorder per owner group is constructed at entry; each probe is one
// Recorder::rec(site) call, and each exit path calls atrex::finish(r0, r1, ...). Nothing here allocates, blocks, or
// uses atomics on the hot path; the host side (atrex_capture.cuh) owns the buffer.
//
// The buffer of one launch (format v2; docs/format.md; decoded by atrex_inject/decode.py, with its
// numpy mirror in atrex_inject/layout.py checked against these structs by tests/compile/test_layout_offsets.py):
//
//   offset 0                512                   512 + 48 * n_owners
//   +-----------------------+---------------------+--------------------------------------------------+
//   | LaunchHeader (512 B)  | OwnerHeader x       | events: owner 0's `capacity` slots, owner 1's, ... |
//   | magic, version, ids,  | n_owners (48 B      | each slot 8 bytes {t = %globaltimer_lo, tag}     |
//   | geometry, groups[8]   | each: claims, start,| (16 with ATREX_TL_WIDE: {t, clock, payload, tag});|
//   | (host-written)        | end, attempted ...) | tag = site id | kTagValid; zero = never written    |
//   |                       |                     | (4 with ATREX_TL_PACKED: t | (site id + 1); 8 with |
//   |                       |                     | ATREX_TL_CLOCK alone: {clock, t | (site id + 1)}) |
//   +-----------------------+---------------------+--------------------------------------------------+
//
// Owners are numbered group by group (GroupDesc.owner_base): within a group, selected CTAs in
// order, then the owner's rank in its CTA (warp rank for warp-level roles, warp rank * 32 + lane
// for thread-level roles). An owner that records more than `capacity` events keeps the first
// `capacity` and reports the attempt count (overflow).
//
// The hot path (Recorder::rec) is a %globaltimer_lo read, one compare, the address (the buffer's
// base is a constant-bank operand) and one predicated 8- or 16-byte store: no atomics, no branch,
// no local memory. Threads that are not the group's writer (or whose CTA/warp the density
// excludes) get an empty slot range, so the same predicate that guards overflow also masks them.
// With staged or resident rings (docs/guide.md), atrex::BasicRecorder<K, W, G> stages events in a
// per-warp shared-memory ring instead and copies it out coalesced (see BasicRecorder).
#pragma once
#ifdef __CUDACC_RTC__  // NVRTC (CUDA source in a Python string, docs/kernelpy.md): no host headers
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
#define ATREX_TL_WIDE 0  // 1: 16-byte events {t, clock, payload, tag}; 0: 8-byte {t, tag} ({clock, t | site} with the clock)
#endif
#ifndef ATREX_TL_PACKED
#define ATREX_TL_PACKED 0  // 1: 4-byte events in the buffer, %globaltimer_lo | (site id + 1) (spec [capture] packed)
#endif
#if ATREX_TL_PACKED && (ATREX_TL_WIDE || ATREX_TL_CLOCK)
#error "atrex: packed events carry no clock and no payload"
#endif
// The clock in 8 bytes: {%clock, %globaltimer_lo | (site id + 1)}, the site in the timer's low bits as
// packed events keep it, so that recording the clock stores no more than an event without it (16-byte
// events took layernorm's resident copy from 32 to 44 registers and a fifth fewer CTAs per SM).
#define ATREX_TL_CLOCK8 (ATREX_TL_CLOCK && !ATREX_TL_WIDE)

namespace atrex {

constexpr uint32_t kMaxGroups = 8;
constexpr uint32_t kTagValid = 0x80000000u;  // set in every written event: zero slots are "never written"
// An event in the buffer, and a ring's slot in shared memory: the same width, so that a packed
// probe stores one word to its ring as to the buffer (a barrier loop's staged event cost half as much
// with a 4-byte store as with an 8-byte one: docs/design.md) and a ring copies its slots out as they are.
constexpr uint32_t kEventBytes = ATREX_TL_WIDE ? 16u : ATREX_TL_PACKED ? 4u : 8u;
constexpr uint32_t kSlotBytes = kEventBytes;
// A resident ring's start slots: the owner's start {t0_lo, t0_hi, clk0}, one 16-byte slot, two 8-byte ones
// where the clock is recorded in 8-byte events (the clk0 word at the same offset either way), or two
// 4-byte ones with packed events (no clock).
constexpr uint32_t kStartSlots = ATREX_TL_CLOCK8 || ATREX_TL_PACKED ? 2u : 1u;
// Packed: the site id + 1 in the timer's low 5 bits, which carry no time at a 32 ns tick (the H200's):
// at most 31 sites, and never a zero word (zero = never written). Decode refuses a launch whose owner
// stamps show a finer tick (check timer_resolution).
constexpr uint32_t kPackedSiteBits = 5;
__host__ __device__ constexpr uint32_t packed(uint32_t t, uint32_t site) { return t | (site + 1u); }
#ifndef __CUDACC_RTC__  // launch-header fields only the host writes (unused, so warned about, under NVRTC)
constexpr uint64_t kMagic = 0x31304C5458525441ull;  // "ATRXTL01" little-endian
constexpr uint32_t kFormatVersion = 2;  // 2: owner headers carry the owner's end time (48 bytes)
constexpr uint32_t kFlags = (ATREX_TL_CLOCK ? 1u : 0u) | (ATREX_TL_WIDE ? 2u : 0u) | (ATREX_TL_PACKED ? 4u : 0u);
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
  uint32_t capacity, n_groups, n_owners, flags;  // flags bit0: clock recorded, bit1: 16-byte events, bit2: 4-byte (packed)
  uint64_t owners_offset, events_offset, total_bytes;
  uint32_t owner_bytes, event_bytes;
  GroupDesc groups[kMaxGroups];
  uint8_t tail[512 - 128 - kMaxGroups * sizeof(GroupDesc)];  // groups start at byte 128
};
static_assert(sizeof(LaunchHeader) == 512, "launch header is 512 bytes");

// 48 bytes per owner, written by the owner's writer thread.
struct OwnerHeader {
  uint32_t claims;     // atomically incremented at construction: 1 for a valid capture
  uint32_t attempted;  // events attempted (may exceed capacity: overflow), written at kernel exit
  uint32_t smid, cta, thread;
  uint32_t t0_lo, t0_hi;  // full %globaltimer at construction: decode unwraps event times against it
  uint32_t clk0;
  uint32_t t1_lo, t1_hi;  // full %globaltimer at exit (with attempted): no event of the owner is later
  uint32_t flags;         // kOwnerLowerBound, kOwnerMoved
  uint32_t pad;           // zero; keeps the events that follow the owner table 16-byte aligned
};
static_assert(sizeof(OwnerHeader) == 48, "owner header is 48 bytes");
constexpr uint32_t kOwnerLowerBound = 1u;  // `attempted` is a lower bound (a resident ring counts to capacity + 1)
constexpr uint32_t kOwnerMoved = 2u;       // a resident owner's warp changed SM warp slot: its events are unknown

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

// The launch's buffer, bound by the host before each launch; null = probes off (the launch then
// runs the clean kernel, not the copy). In constant memory: the recorders read it where they write
// (a constant-cache hit costs a few cycles where a global load costs hundreds), and the copy's
// guard does not read it, so a CTA that does not record never waits for its cold first load.
// extern "C" keeps the symbol name plain for cuModuleGetGlobal (Python capture). Under separate
// compilation (-rdc) each translation unit gets its own (internal) symbol, bound by the capture
// sessions of that unit, so two instrumented units link. One symbol per unit means one recording
// launch of its kernels at a time: concurrent launches on different streams share it.
//
// The launch header's copy, bound with it (its launch_seq zero, so the host copies it only when the
// geometry changes): a recording owner's entry and exit read their group, capacity and offsets
// from the constant cache, which every CTA of an SM shares, instead of loading the buffer's header
// from global memory (hundreds of cycles at entry and again at exit, on the critical path of a
// kernel whose recording CTAs live its whole length: docs/design.md).
#ifdef __CUDACC_RDC__
static __constant__ unsigned char* atrex_tl_buffer = nullptr;
static __constant__ atrex::LaunchHeader atrex_tl_header;
#else
extern "C" {
__constant__ unsigned char* atrex_tl_buffer = nullptr;
__constant__ atrex::LaunchHeader atrex_tl_header;
}
#endif

namespace atrex {

// The linear index of this CTA in the grid and of this thread in its CTA (as the header counts them).
__device__ __forceinline__ uint32_t linear_cta() { return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); }
__device__ __forceinline__ uint32_t linear_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

// Does an owner group with this CTA density (spec `ctas`) select this CTA? The rewriter passes the
// density as literals, so the test is a few integer instructions and no memory access.
__device__ __forceinline__ bool cta_selected(uint32_t stride, uint32_t limit) {
  const uint32_t cta = linear_cta();
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

// The warp's slot on its SM and the lane, read afresh at each use (`asm volatile`): ptxas keeps
// a %tid or %laneid read from kernel entry live to its last use, and one live register across a
// clean loop is enough to change the registers ptxas gives the whole copy (docs/design.md).
__device__ __forceinline__ uint32_t warp_slot() {
  uint32_t w;
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(w));
  return w;
}
__device__ __forceinline__ uint32_t lane_now() {
  uint32_t l;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}

// An event's time: the timer and, with ATREX_TL_CLOCK, the SM clock, read by one asm statement, so
// that nothing the compiler schedules (a ring's head load and the compare waiting on it) falls
// between the two reads. Read apart, a warp descheduled between them on a loaded SM put hundreds of
// ns between an event's two clocks (validate's clock_consistency rejected it). The clock is read
// first: ptxas makes a %clock read wait for the stores before it (their registers' reads), so read
// second it waited after the timer, up to 3000 cycles behind it at the row softmax's last event;
// read first, the wait comes before both reads.
struct Now {
  uint32_t t, c;
};
__device__ __forceinline__ Now now() {
#if ATREX_TL_CLOCK
  Now n;
  asm volatile("mov.u32 %1, %%clock;\n\tmov.u32 %0, %%globaltimer_lo;" : "=r"(n.t), "=r"(n.c));
  return n;
#else
  return {globaltimer_lo(), 0u};
#endif
}
// The full timer and the clock (0 without ATREX_TL_CLOCK) of an owner's start stamp, read as now(), the clock first.
__device__ __forceinline__ uint64_t start_now(uint32_t& c) {
  uint64_t t;
#if ATREX_TL_CLOCK
  asm volatile("mov.u32 %1, %%clock;\n\tmov.u64 %0, %%globaltimer;" : "=l"(t), "=r"(c));
#else
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  c = 0u;
#endif
  return t;
}

// What a thread learns at construction: where its owner's events go and how many fit.
struct Slot {
  uint32_t off, end;  // the owner's slot range, byte offsets into the buffer; empty: writes nothing
  bool active;        // its CTA and warp are selected (every lane of a recording warp)
};

// The owner header's first half: the claim (counted atomically: a second claim is visible to
// decode), who made it and when it started. Owner headers are 16-byte aligned (512 + 48 * owner), so
// {smid, cta} is one 8-byte store and {thread, t0, clk0} one 16-byte store.
__device__ __forceinline__ void stamp_start(OwnerHeader* oh, uint32_t cta, uint32_t tid, uint32_t t0_lo,
                                            uint32_t t0_hi, uint32_t clk0) {
  uint32_t sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  atomicAdd(&oh->claims, 1u);
  *reinterpret_cast<uint2*>(&oh->smid) = make_uint2(sm, cta);
  *reinterpret_cast<uint4*>(&oh->thread) = make_uint4(tid, t0_lo, t0_hi, clk0);
}

// Its second half, at the owner's exit: the attempt count and the end time, read now (after every
// event of the owner: validation refuses a later event, one appended from another launch);
// {t1, flags, pad} is one 16-byte store.
__device__ __forceinline__ void stamp_end(OwnerHeader* oh, uint32_t attempted, bool lower_bound, bool moved = false) {
  uint64_t t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  oh->attempted = attempted;
  *reinterpret_cast<uint4*>(&oh->t1_lo) = make_uint4(static_cast<uint32_t>(t1), static_cast<uint32_t>(t1 >> 32),
                                                     (lower_bound ? kOwnerLowerBound : 0u) | (moved ? kOwnerMoved : 0u), 0u);
}

// Resolves the calling thread's owner in group `group` and, if it is the owner's writer, claims the
// owner (counted atomically: a second claim is visible to decode) and stamps its header. Not
// inlined, so its header reads, divisions and address arithmetic stay out of the kernel's own
// schedule (instrumented reduce_sumsq: 40 registers instead of 42).
static __device__ __noinline__ Slot claim(uint32_t group, bool pred, bool staged, bool too_many_warps) {
  Slot o{0u, 0u, false};
  unsigned char* buf = atrex_tl_buffer;
  const LaunchHeader* h = &atrex_tl_header;
  const GroupDesc d = h->groups[group];
  if (staged && (too_many_warps || thread_level(d.role))) return o;  // the host refuses these launches
  const uint32_t tid = linear_thread();
  const uint32_t warp = tid >> 5, lane = tid & 31u;
  const uint32_t cta = linear_cta();
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
  uint32_t c0;
  const uint64_t t0 = start_now(c0);
  stamp_start(oh, cta, tid, static_cast<uint32_t>(t0), static_cast<uint32_t>(t0 >> 32), c0);
  return o;
}

// Publishes an owner's attempt count and end time at kernel exit, from its slot range [first, end)
// and next slot `off`; one-off work, kept out of line like claim(). The slot range it needs stays live through
// the kernel: on layernorm that alone takes the instrumented kernel from 32 to 46 registers
// (docs/design.md).
static __device__ __noinline__ void publish(uint32_t off, uint32_t end) {
  const LaunchHeader* h = &atrex_tl_header;
  const uint32_t per_owner = h->capacity * kEventBytes;
  const uint32_t first = end - per_owner;
  const uint32_t owner = (first - static_cast<uint32_t>(h->events_offset)) / per_owner;
  stamp_end(reinterpret_cast<OwnerHeader*>(atrex_tl_buffer + h->owners_offset) + owner, (off - first) / kEventBytes,
            false);
}

// An inline-asm block whose `@p` instructions run on the lanes where operand `on` (an operand index)
// is nonzero: a predicate, not a branch (resident probes and entry: no BSSY/BSYNC, docs/design.md).
#define ATREX_ON(on, body) "{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %" #on ", 0;\n\t" body "\n\t}"

// The rings' static shared arrays are aligned to and sized in multiples of kSharedAlign bytes, so
// that what the kernel keeps after them (its dynamic shared memory above all) moves by whole
// 128-byte lines: shifted by 1232 bytes instead, the dynamic buffer of flashinfer's
// MergeStatesLargeNumIndexSetsKernel straddled one more line per 256-byte row in every CTA, and the
// recording ran +24.6% on an H200; in whole lines, +4.1% (bench/realkernels).
constexpr uint32_t kSharedAlign = 128u;
__host__ __device__ constexpr uint32_t shared_size(uint32_t bytes) {
  return (bytes + kSharedAlign - 1u) / kSharedAlign * kSharedAlign;
}

// Shared-memory staging rings of one owner group: W + 1 rings of K slots, one per warp of the CTA
// plus a sink for warps past W (they record nothing). One static array per group.
template <uint32_t K, uint32_t W, uint32_t G>
struct StageRing {
  // Shared address of this warp's ring.
  __device__ __forceinline__ static uint32_t of_warp(uint32_t warp) {
    __shared__ __align__(kSharedAlign) unsigned char ring[shared_size((W + 1u) * K * kSlotBytes)];
    return static_cast<uint32_t>(__cvta_generic_to_shared(ring)) + (warp < W ? warp : W) * K * kSlotBytes;
  }
  __device__ __forceinline__ static bool too_many(uint32_t warp) { return warp >= W; }
};
template <uint32_t W, uint32_t G>
struct StageRing<0u, W, G> {  // no staging
  __device__ __forceinline__ static uint32_t of_warp(uint32_t) { return 0u; }
  __device__ __forceinline__ static bool too_many(uint32_t) { return false; }
};

// Resident rings of one owner group ([capture] recorder = "resident"): R rings, one per warp
// that can own the group's recorder (its rank among them), each of K slots (the capacity), an
// overflow slot and kStartSlots start slots (the owner's start time, kept here from entry to exit), plus one
// sink slot for warps that own no ring.
// Where each warp is in its ring lives in shared memory too, not in registers: a table with one
// entry per SM warp slot (%warpid), {next slot, overflow slot} as byte offsets from base(). A
// register kept from entry to exit is live across every loop of the kernel, and ptxas then
// schedules the copy's clean side for more registers than the clean kernel has (layernorm: 32 to
// 46). %warpid can change when a preempted CTA is restored; the exit checks the entry still names
// the warp's own ring, and a probe clamps the slot it stores to into the rings, whatever the entry.
constexpr uint32_t kWarpSlots = 64;  // %warpid < %nwarpid <= 64 (sm_90)
template <uint32_t K, uint32_t R, uint32_t G>
struct ResidentRing {
  __device__ __forceinline__ static uint32_t base() {
    __shared__ __align__(kSharedAlign) unsigned char ring[shared_size((R * (K + 1u + kStartSlots) + 1u) * kSlotBytes)];
    return static_cast<uint32_t>(__cvta_generic_to_shared(ring));
  }
  static constexpr uint32_t kRingBytes = (K + 1u + kStartSlots) * kSlotBytes;
  static constexpr uint32_t kSink = R * kRingBytes;  // the sink slot, as an offset from base()
  // This warp's table entry (shared address), by its slot on the SM.
  __device__ __forceinline__ static uint32_t entry() {
    __shared__ __align__(kSharedAlign) uint2 table[shared_size(kWarpSlots * 8u) / 8u];
    return static_cast<uint32_t>(__cvta_generic_to_shared(table)) + (warp_slot() & (kWarpSlots - 1u)) * 8u;
  }
  // The entry at `e`: {next slot, overflow slot}; and its next slot written back.
  __device__ __forceinline__ static void load(uint32_t e, uint32_t& next, uint32_t& last) {
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(next), "=r"(last) : "r"(e) : "memory");
  }
  __device__ __forceinline__ static void store(uint32_t e, uint32_t next, uint32_t on = 1u) {
    asm volatile(ATREX_ON(2, "@p st.shared.u32 [%0], %1;") ::"r"(e), "r"(next), "r"(on) : "memory");
  }
};

// One event's words as a ring slot holds them (kSlotBytes / 4 of them, at `w`); `valid`: kTagValid, or
// the same value loaded where ptxas cannot see it is a constant (BasicRecorder::trips_begin).
constexpr uint32_t kSlotWords = kSlotBytes / 4u;
__device__ __forceinline__ void event_words(uint32_t* w, Now n, uint32_t payload, uint32_t site, uint32_t valid) {
#if ATREX_TL_WIDE
  w[0] = n.t;
  w[1] = n.c;
  w[2] = payload;
  w[3] = site | valid;
#elif ATREX_TL_CLOCK8
  w[0] = n.c;
  w[1] = packed(n.t, site);
  (void)payload;
  (void)valid;
#elif ATREX_TL_PACKED
  w[0] = packed(n.t, site);
  (void)payload;
  (void)valid;
#else
  w[0] = n.t;
  w[1] = site | valid;
  (void)payload;
#endif
}

// Stores N words (1, 2 or 4) at shared address `a` with one store, on the lanes where `on` is nonzero
// (a predicate, not a branch).
template <uint32_t N>
__device__ __forceinline__ void put_words(uint32_t a, const uint32_t* w, uint32_t on) {
  static_assert(N == 1u || N == 2u || N == 4u, "one shared store: 4, 8 or 16 bytes");
  if (N == 1u) {
    asm volatile(ATREX_ON(2, "@p st.shared.u32 [%0], %1;") ::"r"(a), "r"(w[0]), "r"(on));
  } else if (N == 2u) {
    asm volatile(ATREX_ON(3, "@p st.shared.v2.u32 [%0], {%1, %2};") ::"r"(a), "r"(w[0]), "r"(w[1]), "r"(on));
  } else {
    asm volatile(ATREX_ON(5, "@p st.shared.v4.u32 [%0], {%1, %2, %3, %4};")
                 ::"r"(a), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]), "r"(on));
  }
}

// Stores one event into a staging ring's slot (shared address `slot`), resident or staged; `on`:
// whether this lane stores (a predicate, not a branch); `valid` as event_words takes it.
__device__ __forceinline__ void put_shared(uint32_t slot, Now n, uint32_t payload, uint32_t site, uint32_t on = 1u,
                                           uint32_t valid = kTagValid) {
  uint32_t w[kSlotWords];
  event_words(w, n, payload, site, valid);
  put_words<kSlotWords>(slot, w, on);
}

// The events of one group of a trip's iterations (BasicRecorder::stage and put), N of them: their
// times, sites and payloads, in registers until the group's end (the rewriter unrolls the group,
// so every index is a constant; `k` counts the group's events staged so far).
template <uint32_t N>
struct Held {
  Now n[N];
  uint32_t site[N], payload[N], k = 0u;
};

// Copies one event from a staging ring (shared address `ring_slot`) to the buffer at byte offset `off`.
__device__ __forceinline__ void copy_out(uint32_t ring_slot, uint32_t off) {
#if ATREX_TL_PACKED
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(ring_slot) : "memory");
  *reinterpret_cast<uint32_t*>(atrex_tl_buffer + off) = v;
#elif ATREX_TL_WIDE
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(ring_slot) : "memory");
  *reinterpret_cast<uint4*>(atrex_tl_buffer + off) = v;
#else
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(ring_slot) : "memory");
  *reinterpret_cast<uint2*>(atrex_tl_buffer + off) = v;
#endif
}

// What one resident owner's exit needs, read for every owner group of the warp before anything is
// written (resident_close): its ring's first slot, event count and overflow slot (its tag, then the
// start time, read when the header is written), the owner's index and the byte offset of its first
// event in the buffer. `valid`: the warp owns a ring
// of the group and a buffer is bound; `moved`: the warp's table entry no longer names its ring (a
// preemption moved the warp to another SM warp slot), so its events may have gone to another warp's
// ring: it copies none and says so in its header (flags bit 1), which decode refuses.
struct ResidentExit {
  uint32_t first, n, last, owner, off;
  bool valid, moved;
};

// Reads one owner's exit: `a` its ring's next slot and `last` its overflow slot (shared addresses).
template <uint32_t K>
__device__ __forceinline__ ResidentExit resident_exit(uint32_t group, uint32_t local, uint32_t a, uint32_t last, bool moved,
                                                      bool valid) {
  ResidentExit e;
  const LaunchHeader* h = &atrex_tl_header;
  e.valid = valid;
  e.moved = moved;
  e.first = last - K * kSlotBytes;
  e.n = valid && !moved ? (a - e.first) / kSlotBytes : 0u;
  e.owner = h->groups[group].owner_base + local;
  e.off = static_cast<uint32_t>(h->events_offset) + e.owner * (K * kEventBytes);
  e.last = last;
  return e;
}

// Claims and publishes one owner (its owner lane): the whole header. A ring whose overflow slot was
// written overflowed; it knows no more than that one event was lost.
__device__ __forceinline__ void publish_owner(const ResidentExit& e, uint32_t cta, uint32_t tid) {
  if (!e.valid) return;
  uint32_t tag, t0_lo, t0_hi, clk0 = 0u;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(tag) : "r"(e.last + kSlotBytes - 4u));
#if ATREX_TL_PACKED  // 4-byte slots: the start's two words are 4-byte aligned only
  asm volatile("ld.shared.u32 %0, [%2];\n\tld.shared.u32 %1, [%2+4];" : "=r"(t0_lo), "=r"(t0_hi) : "r"(e.last + kSlotBytes));
#else
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(t0_lo), "=r"(t0_hi) : "r"(e.last + kSlotBytes));
#endif
#if ATREX_TL_CLOCK
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(clk0) : "r"(e.last + kSlotBytes + 8u));
#endif
  OwnerHeader* oh = reinterpret_cast<OwnerHeader*>(atrex_tl_buffer + sizeof(LaunchHeader)) + e.owner;
  stamp_start(oh, cta, tid, t0_lo, t0_hi, clk0);
  stamp_end(oh, e.n + (tag != 0u && !e.moved ? 1u : 0u), tag != 0u, e.moved);
}

// A warp's resident exit, every owner group's at once, in one out-of-line call (the recorders'
// types Rs). Exit is where a resident recorder's cost lies (docs/design.md): the recording
// CTAs are the grid's stragglers, so what the last warp runs at exit shows in the kernel's time
// (reduce_sumsq, H200: a close per group, +2.7 to +2.9%; one call for both, +2.4 to +2.6%). So it
// runs in phases over all the warp's groups: first every group's table entry, owner, header words
// and ring words are read (their latencies overlap, where one group's close after the other's
// chained them: about 0.4 us per group in a reduce_sumsq capture, from the exit probe to the end-time
// read), then `lanes` lanes of the warp (32, or the owner's lane alone when the warp is not
// converged here) copy the rings out, taking slots lane, lane + lanes, ..., then the owner's lane
// writes each header (on an H200: +2.45% and +2.48% against +2.68% and +2.62% group by group).
// Everything it needs is read here (the table, %tid, %ctaid), none of it kept from entry. A warp
// that reaches an exit in parts (lanes past a bounds check return early) leaves it to the part with
// the owner's lane, lane 0: the others return at once, so each owner is copied out and claimed
// once (every lane of a part claimed it, and the capture was refused: examples/specs/saxpy_tail.toml).
template <class... Rs>
static __device__ __noinline__ void resident_close(bool all) {
  if (!all && lane_id() != 0u) return;
  const uint32_t lane = all ? lane_id() : 0u, lanes = all ? 32u : 1u;
  if (all) __syncwarp();  // the owner lane's ring stores are visible to the lanes that copy them
  const ResidentExit exits[] = {Rs::owner_exit()...};
  for (const ResidentExit& e : exits)
    for (uint32_t k = lane; k < e.n; k += lanes) copy_out(e.first + k * kSlotBytes, e.off + k * kEventBytes);
  if (lane != 0u) return;
  const uint32_t cta = linear_cta(), tid = linear_thread();
  for (const ResidentExit& e : exits) publish_owner(e, cta, tid);
}

// K = 0: events go straight to global memory (predicated store per event).
// K > 0 (staged rings): every lane of a recording warp stores the same event into its
// warp's shared-memory ring of K slots, and when the ring is full the 32 lanes copy it to global
// memory together (coalesced), checking capacity once per slot there instead of per event (a
// trip's groups of iterations store their events from lane 0, once a group: stage and put). The
// lanes copy out what the warp stored, so this needs the whole warp at every site and at exit
// (warp-uniform control flow); it is offered for warp-level roles only.
// R (resident, K = the capacity, W = the group's rings, ROLE, STRIDE, LIMIT and MASK the group's
// role, CTA density and warp mask as literals): events stay in the warp's shared-memory ring
// until exit. The owner's lane stores each event to its next slot; the slot pointer saturates at
// the overflow slot (one min, no compare, no branch); the other lanes store to the sink. At entry
// the owner is found from the group's literals (no memory access: nothing delays the kernel's
// first loads) and its start time kept in the ring; at exit the owner is claimed, the warp copies
// the ring out and the owner is published (resident_close). No warp-uniform control flow is
// needed: only the owner's lane counts.
template <uint32_t K, uint32_t W, uint32_t G, bool R = false, uint32_t ROLE = kLane0, uint32_t STRIDE = 1u,
          uint32_t LIMIT = 0u, uint32_t MASK = 0xffffffffu>
class BasicRecorder {
  static_assert(R || K <= 32u, "a staging ring holds at most 32 events: one per lane when it is copied out");

 public:
  // Constructed once per group at kernel entry. `pred` is the explicit predicate (kPredicate).
  __device__ __forceinline__ explicit BasicRecorder(uint32_t group, bool pred = true) : off_(0u), end_(0u) {
    if (R) {
      resident_open();
      return;
    }
    const uint32_t warp = linear_thread() >> 5;
    if (K != 0u) {
      a_ = StageRing<K, W, G>::of_warp(warp);
      ring_end_ = a_ + K * kSlotBytes;
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
    if (K != 0u && !R) {  // staged: the held probe's store, and the drain when the ring is full
      rec_held(site, payload);
      if (a_ == ring_end_) drain(K);
      return;
    }
    const Now n = now();
    if (R) {  // the owner is its warp's lane 0; the slot saturates at the overflow slot (no compare)
      using Ring = ResidentRing<K, W, G>;
      const uint32_t e = Ring::entry(), owner = lane_now() == 0u;  // every lane loads the entry; lane 0 stores
      uint32_t a, last;
      Ring::load(e, a, last);
      put_shared(Ring::base() + min(a, Ring::kSink), n, payload, site, owner);
      Ring::store(e, min(a + kSlotBytes, last), owner);
      return;
    }
#if ATREX_TL_WIDE
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.lt.u32 p, %1, %2;\n\t"
        "@p st.global.v4.u32 [%0], {%3, %4, %5, %6};\n\t}"
        ::"l"(atrex_tl_buffer + off_), "r"(off_), "r"(end_), "r"(n.t), "r"(n.c), "r"(payload),
        "r"(site | kTagValid));
#elif ATREX_TL_PACKED
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.lt.u32 p, %1, %2;\n\t"
        "@p st.global.u32 [%0], %3;\n\t}"
        ::"l"(atrex_tl_buffer + off_), "r"(off_), "r"(end_), "r"(packed(n.t, site)));
    (void)payload;
#elif ATREX_TL_CLOCK8
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.lt.u32 p, %1, %2;\n\t"
        "@p st.global.v2.u32 [%0], {%3, %4};\n\t}"
        ::"l"(atrex_tl_buffer + off_), "r"(off_), "r"(end_), "r"(n.c), "r"(packed(n.t, site)));
    (void)payload;
#else
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.lt.u32 p, %1, %2;\n\t"
        "@p st.global.v2.u32 [%0], {%3, %4};\n\t}"
        ::"l"(atrex_tl_buffer + off_), "r"(off_), "r"(end_), "r"(n.t), "r"(site | kTagValid));
    (void)payload;
#endif
    off_ += kEventBytes;
  }

  // Resident, in each trip of a strip-mined loop (a group of `every` iterations): the rewriter
  // holds the warp's table entry in registers at the trip's start, its probes store with rec_held,
  // and it releases the next slot back to the table (release, below). Within the trip every lane
  // stores the same event to the same slot (no lane test, no branch); across trips nothing stays
  // in registers, so the loop keeps the clean kernel's register budget (reduce_sumsq, layernorm:
  // 32). The offsets stay relative to base() in registers: holding absolute shared addresses
  // instead took the copy to 36 and 44 registers (sm_90a, nvcc 13.0).
  // Staged, in each trip of a loop recorded in trips (the rewriter's staged trips): the trip
  // starts with the ring flushed (trips_begin, flush, below), and it holds no more events than the ring has
  // slots (the rewriter sizes it), so a held probe is a timer read, every lane's store of the same
  // event to the same slot and a pointer bump: no compare, no branch, no drain inside the trip.
  __device__ __forceinline__ void hold() { ResidentRing<K, W, G>::load(ResidentRing<K, W, G>::entry(), a_, ring_end_); }
  __device__ __forceinline__ void rec_held(uint32_t site, uint32_t payload = 0u) {
    if (!R) {
#if ATREX_TL_WIDE
      payload = __shfl_sync(0xffffffffu, payload, 0);  // lane 0's value, as on the global path
#endif
      put_shared(a_, now(), payload, site, 1u, valid_);
      a_ += kSlotBytes;
      return;
    }
    using Ring = ResidentRing<K, W, G>;
    put_shared(Ring::base() + min(a_, Ring::kSink), now(), payload, site);
    a_ = min(a_ + kSlotBytes, ring_end_);
  }
  // Staged, a trip's loop in groups of iterations (the rewriter's, where the loop brings no #pragma):
  // each held probe keeps its event in the group's registers (stage), and after the group's last
  // iteration lane 0 alone stores them to the ring with one store of up to 16 bytes (put). A shared
  // store costs its bytes times its active lanes in shared-memory bandwidth, whatever the addresses,
  // and a loop over shared memory is bound by it: in a scratch copy of bench/probe_cost's barrier
  // loop (a store, a barrier and eight loads an iteration) on an H200, every lane's 4-byte store an
  // event cost +12.3%, every lane's 16-byte store a group of four +11.0%, lane 0's +7.9%. The site
  // bits are put in at the group's end too, so nothing waits for the timer read where it is taken.
  // The ring's copy-out (flush) waits for lane 0's stores first.
  template <uint32_t N>
  __device__ __forceinline__ void stage(Held<N>& h, uint32_t site, uint32_t payload = 0u) {
    static_assert(!R && K != 0u, "groups are the staged rings' trips'");
    h.n[h.k] = now();
    h.site[h.k] = site;
    h.payload[h.k] = payload;
    ++h.k;
  }
  template <uint32_t N>
  __device__ __forceinline__ void put(const Held<N>& h) {
    uint32_t w[N * kSlotWords];
#pragma unroll
    for (uint32_t k = 0u; k < N; ++k) event_words(w + k * kSlotWords, h.n[k], h.payload[k], h.site[k], valid_);
    put_words<N * kSlotWords>(a_, w, lane_id() == 0u);
    a_ += N * kSlotBytes;
  }
  // Staged, before a loop recorded in trips: the ring copied out (flush), and the tag's valid bit read
  // back from shared memory into a register, where ptxas cannot see that it is a constant: as an
  // immediate, ptxas moved it into the event's register pair again at every event (one more
  // instruction an event in bench/probe_cost's FMA and copy loops). It goes in the ring's next
  // slot, which the trip's first event overwrites and no flush counts.
  __device__ __forceinline__ void trips_begin() {
    static_assert(!R && K != 0u, "trips are the staged rings'");
    flush();
#if !ATREX_TL_CLOCK8 && !ATREX_TL_PACKED  // these carry no valid bit: the site id in the timer's low bits marks them written
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(a_), "r"(kTagValid) : "memory");
    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(valid_) : "r"(a_) : "memory");
#endif
  }

  // Staged, a trip's loop: the ring slot its `n` events end at, and whether the trip has not reached
  // it. The trip's iterations are counted by the ring pointer its held probes bump anyway, so the
  // loop keeps no counter of its own (one instruction an event less in bench/probe_cost's FMA loops).
  __device__ __forceinline__ uint32_t trip_end(uint32_t n) const { return a_ + n * kSlotBytes; }
  __device__ __forceinline__ bool in_trip(uint32_t end) const { return a_ != end; }

  // Staged: copies the ring's events out now, the whole warp together, and empties it. `n`: how many
  // it holds, where the caller knows (a trip's events): counted from the ring's pointer after a
  // trip's loop instead, the count became two more induction variables in that loop, two more
  // instructions an event (bench/probe_cost's FMA loop on an H200: +7.98% against +5.50%).
  __device__ __forceinline__ void flush(uint32_t n = ~0u) {
    static_assert(!R, "flush is the staged rings' (resident rings are copied out at exit)");
    __syncwarp(__activemask());  // a group's events were stored by lane 0 (put): visible to the lanes that copy them
    drain(n != ~0u ? n : (a_ - (ring_end_ - K * kSlotBytes)) / kSlotBytes);
  }
  // release(ahead): written back `ahead` slots on, so that a trip whose probes are its loop-begin
  // and loop-end ones writes its entry back right after the begin probes, while its loads are in
  // flight, and runs nothing but its probes at its end: what runs there delays the next trip's
  // loads, and a recording warp of a grid-stride loop is its grid's straggler (reduce_sumsq on an
  // H200: +3.63% against +4.02% written back at the trip's end; layernorm unchanged). Written
  // back at the trip's start instead (with the hold), layernorm's copy took 44 registers.
  __device__ __forceinline__ void release(uint32_t ahead = 0u) {
    const uint32_t a = ahead == 0u ? a_ : min(a_ + ahead * kSlotBytes, ring_end_);
    ResidentRing<K, W, G>::store(ResidentRing<K, W, G>::entry(), a);
  }
  // Held across a whole loop instead (a loop whose sites record every iteration): an iteration's
  // probe then costs what a trip's does, with no table access in the loop (bench/probe_cost's copy
  // loop). Lanes that left the loop earlier took fewer slots, and every lane stores the entry, so
  // the warp writes back the furthest slot any of its lanes reached.
  __device__ __forceinline__ void release_loop() {
    const uint32_t a = __reduce_max_sync(__activemask(), a_);
    ResidentRing<K, W, G>::store(ResidentRing<K, W, G>::entry(), a);
  }

  // Density-limited sites: warps that do not record skip the whole probe through one
  // warp-uniform branch instead of paying for a masked-off store.
  __device__ __forceinline__ void rec_active(uint32_t site, uint32_t payload = 0u) {
    if (R || active_) rec(site, payload);  // resident: a warp that owns no ring stores to the sink
  }

  // Sampled sites (every Nth hit, counted per thread in `hits`): the hit counter is touched only
  // in recording warps, so the rest pay one branch.
  __device__ __forceinline__ void rec_every(uint32_t& hits, uint32_t every, uint32_t site, uint32_t payload = 0u) {
    if (R || active_) {
      if (hits == 0u) rec(site, payload);
      hits = hits + 1u == every ? 0u : hits + 1u;
    }
  }

  // Called on every exit path: publishes the attempt count (attempted > capacity = overflow),
  // after copying a staged ring's remaining events out. The owner's index and first slot are
  // recomputed from the slot range and the header here, once, rather than kept in registers for
  // the whole kernel: registers decide occupancy and how many loads the compiler keeps in flight.
  // Resident recorders finish together instead (atrex::finish below).
  __device__ __forceinline__ void finish() {
    static_assert(!R, "resident recorders finish together: atrex::finish(r0, r1, ...)");
    if (K != 0u) flush();
    if (end_ == 0u) return;
    if (K != 0u) {
      __syncwarp(__activemask());  // every lane's events were timed before lane 0 reads the end time
      if (lane_id() != 0u) return;  // staged: every lane drains, lane 0 publishes
    }
    publish(off_, end_);
  }

  static constexpr bool kResident = R;
  static constexpr uint32_t kCapacity = K;

  // Resident: this group's share of the warp's exit (in resident_close, out of line). Whether the
  // warp owns a ring, and which, is found again from %tid and %ctaid; where its owner lane got to,
  // from the table (every lane reads the same entry).
  __device__ __forceinline__ static ResidentExit owner_exit() {
    using Ring = ResidentRing<K, W, G>;
    uint32_t a, last;
    Ring::load(Ring::entry(), a, last);
    const uint32_t tid = linear_thread(), rank = warp_rank();
    const bool valid = atrex_tl_buffer != nullptr && cta_selected(STRIDE, LIMIT) &&
                       ((resident_warps() >> (tid >> 5)) & 1u) != 0u && rank + 1u <= W;
    const uint32_t own = (valid ? rank : 0u) * Ring::kRingBytes + K * kSlotBytes;  // this ring's overflow slot
    return resident_exit<K>(G, local_owner(), Ring::base() + min(a, own), Ring::base() + own, last != own, valid);
  }

 private:
  // The eligible warps of this CTA for a resident group (role and warp mask), and this warp's rank
  // among them: its ring, and its owner's index within the CTA.
  __device__ __forceinline__ static uint32_t resident_warps() {
    return MASK & role_warp_mask(ROLE, (blockDim.x * blockDim.y * blockDim.z + 31u) / 32u);
  }
  __device__ __forceinline__ static uint32_t warp_rank() {
    const uint32_t warp = linear_thread() >> 5;
    return popc32(resident_warps() & ((1u << warp) - 1u));
  }

  // Resident entry: the owner is found from the group's literals (a few integer instructions, no
  // memory access, not even the buffer pointer's: nothing delays the kernel's first loads; with no
  // buffer bound the rings fill all the same and the exit writes nothing), its start time kept in
  // the ring, and every warp's lane 0 writes the warp's table entry: its ring, or the sink. Straight
  // code, the stores predicated on the lane: a branch per group here, and around each table probe,
  // held back reduce_sumsq's recording CTAs (on an H200: +3.5% with them, +2.4% without).
  __device__ __forceinline__ void resident_open() {
    using Ring = ResidentRing<K, W, G>;
    const uint32_t tid = linear_thread();
    const bool lane0 = (tid & 31u) == 0u;
    // warps past the rings (the host refuses such launches) record nothing (`rank + 1 > W`: nvcc
    // warns that `rank >= W` is pointless where the other recorders instantiate this, W = 0)
    const bool owns = cta_selected(STRIDE, LIMIT) && ((resident_warps() >> (tid >> 5)) & 1u) != 0u &&
                      warp_rank() + 1u <= W;
    const uint32_t a = owns ? warp_rank() * Ring::kRingBytes : Ring::kSink;
    const uint32_t last = owns ? a + K * kSlotBytes : Ring::kSink;  // the overflow slot; its tag stays 0 unless an event lands there
    const uint32_t over = Ring::base() + last;
    uint32_t c0;
    const uint64_t t0 = start_now(c0);
    const uint32_t w = lane0 && owns;
#if ATREX_TL_PACKED  // 4-byte slots: the start's two words are 4-byte aligned only
    asm volatile(ATREX_ON(0, "@p st.shared.u32 [%1], 0;\n\t@p st.shared.u32 [%2], %3;\n\t@p st.shared.u32 [%2+4], %4;")
                 ::"r"(w), "r"(over), "r"(over + kSlotBytes), "r"(static_cast<uint32_t>(t0)),
                 "r"(static_cast<uint32_t>(t0 >> 32)) : "memory");
#else
    asm volatile(ATREX_ON(0, "@p st.shared.u32 [%1], 0;\n\t@p st.shared.v2.u32 [%2], {%3, %4};") ::"r"(w),
                 "r"(over + kSlotBytes - 4u), "r"(over + kSlotBytes), "r"(static_cast<uint32_t>(t0)),
                 "r"(static_cast<uint32_t>(t0 >> 32)) : "memory");
#endif
#if ATREX_TL_CLOCK  // the start slots also keep the clock
    asm volatile(ATREX_ON(0, "@p st.shared.u32 [%1], %2;") ::"r"(w), "r"(over + kSlotBytes + 8u), "r"(c0)
                 : "memory");
#endif
    asm volatile(ATREX_ON(0, "@p st.shared.v2.u32 [%1], {%2, %3};") ::"r"(static_cast<uint32_t>(lane0)),
                 "r"(Ring::entry()), "r"(a), "r"(last) : "memory");
  }

  // The owner's index within its group: selected CTA rank x owners per CTA + warp rank (STRIDE a
  // literal, so no division instruction sequence).
  __device__ __forceinline__ static uint32_t local_owner() {
    return linear_cta() / STRIDE * popc32(resident_warps()) + warp_rank();
  }

  // Staged: copy the ring's first `count` (<= K <= 32) events to global memory, lane j taking
  // slot j (which it stored itself, or lane 0 did: flush waits for those); off_ advances past the
  // events handed over (kept or not).
  __device__ __forceinline__ void drain(uint32_t count) {
    const uint32_t ring = ring_end_ - K * kSlotBytes, j = lane_id(), p = off_ + j * kEventBytes;
    if (j < count && p < end_) copy_out(ring + j * kSlotBytes, p);
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
  uint32_t valid_ = kTagValid;  // staged: kTagValid, loaded opaquely before a loop's trips (trips_begin)
};

// The default recorder: no staging.
using Recorder = BasicRecorder<0u, 0u, 0u>;

__host__ __device__ constexpr bool all_of() { return true; }
template <class... B>
__host__ __device__ constexpr bool all_of(bool b, B... rest) { return b && all_of(rest...); }
template <bool>
struct Resident {};

template <class... Rs>
__device__ __forceinline__ void finish_each(Resident<false>, Rs&... rs) {  // global or staged: each on its own
  const int each[] = {(rs.finish(), 0)...};
  (void)each;
}

template <class... Rs>
__device__ __forceinline__ void finish_each(Resident<true>, Rs&...) {
  // the whole warp here: it copies the owner lane's rings out together
  resident_close<Rs...>(__activemask() == 0xffffffffu);
}

// Every exit path calls this once with the kernel's recorders: each publishes its attempt count;
// resident recorders copy their rings out and publish in one out-of-line call per warp.
template <class R0, class... Rs>
__device__ __forceinline__ void finish(R0& r0, Rs&... rs) {
  static_assert(all_of((Rs::kResident == R0::kResident)...), "a kernel's recorders are all resident or none");
  finish_each(Resident<R0::kResident>(), r0, rs...);
}

}  // namespace atrex

