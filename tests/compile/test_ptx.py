"""The PTX grammar on real-world-shaped inline-asm templates (issue 13): operands over several
lines, modifiers after a space, literals spliced with macros; a template it cannot read is listed
when a ptx anchor matches nothing, never skipped silently."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from atrex_inject.cuda.anchors import candidates
from atrex_inject.cuda.ptx import instructions
from atrex_inject.cuda.source import asm_instructions, parse_source
from atrex_inject.spec import Anchor, Site
from test_placement import make_project, refused, site

TEMPLATES = [
    ("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16\n{%0, %1, %2, %3,\n %4, %5, %6, %7},\n"
     " %8, %9, p, 1, 1, 1, 1;\n", ["wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"]),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes .L2::cache_hint"
     " [%0], [%1, {%3, %4}], [%2], %5;",
     ["cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"]),
    ("{\n.reg .pred P1;\nLAB_WAIT_%=:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n@P1 bra DONE_%=;\n"
     "bra LAB_WAIT_%=;\nDONE_%=:\n}\n", [".reg", "mbarrier.try_wait.parity.shared::cta.b64", "bra", "bra"]),
    ("{ .reg .b32 t;\n  @!%1 setp.ne.b32 t, %2, 0; }", [".reg", "setp.ne.b32"]),
    ("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4+16];", ["ld.global.nc.L1::no_allocate.v4.f32"]),
]


@pytest.mark.parametrize("template,opcodes", TEMPLATES, ids=range(len(TEMPLATES)))
def test_real_world_shapes_parse(template, opcodes):
    assert [i.opcode for i in instructions(template)] == opcodes


CORPUS = Path(__file__).parent.parent / "ptx_templates.cu"


def test_the_grammar_reads_every_template_of_the_corpus():
    """Every asm statement of tests/ptx_templates.cu, read as the rewriter reads a kernel (statement
    model, the file's string macros spliced in), yields the opcodes of the `//>` line above it."""
    text = CORPUS.read_text()
    k = parse_source(text, str(CORPUS)).kernel("templates")
    asms = [s for s in k.body.walk() if s.kind == "asm_stmt"]
    expected = [m.group(1).split() for m in re.finditer(r"^//> (.*)$", text, re.M)]
    assert len(asms) == len(expected) and len({text[s.start:s.end] for s in asms}) >= 200
    got = [(text.count("\n", 0, s.start) + 1, asm_instructions(s, k.macros)) for s in asms]
    failed = [(line, want, have and [i.opcode for i in have]) for (line, have), want in zip(got, expected)
              if have is None or [i.opcode for i in have] != want]
    assert failed == []


SPLICED = """\
#define SEM ".release" ".cta"
__global__ void k(unsigned* b) {
  asm volatile("mbarrier.arrive" SEM ".shared::cta.b64 _, [%0];" :: "r"(b[0]) : "memory");
  asm volatile("mbarrier.arrive" SCOPE ".shared::cta.b64 _, [%0];" :: "r"(b[1]) : "memory");
  asm volatile("mov.u32 %0, " REG ";" : "=r"(b[2]));
  asm volatile(FENCE ";" ::: "memory");
}
"""


def test_literals_spliced_with_macros_are_read_and_an_unreadable_template_is_listed(tmp_path):
    k = parse_source(SPLICED).kernel("k")
    got = [asm_instructions(s, k.macros) for s in k.body.children]
    assert [[i.opcode for i in g] if g is not None else None for g in got] == [
        ["mbarrier.arrive.release.cta.shared::cta.b64"], ["mbarrier.arrive.shared::cta.b64"], None, None]
    spec = make_project(tmp_path, SPLICED, site('ptx = "mov"'))
    refused(spec, "anchor ptx 'mov' matches nothing in kernel 'k'; the kernel's ptx candidates are:",
            "3. k.cu:5: asm whose PTX template atrex-inject cannot read (no opcode of it can match): "
            'asm volatile("mov.u32 %0, " REG ";" : "=r"(b[2]));')


REPEATED = """\
__global__ void k(unsigned* b) {
  asm volatile("{\\n.reg .pred p;\\nW:\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\\n"
               "@p bra D;\\nbra W;\\nD:\\n}"
               :: "r"(b[0]) : "memory");
  asm volatile("bra.uni L;\\nL:\\n" ::: "memory");
}
"""


def test_occurrence_counts_asm_statements_and_each_opcode_is_listed_once(tmp_path):
    k = parse_source(REPEATED).kernel("k")
    hits, every = candidates(k, Site("x", Anchor("ptx", "bra"), "before"))
    assert [(h.stmt, h.what) for h in hits] == [(k.body.children[0], "ptx bra"), (k.body.children[1], "ptx bra.uni")]
    assert [m.what for m in every] == ["ptx .reg", "ptx mbarrier.try_wait.parity.shared::cta.b64", "ptx bra",
                                       "ptx bra.uni"]
    spec = make_project(tmp_path, REPEATED, site('ptx = "bra", occurrence = 3'))
    refused(spec, "occurrence 3 asked, but the anchor matches 2 place(s)")


HELPER = """\
__device__ void arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "l"(bar) : "memory");
}
__global__ void k(unsigned long long* bar) {
  arrive(bar);
}
"""


def test_an_opcode_only_in_a_device_helper_points_at_the_helper_s_call(tmp_path):
    spec = make_project(tmp_path, HELPER, site('ptx = "mbarrier.arrive"'))
    refused(spec, "anchor ptx 'mbarrier.arrive' matches nothing in kernel 'k'; that opcode is in the asm of "
                  "arrive (k.cu:2), outside the kernel", 'hint: anchor the kernel\'s call of that function instead: '
                  'call = "arrive"')
