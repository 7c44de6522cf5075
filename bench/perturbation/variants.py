"""Designs the rewriter does not emit, measured on the whole kernel (run on the GPU host): each
variant is an example's instrumented source (or the recorder runtime) transformed by hand, here in
code, and measured against the clean build with `atrex-inject measure` (8+8 fresh processes), as
bench/perturbation/parts.py measures the spec's parts. bench/RESULTS.md has the runs (sessions 9
and 10; the state-placement designs measured in session 9 were edits of the recorder before its
resident state moved to the shared table, and are gone with it).

    spec          the example's spec as the rewriter instruments it (the reference, same call)
    outlined      the copy's clean body moved to a static __noinline__ function, the copy bounded at
                  the clean kernel's registers (__launch_bounds__ minimum CTAs per SM)
    outlined_one  the same with one recording CTA: what the out-of-line clean side costs alone
    defer         the strip-mined loop-end event's time read where it is, its store after the next
                  group's loads (and after the loop for the last group)
    held          resident: each strip-mined loop's recorders held in registers across the whole
                  loop (hold before it, release after it) instead of within each trip
    exit_none     resident: the warp's exit call does nothing (no copy-out, no claim, no header;
                  the capture is rejected): what the exit costs, by difference with `spec`
    exit_header   resident: the exit claims and writes the owner headers but copies no event
    exit_copy     resident: the exit copies the rings out but claims and writes no header
    exit_call     resident: the exit call finds each owner's ring and returns: no global memory access
    exit_store    resident: the same plus one 4-byte global store per owner
    exit_sector   resident: the same with one whole 32-byte sector per owner (two lanes' 16-byte
                  stores): does a partial-sector write cost a fill from DRAM that a whole one does not?
    exit_red      resident: the same with a 4-byte reduction (`red.global.add`) instead of the store
    exit_bulk     resident: the same with a 16-byte bulk copy from shared memory (`cp.async.bulk`,
                  the TMA unit) instead of the store, waited for until it has read shared memory
    exit_warm     resident: exit_store, and at entry each warp's lane 0 loads a word of the same
                  page of the buffer (its result unused): is the exit's cost a cold translation?
    late          resident: a strip-mined trip's table entry written back at the trip's end
                  (`release()`, session 10), not right after its loop-begin probes (run 83)
    norecord      no CTA records (the copy's guard is false): what launching the copy costs, its static
                  shared memory (resident rings) included, with every CTA on its clean side
    warm_trip     resident: each strip-mined trip's hold also prefetches (prefetch.global.L2) the
                  owner's first event slot and header in the buffer, so the constant lines, the address
                  translation and the L2 lines the exit needs are fresh when it comes (session 15)
    warm_after    resident: the same prefetches made once, right after the strip-mined loop
    warm_base     resident: warm_trip with the group's first owner's addresses (the same constant
                  lines and, in one page, the same translation; no %ctaid or %tid in the loop)
    warm_asm      resident: warm_base written as one asm block (its constant loads cannot be kept for
                  the exit)
    drain         resident: each strip-mined trip, once its loads are issued, copies the previous
                  trip's events out of the ring (one lane an event), and the exit copies only each
                  ring's last 8 events (the trips drained the rest; the capture is complete where no
                  more than 8 events follow the last drain, as in reduce_sumsq): does moving the
                  copy-out into the loads' shadow take it off the straggler's end? (session 15)
    exit_clock    resident: the exit as committed, its phases timed with %clock into each owner header's
                  clk0 and pad words (bench/perturbation/exit_phases.py reads them; session 16)
    warm_consts   resident: right after the strip-mined loop's first `after` probe, the constants the
                  exit reads loaded into registers that nothing reads until the exit (warm_consts_clock:
                  with exit_clock's phase clocks)
    trip          each strip-mined loop's test one bitwise `&` (not `&&`), and its last increment and
                  next test computed before the trip's end probes, not after them (session 17)
    exit_early    the exit's copy-out and publication made right after the first strip-mined loop's
                  first `after` probe instead of at the kernel's exits (the events after it are
                  lost; the capture is rejected): does the same exit cost less before the tail?

Each name takes a suffix: `-resident` (staging = { warps = 8, resident = true }) and `@PART`
(a part of bench/perturbation/parts.py: entry, loop, noloop; default full).

    python3 bench/perturbation/variants.py --example layernorm \\
        --variants spec-resident,held-resident [--samples 8] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from atrex_inject import sass, snapshot
from atrex_inject.spec import staged_copy


def _load_parts():
    """bench/perturbation/parts.py, loaded from its file (this folder's iket.py would shadow `iket`)."""
    spec = importlib.util.spec_from_file_location("atrex_bench_perturbation_parts", Path(__file__).with_name("parts.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


parts = _load_parts()
run = parts.run


def _close(text: str, i: int) -> int:
    """Offset of the bracket closing the `(` or `{` at i."""
    left = text[i]
    right = {"(": ")", "{": "}"}[left]
    depth = 0
    for j in range(i, len(text)):
        depth += text[j] == left
        depth -= text[j] == right
        if depth == 0:
            return j
    raise ValueError(f"unbalanced {left!r} at offset {i}")


def _replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise ValueError(f"expected one {old!r}, found {text.count(old)}")
    return text.replace(old, new)


def outlined(text: str, kernel: str, registers: int) -> str:
    """The copy's clean body as `static __device__ __noinline__ void K__atrex_clean(params)` (the
    kernel's body verbatim, its __shared__ declarations with it), the copy's `__launch_bounds__(T)`
    given the minimum CTAs per SM that bounds it at `registers`."""
    clone = kernel + "__atrex"
    m = next(m for m in re.finditer(rf"\b{clone}\s*\(", text) if text[_close(text, m.end() - 1) + 1:].lstrip()[:1] == "{")
    params = text[m.end():_close(text, m.end() - 1)]
    names = [re.findall(r"\w+", p)[-1] for p in params.split(",")]
    open_ = text.index("{", _close(text, m.end() - 1))
    guard = text.index("  if (gridDim.x != 0u && (", open_)
    else_ = "  } else {  // atrex: the clean body, verbatim\n"
    e0 = text.index(else_, guard)
    e1 = text.index("  }  // atrex: end of the clean body", e0)
    body = text[open_ + 1:guard] + text[e0 + len(else_):e1]  # the common prefix and the clean body
    fn = f"static __device__ __noinline__ void {clone}_clean({params}) {{{body}}}\n"
    text = text[:e0] + f"  }} else {{\n    {clone}_clean({', '.join(names)});\n" + text[e1:]
    lb = text.index("__launch_bounds__(", text.rfind("__global__", 0, m.start()))
    paren = lb + len("__launch_bounds__")
    t = text[paren + 1:_close(text, paren)]
    text = text[:lb] + f"__launch_bounds__({t}, 65536 / (({registers}) * ({t})))" + text[_close(text, paren) + 1:]
    note = f"// atrex: {clone}, the instrumented copy"
    return _replace_once(text, note, fn + note)


def late_release(text: str) -> str:
    """`late`: each trip's `release(n)` after its loop-begin probes moved to the trip's end as
    `release()`, where the rewriter wrote it before run 83."""
    out, n = re.subn(r" (__atrex_r\d+)\.release\(\d+u\);(.*?loop-end\) \*/)", r"\2 \1.release();", text, flags=re.S)
    if not n:
        raise ValueError("no trip that releases after its begin probes")
    return out


def no_recording_cta(text: str) -> str:
    """The copy's guard made false at run time (gridDim.x == 0, which ptxas cannot fold, so the
    recording side and its static shared memory stay): every CTA runs the copy's clean side."""
    out = text.replace("if (gridDim.x != 0u && (", "if (gridDim.x == 0u && (", 1)
    if out == text:
        raise ValueError("no versioned body")
    return out


def one_recording_cta(text: str) -> str:
    """The copy's guard with a CTA limit of 1: only CTA 0 records."""
    return re.sub(r"atrex::cta_selected\((\d+)u, 0u\)", r"atrex::cta_selected(\1u, 1u)", text)


def deferred_end(text: str) -> str:
    """The strip-mined loop's end site: its time read at the group's end, its event stored after
    the next group's loads (the begin probes' place), and after the loop for the last group."""
    begin = re.search(r"(__atrex_r\d+)\.rec\((\d+)u\); /\* atrex: site \w+ \(id \d+, loop-begin\) \*/", text)
    end = re.search(r"(__atrex_r\d+)\.rec\((\d+)u\); /\* atrex: site \w+ \(id \d+, loop-end\) \*/ \}", text)
    if not begin or not end:
        raise ValueError("no strip-mined loop with a loop-begin and a loop-end site")
    r, site = end.group(1), end.group(2)
    store = f"if (__atrex_pend) {r}.rec_at({site}u, __atrex_tend);"
    out = text[:end.start()] + "__atrex_tend = atrex::globaltimer_lo(); __atrex_pend = true; }\n  " + store + text[end.end():]
    out = out[:begin.start()] + store + " " + out[begin.start():]
    loop = out.rindex("for (; (", 0, begin.start())
    return out[:loop] + "uint32_t __atrex_tend = 0u; bool __atrex_pend = false;\n  " + out[loop:]


_TRIP_HEAD = re.compile(r"for \(; \((?P<cond>[^;]*?)\) && (?P<left>\([^;]*?\) - \([^;]*?\)) (?P<cmp>>=?) (?P<k>\d+) \* "
                        r"(?P<step>\([^;]*?\)); (?P<incr>[^;{]*?)\) \{")
_TRIP_TAIL = re.compile(r"\}((?: __atrex_r\d+\.\w+\(\d*u?\);(?: /\* [^*]*\*/)?)*) \}$")


def trip_order(text: str) -> str:
    """`trip`: each strip-mined loop's test one bitwise `&` of its two comparisons (not `&&`, two
    branches), and its last increment and next test computed before the trip's end probes instead
    of after them. ptxas moves nothing across a timer read, so what follows the end probe (the
    increment, both tests, the next trip's addresses) ran after the trip's loads had returned, on
    the way to the next trip's loads (reduce_sumsq: 10 instructions after the trip's last timer
    read, 3 with this)."""
    out, pos, n = [], 0, 0
    for m in _TRIP_HEAD.finditer(text):
        test = f"({m['cond']}) & ({m['left']} {m['cmp']} {m['k']} * {m['step']})"
        j = _close(text, m.end() - 1)
        body = text[m.end():j + 1]
        tail = _TRIP_TAIL.search(body)
        if tail is None:
            raise ValueError("a strip-mined trip whose end probes are not its body's last statements")
        body = body[:tail.start()] + f"}} {m['incr']}; __atrex_more = {test};" + tail.group(1) + " }"
        out += [text[pos:m.start()], f"for (bool __atrex_more = {test}; __atrex_more; ) {{", body]
        pos, n = j + 1, n + 1
    if not n:
        raise ValueError("no strip-mined loop")
    return "".join(out) + text[pos:]


# The recorder runtime's hot path with rec_at: `defer` stores an event whose time was read earlier.
REC_AT = (
    "  __device__ __forceinline__ void rec(uint32_t site, uint32_t payload = 0u) {\n"
    "    const uint32_t t = globaltimer_lo();\n",
    "  __device__ __forceinline__ void rec(uint32_t site, uint32_t payload = 0u) { rec_at(site, globaltimer_lo(), payload); }\n"
    "  __device__ __forceinline__ void rec_at(uint32_t site, uint32_t t, uint32_t payload = 0u) {\n")

def held_loops(text: str) -> str:
    """`held`: each strip-mined loop's resident recorders held once before the loop and released
    after it, where the rewriter holds and releases them in every trip (group of iterations)."""
    trip = re.findall(r" (__atrex_r\d+)\.hold\(\);", text)
    if not trip:
        raise ValueError("no held recorder: the variant needs a resident spec with a strip-mined loop")
    held = sorted(set(trip))
    text = re.sub(r" __atrex_r\d+\.(?:hold|release)\((?:\d+u)?\);", "", text)
    text = text.replace("  // atrex: strip-mined by", "".join(f" {r}.hold();" for r in held) + "  // atrex: strip-mined by")
    return text.replace("/* atrex: the last iterations, clean */ }",
                        "/* atrex: the last iterations, clean */" + "".join(f" {r}.release();" for r in held) + " }")


# the first `after` probe right after a strip-mined loop (its `rec` call)
_AFTER_LOOP = re.compile(r"/\* atrex: the last iterations, clean \*/ \}\n\s*(__atrex_r\d+\.rec\(\d+u\);)"
                         r"(?=  // atrex: site \w+ \(id \d+, after\))")


def early_exit(text: str) -> str:
    """`exit_early`: every `atrex::finish(...)` of the copy removed and one made right after the
    first `after` probe that follows the strip-mined loop."""
    calls = re.findall(r"atrex::finish\([^)]*\);", text)
    if not calls:
        raise ValueError("no atrex::finish call")
    out = text.replace(calls[0], "")
    m = _AFTER_LOOP.search(out)
    if not m:
        raise ValueError("no `after` probe right after a strip-mined loop")
    return out[:m.end(1)] + " " + calls[0] + out[m.end(1):]


def warm_constants(text: str) -> str:
    """`warm_consts`: right after the first `after` probe that follows the strip-mined loop, the
    constants the recorders' exit reads (the buffer pointer, the events' offset, each group's first
    owner) loaded into registers with nothing waiting for them, and stored to a shared scratch word
    before each exit's `atrex::finish`: are the reads that exit_clock timed at the exit (run 114: about
    490 of its 1070 cycles) waiting for cold constants? (Run 115: no.)"""
    calls = re.findall(r"atrex::finish\(([^)]*)\);", text)
    m = _AFTER_LOOP.search(text)
    if not calls or not m:
        raise ValueError("no atrex::finish call, or no `after` probe right after a strip-mined loop")
    groups = [int(g) for g in re.findall(r"__atrex_r(\d+)", calls[0])][:2]
    head = text[:m.end(1)] + f" const uint4 __atrex_warm = atrex::warm_exit({', '.join(f'{g}u' for g in groups)});"
    return head + text[m.end(1):].replace("atrex::finish(", "atrex::sink_exit(__atrex_warm); atrex::finish(")


# The resident exit taken apart (the captures of these variants are incomplete and rejected). Runs
# 76-82 edited the exit of their time (one group closed after the other); these edit the phased
# exit (every group's reads, then the copies, then the headers).
_CLOSE_CALL = ("  resident_close<Rs...>(__activemask() == 0xffffffffu);\n", "")
_COPY_LOOP = ("    for (uint32_t k = lane; k < e.n; k += lanes) copy_out(e.first + k * kSlotBytes, e.off + k * kEventBytes);\n",
              "    (void)e;\n")
_HEADER = ("  for (const ResidentExit& e : exits) publish_owner(e, cta, tid);\n", "  (void)cta, (void)tid;\n")

_OWNER = "  const ResidentExit exits[] = {Rs::owner_exit()...};\n"
_NOTHING = (_OWNER, _OWNER + '  for (const ResidentExit& e : exits) asm volatile("" ::"r"(e.n), "r"(e.first), "r"(e.owner), "r"(e.off));\n'
            "  return;\n")
_ONE_STORE = (_OWNER, _OWNER + "  for (const ResidentExit& e : exits)\n"
              "    if (lane == 0u && e.valid) *reinterpret_cast<uint32_t*>(atrex_tl_buffer + sizeof(LaunchHeader) + 4u * (e.owner % 1024u)) = e.n;\n"
              "  return;\n")
_ONE_SECTOR = (_OWNER, _OWNER + "  for (const ResidentExit& e : exits)\n"
               "    if (lane < 2u && e.valid) *reinterpret_cast<uint4*>(atrex_tl_buffer + sizeof(LaunchHeader) + 32u * (e.owner % 1024u) + 16u * lane) = make_uint4(e.n, 0u, 0u, 0u);\n"
               "  return;\n")
_ONE_RED = (_OWNER, _OWNER + "  for (const ResidentExit& e : exits)\n"
            "    if (lane == 0u && e.valid) atomicAdd(reinterpret_cast<uint32_t*>(atrex_tl_buffer + sizeof(LaunchHeader) + 4u * (e.owner % 1024u)), e.n);\n"
            "  return;\n")
_ONE_BULK = (_OWNER, _OWNER + "  for (const ResidentExit& e : exits)\n"
             "    if (lane == 0u && e.valid) {\n"
             '      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");\n'
             '      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 16;" ::"l"(atrex_tl_buffer + sizeof(LaunchHeader) + 16u * (e.owner % 1024u)), "r"(e.last) : "memory");\n'
             '      asm volatile("cp.async.bulk.commit_group;" ::: "memory");\n'
             '      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");\n'
             "    }\n  return;\n")

_WARM = ("    const bool lane0 = (tid & 31u) == 0u;\n",
         "    const bool lane0 = (tid & 31u) == 0u;\n"
         '    if (lane0) { uint32_t d; asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(d) : "l"(atrex_tl_buffer + sizeof(LaunchHeader))); }\n')

# warm_trip / warm_after: the owner's exit addresses prefetched (its first event slot and its header)
_HOLD = "  __device__ __forceinline__ void hold() { ResidentRing<K, W, G>::load(ResidentRing<K, W, G>::entry(), a_, ring_end_); }\n"
def _warm_fn(owner: str) -> str:
    """The recorder's warm(): prefetches of the owner's first event slot and header, `owner` its index."""
    return ("  __device__ __forceinline__ static void warm() {\n"
            "    const LaunchHeader* h = &atrex_tl_header;\n"
            f"    const uint32_t owner = {owner};\n"
            '    asm volatile("prefetch.global.L2 [%0];" ::"l"(atrex_tl_buffer + static_cast<uint32_t>(h->events_offset) + owner * (K * kEventBytes)));\n'
            '    asm volatile("prefetch.global.L2 [%0];" ::"l"(atrex_tl_buffer + sizeof(LaunchHeader) + owner * 48u));\n'
            "  }\n")


_OWNER_EXACT = "min(h->groups[G].owner_base + local_owner(), h->n_owners - 1u)"
_OWNER_BASE = "h->groups[G].owner_base"  # the group's first owner: the same constant lines and page, no %ctaid or %tid
_WARM_TRIP = (_HOLD, _HOLD.replace("ring_end_); }", "ring_end_); warm(); }") + _warm_fn(_OWNER_EXACT))
_WARM_AFTER = (_HOLD, _HOLD + _warm_fn(_OWNER_EXACT))
_WARM_TRIP_BASE = (_HOLD, _HOLD.replace("ring_end_); }", "ring_end_); warm(); }") + _warm_fn(_OWNER_BASE))
# warm_asm: warm_base's loads and prefetches in one asm block, so that the compiler cannot keep its
# constant loads for the exit (live across the kernel's later loops: layernorm's copy took 46 registers)
_WARM_ASM = (_HOLD, _HOLD.replace("ring_end_); }", "ring_end_); warm(); }") + (
    "  __device__ __forceinline__ static void warm() {\n"
    '    asm volatile("{\\n\\t.reg .u64 b, o;\\n\\t.reg .u32 e;\\n\\t"\n'
    '                 "ld.const.u64 b, [atrex_tl_buffer];\\n\\tld.const.u32 e, [atrex_tl_header+104];\\n\\t"\n'
    '                 "cvt.u64.u32 o, e;\\n\\tadd.u64 o, b, o;\\n\\tprefetch.global.L2 [o];\\n\\t"\n'
    '                 "ld.const.u32 e, [atrex_tl_header+%0];\\n\\tmul.wide.u32 o, e, 48;\\n\\tadd.u64 o, o, b;\\n\\t"\n'
    '                 "prefetch.global.L2 [o+512];\\n\\t}" ::"n"(128 + 24 * G + 16) : "memory");\n'
    "  }\n"))


def warm_after(text: str) -> str:
    """`warm_after`: each held recorder's warm() right after its strip-mined loop."""
    held = sorted(set(re.findall(r" (__atrex_r\d+)\.hold\(\);", text)))
    if not held:
        raise ValueError("no held recorder: the variant needs a resident spec with a strip-mined loop")
    end = "/* atrex: the last iterations, clean */ }"
    if end not in text:
        raise ValueError("no strip-mined loop")
    return text.replace(end, end + "".join(f" {r}.warm();" for r in held))


# drain: the previous trip's events copied out in the trip (drain_behind), the exit copying the last 8
_RELEASE = "  __device__ __forceinline__ void release(uint32_t ahead = 0u) {\n"
_DRAIN_FN = (_RELEASE, (
    "  template <uint32_t N>\n"
    "  __device__ __forceinline__ void drain_behind() {\n"
    "    using Ring = ResidentRing<K, W, G>;\n"
    "    const uint32_t lane = lane_now(), first = ring_end_ - K * kSlotBytes, s = a_ - (N - lane) * kSlotBytes;\n"
    "    const uint32_t owner = atrex_tl_header.groups[G].owner_base + local_owner();\n"
    "    const uint32_t off = static_cast<uint32_t>(atrex_tl_header.events_offset) + owner * (K * kEventBytes) +\n"
    "                         (s - first) / kSlotBytes * kEventBytes;\n"
    "    if (lane < N && a_ >= first + (N - lane) * kSlotBytes && atrex_tl_buffer != nullptr) copy_out(Ring::base() + s, off);\n"
    "  }\n") + _RELEASE)
_DRAIN_EXIT = ("    for (uint32_t k = lane; k < e.n; k += lanes) copy_out(e.first + k * kSlotBytes, e.off + k * kEventBytes);\n",
               "    for (uint32_t k = (e.n > 8u ? e.n - 8u : 0u) + lane; k < e.n; k += lanes) copy_out(e.first + k * kSlotBytes, e.off + k * kEventBytes);\n")


def drain_trips(text: str) -> str:
    """`drain`: each trip's drain_behind<N>() (N: the trip's held probes) right before its first held
    probe, after the group's loads."""
    out, n = re.subn(r"(\n\s*)(__atrex_r(\d+))\.rec_held\((\d+)u\); (/\* atrex: site \w+ \(id \d+, loop-begin\) \*/)",
                     lambda m: f"{m.group(1)}{m.group(2)}.drain_behind<2u>(); {m.group(2)}.rec_held({m.group(4)}u); "
                               f"{m.group(5)}", text)
    if not n:
        raise ValueError("no held loop-begin probe")
    return out


# each variant's edits of the recorder runtime
# exit_clock: the resident exit's phases timed with %clock (diagnostic; bench/perturbation/exit_phases.py reads
# them): c0 at the call, c1 once every group's reads (table entry, header constants) have returned, c2 once
# the copies are issued, c3 once the headers are; the owner header's clk0 (unused without clock events)
# gets (c1 - c0) | (c2 - c1) << 16 and its pad c3 - c2.
_PHASE_START = ("  const uint32_t lane = all ? lane_id() : 0u, lanes = all ? 32u : 1u;\n",
                '  uint32_t c0, c1, c2, c3;\n  asm volatile("mov.u32 %0, %%clock;" : "=r"(c0) :: "memory");\n'
                "  const uint32_t lane = all ? lane_id() : 0u, lanes = all ? 32u : 1u;\n")
_PHASE_READ = (_OWNER, _OWNER + "  uint32_t sum = 0u;\n"
               "  for (const ResidentExit& e : exits) sum += e.first + e.n + e.last + e.owner + e.off + e.valid + e.moved;\n"
               '  asm volatile("add.u32 %0, %0, 1;" : "+r"(sum) :: "memory");\n'
               '  asm volatile("mov.u32 %0, %%clock;" : "=r"(c1) : "r"(sum) : "memory");\n')
_PHASE_COPY = ("  if (lane != 0u) return;\n  const uint32_t cta = linear_cta(), tid = linear_thread();\n",
               '  asm volatile("mov.u32 %0, %%clock;" : "=r"(c2) :: "memory");\n'
               "  if (lane != 0u) return;\n  const uint32_t cta = linear_cta(), tid = linear_thread();\n")
_PHASE_END = ("  for (const ResidentExit& e : exits) publish_owner(e, cta, tid);\n",
              "  for (const ResidentExit& e : exits) publish_owner(e, cta, tid);\n"
              '  asm volatile("mov.u32 %0, %%clock;" : "=r"(c3) :: "memory");\n'
              "  for (const ResidentExit& e : exits)\n"
              "    if (e.valid) {\n"
              "      OwnerHeader* oh = reinterpret_cast<OwnerHeader*>(atrex_tl_buffer + sizeof(LaunchHeader)) + e.owner;\n"
              "      oh->clk0 = (c1 - c0) | (c2 - c1) << 16;\n      oh->pad = c3 - c2;\n    }\n")
_PHASES = [_PHASE_START, _PHASE_READ, _PHASE_COPY, _PHASE_END]
# warm_consts: the constants a resident exit reads, loaded where nothing waits for them (warm_constants)
_WARM_EXIT = ("template <class... Rs>\nstatic __device__ __noinline__ void resident_close(bool all) {\n",
              "// the exit's constants loaded now, each into its own register (no arithmetic: nothing waits for them\n"
              "// here); sink_exit stores them to a shared scratch word at exit, where they have long arrived\n"
              "// (indexed by %tid.z, 0 in a 1-D block, which ptxas cannot fold as it folds a literal zero: a constant-bank\n"
              "// load at a fixed address, ptxas rematerializes at its use, after the kernel's barrier)\n"
              "__device__ __forceinline__ uint4 warm_exit(uint32_t g0, uint32_t g1 = 0u) {\n"
              "  const uint32_t z = threadIdx.z;\n"
              "  const unsigned char* const* b = &atrex_tl_buffer;\n"
              "  return make_uint4(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(b[z])),\n"
              "                    static_cast<uint32_t>((&atrex_tl_header.events_offset)[z]),\n"
              "                    atrex_tl_header.groups[g0 + z].owner_base, atrex_tl_header.groups[g1 + z].owner_base);\n}\n"
              "__device__ __forceinline__ void sink_exit(uint4 v) {\n"
              "  __shared__ uint4 scratch;\n"
              '  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(&scratch))),\n'
              '               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");\n}\n\n'
              "template <class... Rs>\nstatic __device__ __noinline__ void resident_close(bool all) {\n")

RUNTIME = {"drain": [_DRAIN_FN, _DRAIN_EXIT], "warm_trip": [_WARM_TRIP], "warm_after": [_WARM_AFTER], "warm_base": [_WARM_TRIP_BASE], "warm_asm": [_WARM_ASM], "defer": [REC_AT], "exit_none": [_CLOSE_CALL], "exit_header": [_COPY_LOOP], "exit_copy": [_HEADER],
           "exit_call": [_NOTHING], "exit_store": [_ONE_STORE], "exit_sector": [_ONE_SECTOR], "exit_red": [_ONE_RED],
           "exit_bulk": [_ONE_BULK], "exit_warm": [_ONE_STORE, _WARM], "exit_clock": _PHASES,
           "warm_consts": [_WARM_EXIT], "warm_consts_clock": [_WARM_EXIT, *_PHASES]}


def runtime_variant(folder: Path, edits: list[tuple[str, str]]) -> Path:
    """A copy of the recorder runtime in `folder`, edited (each old text replaced once)."""
    src = snapshot.runtime_header().parent
    folder.mkdir(parents=True, exist_ok=True)
    for f in src.glob("*.cuh"):
        shutil.copy(f, folder / f.name)
    rec = folder / "atrex_recorder.cuh"
    text = rec.read_text()
    for old, new in edits:
        text = _replace_once(text, old, new)
    rec.write_text(text)
    return folder


KERNELS = {"reduce_sumsq": "reduce_sumsq", "layernorm": "layernorm_fwd", "gemm_mma": "gemm_bf16"}


def transform(name: str, text: str, kernel: str, registers: int) -> str:
    """The instrumented text of variant `name` (its base name, without suffixes)."""
    if name in ("outlined", "outlined_one"):
        text = outlined(text, kernel, registers)
        return one_recording_cta(text) if name == "outlined_one" else text
    if name == "defer":
        return deferred_end(text)
    if name == "trip":
        return trip_order(text)
    if name == "exit_early":
        return early_exit(text)
    if name == "norecord":
        return no_recording_cta(text)
    if name == "late":
        return late_release(text)
    if name in ("spec", "warm_trip", "warm_base", "warm_asm", *(n for n in RUNTIME if n.startswith("exit_"))):
        return text
    if name == "held":
        return held_loops(text)
    if name == "warm_after":
        return warm_after(text)
    if name == "drain":
        return drain_trips(text)
    if name in ("warm_consts", "warm_consts_clock"):
        return warm_constants(text)
    raise ValueError(f"unknown variant {name!r}")


def parse(variant: str) -> tuple[str, bool, str]:
    """`name[-resident][@part]` -> (name, resident, part)."""
    name, _, part = variant.partition("@")
    resident = name.endswith("-resident")
    return name.removesuffix("-resident"), resident, part or "full"


def registers(log: str, kernel: str) -> int:
    """Registers of `kernel` (a plain name; K__atrex for the copy) from a ptxas -v log."""
    mangled = f"{len(kernel)}{kernel}"  # _Z<length><name><parameters>
    return next(n for f, n in sass.ptxas_registers(log).items() if f.startswith(f"_Z{mangled}"))


def build(work: Path, example: str, variants: list[str]) -> tuple[dict[str, Path], dict[str, int]]:
    """The clean build and each variant's, with the manifest its capture is validated against."""
    src = work / "examples" / "cuda" / f"{example}.cu"
    bins = {"clean": work / f"{example}.clean"}
    log = subprocess.run([*run.NVCC, "-Xptxas", "-v", f"-I{src.parent}", "-o", bins["clean"], src],
                         check=True, capture_output=True, text=True).stderr
    kernel = KERNELS[example]
    regs = {"clean": registers(log, kernel)}
    for v in variants:
        name, resident, part = parse(v)
        spec = work / "examples" / "specs" / f"{example}.toml"
        s = parts.part_spec(spec, part) if part != "full" else spec
        s = staged_copy(s, None, 8) if resident else s
        res = snapshot.apply(s, root=work)
        text = src.read_text()
        snapshot.revert(s, root=work)
        (work / f"manifest-{example}-{v}.json").write_text(res.manifest.dumps())
        inst = work / f"{example}.{v}.cu"
        inst.write_text(transform(name, text, kernel, regs["clean"]))
        include = (runtime_variant(work / f"runtime-{name}", RUNTIME[name]) if name in RUNTIME
                   else snapshot.runtime_header().parent)
        bins[v] = work / f"{example}.{v}"
        log = subprocess.run([*run.NVCC, "-Xptxas", "-v", f"-I{include}", f"-I{src.parent}", "-o", bins[v], inst],
                             check=True, capture_output=True, text=True).stderr
        regs[v] = registers(log, kernel + "__atrex")
    return bins, regs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", default="reduce_sumsq", choices=sorted(KERNELS))
    ap.add_argument("--variants", default="spec,defer")
    ap.add_argument("--samples", type=int, default=8, help="fresh processes per variant and side (multiple of 4)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    variants = [v for v in a.variants.split(",") if v]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = run.workspace(Path(tmp))
        bins, regs = build(work, a.example, variants)
        print(f"{a.example}: overhead against the clean build (95% CI), {a.samples}+{a.samples} processes; "
              f"registers: clean {regs['clean']}", flush=True)
        for v in variants:
            r = run.arm(work, a.example, bins, v, a.samples)
            r["registers"] = regs[v]
            rows.append(r)
            cap = r.get("capture", {})
            print(f"  {v:<26}{run._pct(r['overhead']):>9} {run._ci(r['ci95']):>20}  {regs[v]} registers, capture "
                  f"{cap.get('verdict', '-')}" + ("" if r["valid"] else f"  REJECTED: {r['reasons']}"), flush=True)
    if a.json:
        a.json.write_text(json.dumps({"example": a.example, "device": run._device(), "registers": regs, "rows": rows},
                                     indent=2) + "\n")
    return 0 if all(r["valid"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
