"""Probe spec v1: TOML in, typed objects out.

The spec chooses everything (sites, roles, density, intervals); nothing here adds a site. Every
error names the spec file and the line of the offending key and says what to change, because the
usual author is an agent that will fix the line and retry. docs/spec.md documents the format.

This module reads the syntax every backend shares; the keys only one backend reads (its registry
entry's `spec_keys`: the cuda backend's [build], launchers, ...) are read by that backend
(Backend.parse_keys) through the same key reader (spec_table.py), and refused in another's spec.
"""
from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import causal_spec, registry
from .causal_spec import Causality
from .errors import SpecError
from .layout import MAX_GROUPS, PACKED_SITE_BITS, PACKED_SITES, ROLE_NAMES, Role
from .spec_paths import find_root
from .spec_table import KeyLines, SpecFile, Table
from .spec_variant import RecorderVariant, variant_text

SPEC_VERSION = 1
ANCHOR_KINDS = ("call", "stmt", "ptx", "loop", "entry", "exit")
POSITIONS = ("before", "after", "loop-begin", "loop-end", "entry", "exit")
# Which positions make sense for which anchor kind.
ANCHOR_POSITIONS = {
    "call": ("before", "after"),
    "stmt": ("before", "after"),
    "ptx": ("before", "after"),
    "loop": ("before", "after", "loop-begin", "loop-end"),
    "entry": ("entry",),
    "exit": ("exit",),
}
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,31}$")
RESERVED_NAMES = {"history", "lock", "cache"}  # entries of .atrex/ that are not workspaces
I64 = (1 << 63) - 1
MAX_INTERVALS = 16  # the Perfetto export numbers an owner's interval tracks owner * MAX_INTERVALS + k
INTERVAL_RE = re.compile(r"^\s*(\S+)\s*->\s*(\S+)\s*$")

# the top-level keys every backend reads; registry.spec_keys() adds those only one backend reads
SHARED_KEYS = {"version", "name", "question", "backend", "source", "kernel", "capture", "site", "intervals", "pair",
               "expect", "causality"}
KERNEL_KEYS = {"name", "occurrence"}
CAPTURE_KEYS = {"capacity", "clock", "skip", "count", "recorder", "warps", "ring", "packed", "wide"}
RECORDERS = ("auto", "global", "staged", "resident")  # [capture] recorder (plan.BufferPath, and auto: choice.py)
SITE_KEYS = {"name", "anchor", "position", "role", "predicate", "payload", "ctas", "warps", "every"}
CTAS_KEYS = {"stride", "limit"}


@dataclass(frozen=True)
class Anchor:
    kind: str  # one of ANCHOR_KINDS
    pattern: str  # text to find ("" for entry/exit)
    occurrence: int | None = None  # 1-based pick among several matches


@dataclass(frozen=True)
class Site:
    name: str
    anchor: Anchor
    position: str
    role: Role = Role.LANE0
    predicate: str | None = None
    payload: str | None = None
    cta_stride: int = 1
    cta_limit: int = 0  # 0: every selected CTA
    warps: tuple[int, ...] | None = None  # None: all warps
    every: int = 1
    line: int | None = None  # line of [[site]] in the spec, for messages

    @property
    def warp_mask(self) -> int:
        if self.warps is None:
            return 0xFFFFFFFF
        mask = 0
        for w in self.warps:
            mask |= 1 << w
        return mask

    @property
    def group_key(self) -> tuple:
        """Sites with equal keys share one recorder (one owner per launch)."""
        return (self.role, self.cta_stride, self.cta_limit, self.warp_mask, self.predicate)


@dataclass(frozen=True)
class Interval:
    start: str
    end: str
    start_id: int = field(default=-1, compare=False)  # the sites' ids, resolved once where it is parsed
    end_id: int = field(default=-1, compare=False)

    @property
    def name(self) -> str:
        return f"{self.start} -> {self.end}"


@dataclass(frozen=True)
class Capture:
    capacity: int = 64  # events per owner
    clock: bool = False
    skip: int = 0  # launches before the first one written
    count: int = 1  # launches written; 0 = all
    recorder: str = "auto"  # one of RECORDERS: "auto" lets the tool choose (choice.py)
    ring: int = 0  # staged: events per warp staged in shared memory before a coalesced copy (0: the default)
    warps: int = 0  # warps per CTA the rings are sized for (0: the kernel's __launch_bounds__)
    # 4-byte events in the buffer, the site id in the timer's low bits (docs/format.md); None: not said,
    # the plan decides (plan.packs)
    packed: bool | None = None
    # 16-byte events {t, clock, payload, tag} with the clock, for a timer that ticks finer than the 32 ns the
    # 8-byte clock event's site bits need (docs/format.md)
    wide: bool = False


@dataclass(frozen=True)
class BackendKeys:
    """What a backend read of the keys only it reads (Backend.parse_keys); this base is a spec of
    a backend that reads none. `launchers` is here, not in the cuda backend's keys, because apply
    snapshots and restores every file a backend rewrites whichever backend names them."""
    launchers: tuple[Path, ...] = ()  # other files (absolute, inside root) whose launches of the kernel are captured


@dataclass(frozen=True)
class ProbeSpec:
    path: Path
    root: Path
    name: str
    question: str
    backend: str
    source: Path  # absolute, inside root
    kernel: str  # the name as the spec writes it: `step`, `slow::step`, `gemm<128, 64>`
    sites: tuple[Site, ...]
    intervals: tuple[Interval, ...] = ()
    kernel_occurrence: int | None = None  # 1-based pick among several definitions the name matches
    lines: dict[tuple, int] = field(default_factory=dict, compare=False)  # key path -> its line (line_of)
    capture: Capture = field(default_factory=Capture)
    backend_keys: BackendKeys = field(default_factory=BackendKeys)  # the keys only its backend reads (parse_keys)
    expect: dict[str, int] = field(default_factory=dict)
    text: str = ""
    pair: tuple[str, ...] = ()  # two of the intervals the question weighs against each other (the answer compares them)
    causality: tuple[Causality, ...] = ()  # consumer sites that observe producer sites' writes (causal_spec.py)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def site_id(self, name: str) -> int:
        return [s.name for s in self.sites].index(name)

    def line_of(self, *keypath) -> int | None:
        """The spec's line of a key (`"kernel"`; `"site", 2, "payload"`), or of the nearest table
        holding it; None when the spec has no such table: for messages that point at the spec."""
        while keypath:
            if keypath in self.lines:
                return self.lines[keypath]
            keypath = keypath[:-1]
        return None

    @property
    def source_rel(self) -> str:
        return self.source.relative_to(self.root).as_posix()

    @property
    def launchers(self) -> tuple[Path, ...]:
        return self.backend_keys.launchers

    @property
    def launcher_rels(self) -> tuple[str, ...]:
        return tuple(p.relative_to(self.root).as_posix() for p in self.launchers)


def load_spec(path: str | Path, root: str | Path | None = None) -> ProbeSpec:
    try:
        path = Path(path).resolve()
        data = path.read_bytes()
    except (OSError, ValueError) as e:
        raise SpecError(f"cannot read spec: {getattr(e, 'strerror', None) or e}", path=str(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"the spec is not UTF-8 text (byte {e.start})", path=str(path),
                        line=data[:e.start].count(b"\n") + 1, hint="save the spec as UTF-8") from None
    return parse_spec(text, path, Path(root).resolve() if root else None)


def _deepest_line(text: str) -> int:
    """Line where bracket nesting first reaches its maximum: where a too-deep spec goes wrong."""
    depth = deepest = 0
    at = 1
    for no, line in enumerate(text.split("\n"), 1):
        for c in line:
            depth += (c in "[{") - (c in "]}")
            if depth > deepest:
                deepest, at = depth, no
    return at


def _toml(text: str, path: Path) -> dict:
    """The spec's TOML document, or a refusal at the line where it stops being TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise SpecError(f"malformed TOML: {e}", path=str(path), line=int(m.group(1)) if m else text.count("\n") + 1,
                        hint="fix the TOML syntax at that line") from None
    except RecursionError:
        raise SpecError("arrays or tables nested too deeply to read", path=str(path),
                        line=_deepest_line(text), hint="a spec needs no deep nesting; flatten it") from None


def parse_spec(text: str, path: Path, root: Path | None) -> ProbeSpec:
    """The spec at `path` read from `text`; its paths confined to `root` (None: find_root's).
    The keys are read in the order below, so a spec with several faults is refused at the first."""
    data = _toml(text, path)
    lines = KeyLines(text)
    top = Table(data, (), SpecFile(path, lines))
    top.refuse_unknown(SHARED_KEYS | set(registry.spec_keys()))
    name, question, backend = _head(top)
    src_text = top.require("source", str)
    top = Table(data, (), SpecFile(path, lines, root or find_root(path, src_text)))
    source = top.path(src_text, "source")
    kernel, kernel_occurrence = _kernel(top)
    backend_keys = _backend_keys(top, backend, source)
    capture = _capture(top.table("capture"))
    sites = _sites(top, registry.info(backend).language)
    _unique_names(top, sites)
    _packed_fits(top, capture, sites)
    _owner_groups(top, sites)
    intervals = _intervals(top, sites)
    pair = _pair(top, intervals)
    expect = _expect(top.table("expect"), sites)
    causality = causal_spec.parse(top, {s.name: s.payload for s in sites}, name, NAME_RE.match)
    return ProbeSpec(path=path, root=top.file.root, name=name, question=question, backend=backend, source=source,
                     kernel=kernel, kernel_occurrence=kernel_occurrence, lines=lines.lines, sites=sites,
                     intervals=intervals, capture=capture, backend_keys=backend_keys, expect=expect, text=text,
                     pair=pair, causality=causality)


def _head(top: Table) -> tuple[str, str, str]:
    """version, name, question and backend: what the rest of the spec is read by."""
    version = top.require("version", int)
    if version != SPEC_VERSION:
        raise top.error(f"spec version {version} is not supported", "version",
                        hint=f"this tool reads version = {SPEC_VERSION}")
    name = top.require("name", str)
    if not NAME_RE.match(name):
        raise top.error(f"spec name {name!r} must be an identifier of at most 32 characters", "name")
    if name in RESERVED_NAMES:
        raise top.error(f"spec name {name!r} is reserved (.atrex/{name} is not a workspace)", "name",
                        hint="choose another name")
    question = top.require("question", str)
    backend = top.require("backend", str)
    if backend not in registry.names():
        raise top.error(f"backend {backend!r} is not one of {', '.join(registry.names())}", "backend")
    return name, question, backend


def _kernel(top: Table) -> tuple[str, int | None]:
    """`kernel = "name"` or `kernel = { name = "name", occurrence = N }` (the backend checks that the
    name reads as a name of its language, and whether it picks among several definitions)."""
    v = top.data.get("kernel")
    if isinstance(v, dict):
        t = top.table("kernel")
        t.refuse_unknown(KERNEL_KEYS)
        return t.require("name", str), t.integer("occurrence", lo=1)
    if v is None or isinstance(v, str):
        return top.require("kernel", str), None
    raise top.error(f"kernel must be a name or a table, not {type(v).__name__}", "kernel",
                    hint='kernel = "slow::step", or kernel = { name = "step", occurrence = 2 }')


def _backend_keys(top: Table, backend: str, source: Path) -> BackendKeys:
    """The keys only the spec's backend reads, read by it; then any other backend's key left in the
    spec (one the spec's backend did not refuse in its own words) is refused."""
    keys = registry.get(backend).parse_keys(top, source)
    for k in top.data:
        owners = [n for n in registry.names() if k in registry.info(n).spec_keys]
        if owners and backend not in owners:
            label = f"[{k}]" if isinstance(top.data[k], dict) else k
            raise top.error(f"{label} applies to the {' and '.join(owners)} backend", k,
                            hint=f"remove {label}: the {backend} backend does not read it")
    return keys


def _capture(cap: Table) -> Capture:
    """[capture]: capacity, clock, the launches written, and the recorder asked for."""
    if "staging" in cap.data:
        raise cap.error("capture.staging is now written as `recorder`, `ring` and `warps`", "staging",
                        hint='staging = { events = E, warps = W } is recorder = "staged", ring = E, warps = W; '
                             'staging = { warps = W, resident = true } is recorder = "resident", warps = W; or drop '
                             "it and let the tool choose (docs/spec.md)")
    cap.refuse_unknown(CAPTURE_KEYS)
    recorder = cap.get("recorder", str, "auto")
    if recorder not in RECORDERS:
        raise cap.error(f"capture.recorder {recorder!r} is not one of {', '.join(RECORDERS)}", "recorder",
                        hint='"auto" (the default) lets the tool choose the recorder that keeps the kernel '
                             "(docs/guide.md)")
    ring = cap.integer("ring", 0, lo=1, hi=32, unit=" events per warp")
    if ring and recorder not in ("auto", "staged"):
        raise cap.error(f"capture.ring sizes the staged recorder's rings; recorder {recorder!r} has none of that "
                        "size", "ring", hint='drop `ring`, or set recorder = "staged"')
    return Capture(
        capacity=cap.integer("capacity", 64, lo=1, hi=1 << 20, unit=" events per owner"),
        clock=cap.get("clock", bool, False),
        skip=cap.integer("skip", 0, hi=I64),
        count=cap.integer("count", 1, hi=I64),
        recorder=recorder, ring=ring,
        warps=cap.integer("warps", 0, lo=1, hi=32, unit=" warps per CTA"),
        packed=cap.get("packed", bool, None),
        wide=cap.get("wide", bool, False),
    )


def _sites(top: Table, language: str) -> tuple[Site, ...]:
    """The [[site]] tables, in order; `language` names the backend's for expression messages."""
    raw = top.data.get("site", [])
    if not isinstance(raw, list) or not raw:
        raise top.error("a spec needs at least one [[site]]",
                        hint="add a [[site]] table with name, anchor and position")
    return tuple(_site(_site_table(top, i, t), language) for i, t in enumerate(raw))


def _site_table(top: Table, i: int, t: object) -> Table:
    if not isinstance(t, dict):
        raise top.error("each site must be a [[site]] table", "site", i)
    return Table(t, ("site", i), top.file)


def _site(t: Table, language: str) -> Site:
    t.refuse_unknown(SITE_KEYS)
    name = t.require("name", str)
    if not NAME_RE.match(name):
        raise t.error(f"site name {name!r} must be an identifier (letters, digits, _ and .) of at most 32 characters",
                      "name")
    anchor = _anchor(t, name)
    position = t.get("position", str, {"entry": "entry", "exit": "exit"}.get(anchor.kind, "before"))
    if position not in ANCHOR_POSITIONS[anchor.kind]:
        raise t.error(f"site {name!r}: position {position!r} does not apply to a {anchor.kind} anchor", "position",
                      hint=f"use one of: {', '.join(ANCHOR_POSITIONS[anchor.kind])}")
    role = t.get("role", str, "lane0")
    if role not in ROLE_NAMES:
        raise t.error(f"site {name!r}: role {role!r} is not one of {', '.join(ROLE_NAMES)}", "role")
    predicate = t.get("predicate", str)
    if (role == "predicate") != (predicate is not None):
        raise t.error(f"site {name!r}: `predicate` goes with role = \"predicate\" and only with it", "role")
    payload = t.get("payload", str)
    for key, expr in (("predicate", predicate), ("payload", payload)):
        why = expression_problem(expr) if expr is not None else None
        if why:
            raise t.error(f"site {name!r}: {key} {expr!r} {why}", key,
                          hint=f"write one {language} expression on one line; it is pasted into the generated code "
                               "as is")
    ctas = t.table("ctas")
    ctas.refuse_unknown(CTAS_KEYS)
    stride = ctas.integer("stride", 1, lo=1)
    limit = ctas.integer("limit", 0)
    warps = _warps(t, name)
    every = t.integer("every", 1, lo=1)
    return Site(name=name, anchor=anchor, position=position, role=Role(role), predicate=predicate, payload=payload,
                cta_stride=stride, cta_limit=limit, warps=warps, every=every, line=t.file.lines.of(*t.at))


def _anchor(t: Table, site: str) -> Anchor:
    """A site's `anchor = { <kind> = pattern[, occurrence = N] }`."""
    a = Table(t.require("anchor", dict), (*t.at, "anchor"), t.file)
    kinds = [x for x in a.data if x in ANCHOR_KINDS]
    extra = [x for x in a.data if x not in ANCHOR_KINDS and x != "occurrence"]
    if extra or len(kinds) != 1:
        raise t.error(f"site {site!r}: anchor needs exactly one of {', '.join(ANCHOR_KINDS)} (plus optional "
                      "occurrence)", "anchor", hint='e.g. anchor = { ptx = "wgmma.commit_group" }')
    kind = kinds[0]
    if kind in ("entry", "exit"):
        if a.data[kind] is not True:
            raise t.error(f"site {site!r}: write `anchor = {{ {kind} = true }}`", "anchor")
        pattern = ""
    else:
        pattern = a.data[kind]
        if not isinstance(pattern, str) or not pattern.strip():
            raise t.error(f"site {site!r}: anchor {kind} must be a non-empty string", "anchor")
    return Anchor(kind, pattern, a.integer("occurrence", lo=1))


def _warps(t: Table, site: str) -> tuple[int, ...] | None:
    """A site's `warps = [...]`: the warp indices that record (None: all)."""
    warps = t.get("warps", list)
    if warps is None:
        return None
    if not warps or not all(isinstance(w, int) and not isinstance(w, bool) and 0 <= w < 32 for w in warps):
        raise t.error(f"site {site!r}: warps must list warp indices 0..31", "warps")
    return tuple(sorted(set(warps)))


def _unique_names(top: Table, sites: tuple[Site, ...]) -> None:
    names = [s.name for s in sites]
    for i, n in enumerate(names):
        if names.index(n) != i:
            raise top.error(f"site name {n!r} is used twice", "site", i, "name", hint="site names must be unique")


def every_trip(sites) -> list[str]:
    """The sites that record every trip of a loop (`every = 1` at its begin or end), by name."""
    return [s.name for s in sites if s.every == 1 and s.position in ("loop-begin", "loop-end")]


def _packed_fits(top: Table, capture: Capture, sites: tuple[Site, ...]) -> None:
    """capture.packed keeps the timer and the site id in 4 bytes: no clock, payload, wide event or
    site id beyond PACKED_SITE_BITS."""
    if not capture.packed:
        return
    if capture.clock or any(s.payload for s in sites):
        what = "capture.clock" if capture.clock else f"site {next(s.name for s in sites if s.payload)!r}'s payload"
        raise top.error(f"capture.packed keeps a 4-byte event (timer and site id) with no room for {what}", "capture",
                        "packed", hint="drop `packed`, or drop the clock and the payloads")
    if capture.wide:
        raise top.error("capture.packed asks for 4-byte events and capture.wide for 16-byte ones", "capture", "wide",
                        hint="drop one of them")
    if len(sites) > PACKED_SITES:
        raise top.error(f"capture.packed holds site ids 0..{PACKED_SITES - 1} in the timer's low {PACKED_SITE_BITS} "
                        f"bits; this spec has {len(sites)} sites", "capture", "packed",
                        hint=f"drop `packed`, or split the question into specs of at most {PACKED_SITES} sites")


def _owner_groups(top: Table, sites: tuple[Site, ...]) -> None:
    """At most MAX_GROUPS owner groups: the launch header's group slots."""
    groups = list(dict.fromkeys(s.group_key for s in sites))
    if len(groups) > MAX_GROUPS:
        first = [s.group_key for s in sites].index(groups[MAX_GROUPS])
        raise top.error(f"{len(groups)} owner groups (role + density + predicate combinations); at most {MAX_GROUPS} "
                        f"(the launch header's group slots), the {MAX_GROUPS + 1}th starts at site "
                        f"{sites[first].name!r}", "site", first, hint="let sites share roles and density")


def _intervals(top: Table, sites: tuple[Site, ...]) -> tuple[Interval, ...]:
    """`intervals = ["a -> b", ...]`: two different sites of one owner group each."""
    names = [s.name for s in sites]
    out = []
    for text_iv in top.get("intervals", list, []):
        m = INTERVAL_RE.match(text_iv) if isinstance(text_iv, str) else None
        if not m:
            raise top.error(f"interval {text_iv!r} must read \"start_site -> end_site\"", "intervals")
        for n in m.groups():
            if n not in names:
                raise top.error(f"interval {text_iv!r} names unknown site {n!r}", "intervals",
                                hint=f"sites: {', '.join(names)}")
        if m.group(1) == m.group(2):
            raise top.error(f"interval {text_iv!r} starts and ends at the same site", "intervals")
        a, b = (sites[names.index(n)] for n in m.groups())
        if a.group_key != b.group_key:
            raise top.error(f"interval {text_iv!r} joins sites of different owners (role/density/predicate differ)",
                            "intervals",
                            hint="an interval is paired per owner: give both sites the same role and density")
        out.append(Interval(*m.groups(), names.index(m.group(1)), names.index(m.group(2))))
    if len(out) > MAX_INTERVALS:
        raise top.error(f"{len(out)} intervals; at most {MAX_INTERVALS} (the Perfetto export gives each owner one "
                        f"track per interval, {MAX_INTERVALS} at most)", "intervals",
                        hint="keep the intervals the question needs")
    return tuple(out)


def _pair(top: Table, intervals: tuple[Interval, ...]) -> tuple[str, ...]:
    """`pair = ["a -> b", "b -> c"]`: two of the intervals, which the answer compares."""
    pair = tuple(top.get("pair", list, []))
    listed = [iv.name for iv in intervals]
    if pair and (len(pair) != 2 or not all(isinstance(n, str) for n in pair) or pair[0] == pair[1]):
        raise top.error(f"pair {list(pair)!r} must name two different intervals", "pair",
                        hint='pair = ["a -> b", "b -> c"]: the two intervals the question weighs against each other')
    for n in pair:
        if n not in listed:
            raise top.error(f"pair names {n!r}, which is not one of the spec's intervals", "pair",
                            hint=f"intervals: {', '.join(listed) or 'none'}")
    return pair


def _expect(t: Table, sites: tuple[Site, ...]) -> dict[str, int]:
    """[expect]: events per owner of named sites (a u32 count each)."""
    names = [s.name for s in sites]
    expect = {}
    for k in t.data:
        if k not in names:
            raise t.error(f"expect names unknown site {k!r}", k, hint=f"sites: {', '.join(names)}")
        expect[k] = t.integer(k)
    return expect


def with_recorder(path: Path, recorder: str, warps: int = 0, ring: int = 0, packed: bool = False) -> Path:
    """Write `<spec>_<recorder>[_packed].toml` next to a spec: the same spec under the name
    `<name>_<recorder>[_packed]` with `recorder`, `warps`, `ring` and `packed` set in its [capture]
    table, so recorders can be applied, built and measured side by side (bench/probe_cost,
    bench/perturbation, tests). A file, written by spec_variant's one serialiser (which says why)."""
    path = Path(path).resolve()
    text = path.read_text()
    spec = parse_spec(text, path, None)
    if spec.capture.recorder != "auto" or (packed and spec.capture.packed):
        raise SpecError("the spec already names its recorder", path=str(path), line=spec.line_of("capture"))
    variant = RecorderVariant(recorder, warps, ring, packed)
    out = path.with_name(f"{path.stem}_{variant.kind}.toml")
    text = variant_text(text, spec.name, variant)
    out.write_text(text)
    parse_spec(text, out, None)  # the copy must be a valid spec
    return out


def expression_problem(expr: str) -> str | None:
    """Why `expr` cannot be one expression on one line of any language (None if it can be): payload
    and predicate text is pasted into generated code. Each backend then reads it in its own language
    (Backend.check, backend.expression_errors)."""
    if not expr.strip():
        return "is empty"
    bad = next((c for c in expr if not c.isprintable()), None)
    if bad is not None:
        return f"holds a newline or control character (U+{ord(bad):04X})"
    return None
