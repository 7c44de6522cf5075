"""Probe spec v1: TOML in, typed objects out.

The spec chooses everything (sites, roles, density, intervals); nothing here adds a site. Every
error names the spec file and the line of the offending key and says what to change, because the
usual author is an agent that will fix the line and retry. docs/spec.md documents the format.
"""
from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import registry
from .errors import SpecError
from .layout import MAX_GROUPS, PACKED_SITE_BITS, PACKED_SITES, ROLE_NAMES, U32, Role

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
NEVER_TARGETS = {".atrex", ".git"}  # the tool's own state and git's are never instrumented
I64 = (1 << 63) - 1
MAX_INTERVALS = 16  # the Perfetto export numbers an owner's interval tracks owner * MAX_INTERVALS + k
INTERVAL_RE = re.compile(r"^\s*(\S+)\s*->\s*(\S+)\s*$")

TOP_KEYS = {"version", "name", "question", "backend", "source", "kernel", "declared_by", "launchers", "cuda_string",
            "capture", "build", "site", "intervals", "pair", "expect"}
KERNEL_KEYS = {"name", "occurrence"}
CAPTURE_KEYS = {"capacity", "clock", "skip", "count", "recorder", "warps", "ring", "packed", "wide"}
RECORDERS = ("auto", "global", "staged", "resident")  # [capture] recorder (plan.BufferPath, and auto: choice.py)
BUILD_KEYS = {"nvcc_flags", "unit"}
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
    packed: bool = False  # 4-byte events in the buffer: the site id in the timer's low bits (docs/format.md)
    # 16-byte events {t, clock, payload, tag} with the clock, for a timer that ticks finer than the 32 ns the
    # 8-byte clock event's site bits need (docs/format.md)
    wide: bool = False


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
    declared_by: str | None = None  # a macro that declares the kernel: `MACRO(kernel, ...) { body }`
    kernel_occurrence: int | None = None  # 1-based pick among several definitions the name matches
    launchers: tuple[Path, ...] = ()  # other files (absolute, inside root) whose launches of the kernel are captured
    lines: dict[tuple, int] = field(default_factory=dict, compare=False)  # key path -> its line (line_of)
    cuda_string: str | None = None  # a Python source's variable holding the CUDA source (cuda/python/)
    capture: Capture = field(default_factory=Capture)
    nvcc_flags: tuple[str, ...] = ()  # [build] nvcc_flags: the flags the kernel's build uses (choice.py compiles with them)
    build_unit: Path | None = None  # [build] unit: the .cu that includes a header kernel and instantiates it
    expect: dict[str, int] = field(default_factory=dict)
    text: str = ""
    pair: tuple[str, ...] = ()  # two of the intervals the question weighs against each other (the answer compares them)

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
    def launcher_rels(self) -> tuple[str, ...]:
        return tuple(p.relative_to(self.root).as_posix() for p in self.launchers)


class _Lines:
    """Maps TOML keys to their line numbers: tomllib keeps no positions."""

    HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"-]+)\s*\]\]?")
    KEY = re.compile(r"^\s*([A-Za-z0-9_\"-]+)\s*=")

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        table: tuple = ()
        counts: dict[str, int] = {}
        for no, line in enumerate(text.split("\n"), 1):  # TOML lines end at \n only
            m = self.HEADER.match(line)
            if m:
                name = m.group(2).strip('"')
                if m.group(1) == "[[":
                    counts[name] = counts.get(name, -1) + 1
                    table = (name, counts[name])
                else:
                    table = (name,)
                self.lines.setdefault(table, no)
                continue
            m = self.KEY.match(line)
            if m:
                self.lines.setdefault(table + (m.group(1).strip('"'),), no)

    def of(self, *path) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


ROOT_MARKERS = (".git", ".atrex")


def _marked(path: Path) -> Path | None:
    """The nearest folder above `path` holding .git or .atrex (the tool's workspace: `mkdir .atrex`
    marks a tree that is not a git checkout, a tarball's, say)."""
    return next((p for p in path.parents if any((p / m).exists() for m in ROOT_MARKERS)), None)


def find_root(spec_path: Path, source: str | None = None) -> Path:
    """The project tree: the source's repository, the nearest folder above the source holding .git
    or .atrex, so a spec kept outside the source's tree needs no --root; where none is above the
    source (or `source` is not given), the nearest one above the spec, else the spec's folder."""
    try:
        at_source = _marked((spec_path.parent / source).resolve()) if source else None
    except (OSError, ValueError):  # a path confine() refuses by name
        at_source = None
    return at_source or _marked(spec_path) or spec_path.parent


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


def parse_spec(text: str, path: Path, root: Path | None) -> ProbeSpec:
    """The spec at `path` read from `text`; its paths confined to `root` (None: find_root's)."""
    where = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise SpecError(f"malformed TOML: {e}", path=where, line=int(m.group(1)) if m else text.count("\n") + 1,
                        hint="fix the TOML syntax at that line") from None
    except RecursionError:
        raise SpecError("arrays or tables nested too deeply to read", path=where,
                        line=_deepest_line(text), hint="a spec needs no deep nesting; flatten it") from None
    lines = _Lines(text)

    def err(msg: str, *keypath, hint: str | None = None) -> SpecError:
        # a key that is missing has no line: point at its table (top-level keys go before line 1's table)
        return SpecError(msg, path=where, line=lines.of(*keypath) or 1, hint=hint)

    def unknown(table: dict, allowed: set, *keypath):
        for k in table:
            if k not in allowed:
                raise err(f"unknown key {k!r}", *keypath, k, hint=f"allowed keys here: {', '.join(sorted(allowed))}")

    def typed(table: dict, key: str, kind, *keypath, default=None, required=False, lo=0, hi=U32, unit=""):
        """table[key] checked for type and, for an integer, for the range [lo, hi] the generated
        code and the capture format can hold."""
        if key not in table:
            if required:
                raise err(f"missing required key {key!r}", *keypath, hint=f"add `{key} = ...`")
            return default
        v = table[key]
        if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
            raise err(f"{key!r} must be an integer, not {v!r}", *keypath, key)
        if kind is int and not lo <= v <= hi:
            label = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", ".".join(map(str, (*keypath, key))))
            raise err(f"{label} must be between {lo} and {hi}{unit}, not {v}", *keypath, key)
        if kind is not int and not isinstance(v, kind):
            raise err(f"{key!r} must be a {kind.__name__}, not {type(v).__name__}", *keypath, key)
        return v

    unknown(data, TOP_KEYS)
    version = typed(data, "version", int, required=True)
    if version != SPEC_VERSION:
        raise err(f"spec version {version} is not supported", "version", hint=f"this tool reads version = {SPEC_VERSION}")
    name = typed(data, "name", str, required=True)
    if not NAME_RE.match(name):
        raise err(f"spec name {name!r} must be an identifier of at most 32 characters", "name")
    if name in RESERVED_NAMES:
        raise err(f"spec name {name!r} is reserved (.atrex/{name} is not a workspace)", "name",
                  hint="choose another name")
    question = typed(data, "question", str, required=True)
    backend = typed(data, "backend", str, required=True)
    if backend not in registry.names():
        raise err(f"backend {backend!r} is not one of {', '.join(registry.names())}", "backend")
    src_text = typed(data, "source", str, required=True)
    root = root or find_root(path, src_text)
    source = confine(src_text, path.parent, root, where, lines.of("source"))
    kernel, kernel_occurrence = _kernel(data, err, unknown, typed)
    launchers = _launchers(data, source, path, root, where, lines, err, typed)
    declared_by = typed(data, "declared_by", str, default=None)
    if declared_by is not None and not re.fullmatch(r"[A-Za-z_]\w*", declared_by):
        raise err(f"declared_by {declared_by!r} must be the name of a macro", "declared_by",
                  hint='e.g. declared_by = "DEFINE_FLASH_FORWARD_KERNEL" for `DEFINE_FLASH_FORWARD_KERNEL(name, ...) {`')
    cuda_string = typed(data, "cuda_string", str, default=None)
    if cuda_string is not None and not cuda_string.isidentifier():
        raise err(f"cuda_string {cuda_string!r} must be a Python variable name", "cuda_string",
                  hint='e.g. cuda_string = "cuda_src" for `cuda_src = r"""..."""`')
    capture = _capture(data, err, unknown, typed)
    nvcc_flags, unit_rel = _build(data, err, unknown, typed)
    build_unit = None if unit_rel is None else confine(unit_rel, path.parent, root, where, lines.of("build", "unit"))

    raw_sites = data.get("site", [])
    if not isinstance(raw_sites, list) or not raw_sites:
        raise err("a spec needs at least one [[site]]", hint="add a [[site]] table with name, anchor and position")
    sites = [_parse_site(t, i, err, unknown, typed, lines, registry.info(backend).language)
             for i, t in enumerate(raw_sites)]
    names = [s.name for s in sites]
    for i, n in enumerate(names):
        if names.index(n) != i:
            raise err(f"site name {n!r} is used twice", "site", i, "name", hint="site names must be unique")
    if capture.packed and (capture.clock or any(s.payload for s in sites)):
        what = "capture.clock" if capture.clock else f"site {next(s.name for s in sites if s.payload)!r}'s payload"
        raise err(f"capture.packed keeps a 4-byte event (timer and site id) with no room for {what}", "capture",
                  "packed", hint="drop `packed`, or drop the clock and the payloads")
    if capture.packed and capture.wide:
        raise err("capture.packed asks for 4-byte events and capture.wide for 16-byte ones", "capture", "wide",
                  hint="drop one of them")
    if capture.packed and len(sites) > PACKED_SITES:
        raise err(f"capture.packed holds site ids 0..{PACKED_SITES - 1} in the timer's low {PACKED_SITE_BITS} bits; "
                  f"this spec has {len(sites)} sites", "capture", "packed",
                  hint=f"drop `packed`, or split the question into specs of at most {PACKED_SITES} sites")
    groups = list(dict.fromkeys(s.group_key for s in sites))
    if len(groups) > MAX_GROUPS:
        first = [s.group_key for s in sites].index(groups[MAX_GROUPS])
        raise err(f"{len(groups)} owner groups (role + density + predicate combinations); at most {MAX_GROUPS} (the "
                  f"launch header's group slots), the {MAX_GROUPS + 1}th starts at site {sites[first].name!r}",
                  "site", first, hint="let sites share roles and density")

    intervals = []
    for i, text_iv in enumerate(typed(data, "intervals", list, default=[])):
        m = INTERVAL_RE.match(text_iv) if isinstance(text_iv, str) else None
        if not m:
            raise err(f"interval {text_iv!r} must read \"start_site -> end_site\"", "intervals")
        for n in m.groups():
            if n not in names:
                raise err(f"interval {text_iv!r} names unknown site {n!r}", "intervals", hint=f"sites: {', '.join(names)}")
        if m.group(1) == m.group(2):
            raise err(f"interval {text_iv!r} starts and ends at the same site", "intervals")
        a, b = (sites[names.index(n)] for n in m.groups())
        if a.group_key != b.group_key:
            raise err(f"interval {text_iv!r} joins sites of different owners (role/density/predicate differ)",
                      "intervals", hint="an interval is paired per owner: give both sites the same role and density")
        intervals.append(Interval(*m.groups(), names.index(m.group(1)), names.index(m.group(2))))
    if len(intervals) > MAX_INTERVALS:
        raise err(f"{len(intervals)} intervals; at most {MAX_INTERVALS} (the Perfetto export gives each owner one "
                  f"track per interval, {MAX_INTERVALS} at most)", "intervals", hint="keep the intervals the question needs")

    pair = tuple(typed(data, "pair", list, default=[]))
    listed = [iv.name for iv in intervals]
    if pair and (len(pair) != 2 or not all(isinstance(n, str) for n in pair) or pair[0] == pair[1]):
        raise err(f"pair {list(pair)!r} must name two different intervals", "pair",
                  hint='pair = ["a -> b", "b -> c"]: the two intervals the question weighs against each other')
    for n in pair:
        if n not in listed:
            raise err(f"pair names {n!r}, which is not one of the spec's intervals", "pair",
                      hint=f"intervals: {', '.join(listed) or 'none'}")

    expect_t = typed(data, "expect", dict, default={})
    expect = {}
    for k, v in expect_t.items():
        if k not in names:
            raise err(f"expect names unknown site {k!r}", "expect", k, hint=f"sites: {', '.join(names)}")
        expect[k] = typed(expect_t, k, int, "expect")  # events per owner: a u32 count

    spec = ProbeSpec(path=path, root=root, name=name, question=question, backend=backend, source=source,
                     kernel=kernel, declared_by=declared_by, kernel_occurrence=kernel_occurrence, launchers=launchers,
                     lines=lines.lines, cuda_string=cuda_string, sites=tuple(sites), intervals=tuple(intervals),
                     capture=capture, nvcc_flags=nvcc_flags, build_unit=build_unit, expect=expect, text=text, pair=pair)
    return spec


def _capture(data: dict, err, unknown, typed) -> Capture:
    """[capture]: capacity, clock, the launches written, and the recorder asked for."""
    cap_t = typed(data, "capture", dict, default={})
    if "staging" in cap_t:
        raise err("capture.staging is now written as `recorder`, `ring` and `warps`", "capture", "staging",
                  hint='staging = { events = E, warps = W } is recorder = "staged", ring = E, warps = W; '
                       'staging = { warps = W, resident = true } is recorder = "resident", warps = W; or drop it '
                       "and let the tool choose (docs/spec.md)")
    unknown(cap_t, CAPTURE_KEYS, "capture")
    recorder = typed(cap_t, "recorder", str, "capture", default="auto")
    if recorder not in RECORDERS:
        raise err(f"capture.recorder {recorder!r} is not one of {', '.join(RECORDERS)}", "capture", "recorder",
                  hint='"auto" (the default) lets the tool choose the recorder that keeps the kernel (docs/guide.md)')
    ring = typed(cap_t, "ring", int, "capture", default=0, lo=1, hi=32, unit=" events per warp")
    if ring and recorder not in ("auto", "staged"):
        raise err(f"capture.ring sizes the staged recorder's rings; recorder {recorder!r} has none of that size",
                  "capture", "ring", hint='drop `ring`, or set recorder = "staged"')
    return Capture(
        capacity=typed(cap_t, "capacity", int, "capture", default=64, lo=1, hi=1 << 20, unit=" events per owner"),
        clock=typed(cap_t, "clock", bool, "capture", default=False),
        skip=typed(cap_t, "skip", int, "capture", default=0, hi=I64),
        count=typed(cap_t, "count", int, "capture", default=1, hi=I64),
        recorder=recorder, ring=ring,
        warps=typed(cap_t, "warps", int, "capture", default=0, lo=1, hi=32, unit=" warps per CTA"),
        packed=typed(cap_t, "packed", bool, "capture", default=False),
        wide=typed(cap_t, "wide", bool, "capture", default=False),
    )


def _build(data: dict, err, unknown, typed) -> tuple[tuple[str, ...], str | None]:
    """[build]: the nvcc flags of the kernel's build (relative paths read from the spec's folder),
    and the translation unit that includes a header kernel and instantiates it (a template kernel
    exists only as some .cu instantiates it: the recorder choice compiles that one)."""
    build_t = typed(data, "build", dict, default={})
    unknown(build_t, BUILD_KEYS, "build")
    flags = typed(build_t, "nvcc_flags", list, "build", default=[])
    if not all(isinstance(f, str) and f and f.isprintable() for f in flags):
        raise err("build.nvcc_flags must list nvcc's flags as strings", "build", "nvcc_flags",
                  hint='e.g. nvcc_flags = ["-O3", "-gencode=arch=compute_90a,code=sm_90a", "-Iinclude"]')
    return tuple(flags), typed(build_t, "unit", str, "build", default=None)

def _kernel(data: dict, err, unknown, typed) -> tuple[str, int | None]:
    """`kernel = "name"` or `kernel = { name = "name", occurrence = N }` (the backend checks that the
    name reads as a name of its language)."""
    v = data.get("kernel")
    if isinstance(v, dict):
        unknown(v, KERNEL_KEYS, "kernel")
        name = typed(v, "name", str, "kernel", required=True)
        occurrence = typed(v, "occurrence", int, "kernel", lo=1)
    elif v is None or isinstance(v, str):
        name, occurrence = typed(data, "kernel", str, required=True), None
    else:
        raise err(f"kernel must be a name or a table, not {type(v).__name__}", "kernel",
                  hint='kernel = "slow::step", or kernel = { name = "step", occurrence = 2 }')
    return name, occurrence


def _launchers(data: dict, source: Path, path: Path, root: Path, where: str, lines, err,
               typed) -> tuple[Path, ...]:
    """`launchers = ["main.cu", ...]`: files besides the source whose launches of the kernel are
    captured (a kernel in a header, launched from a .cu that includes it)."""
    rels = typed(data, "launchers", list, default=[])
    out: list[Path] = []
    for rel in rels:
        if not isinstance(rel, str):
            raise err(f"launchers must list file paths (strings), not {rel!r}", "launchers",
                      hint='launchers = ["main.cu"], relative to the spec')
        p = confine(rel, path.parent, root, where, lines.of("launchers"))
        if p == source:
            raise err(f"launcher {rel!r} is the spec's source; its launches are captured anyway", "launchers",
                      hint="list only the other files that launch the kernel")
        if p in out:
            raise err(f"launcher {rel!r} is listed twice", "launchers")
        out.append(p)
    return tuple(out)


def with_recorder(path: Path, recorder: str, warps: int = 0, ring: int = 0, packed: bool = False) -> Path:
    """Write `<spec>_<recorder>[_packed].toml` next to a spec: the same spec under the name
    `<name>_<recorder>[_packed]` with `recorder`, `warps`, `ring` and `packed` set in its [capture]
    table, so recorders can be applied, built and measured side by side (bench/probe_cost,
    bench/perturbation, tests)."""
    path = Path(path).resolve()
    text = path.read_text()
    spec = parse_spec(text, path, None)
    if spec.capture.recorder != "auto" or (packed and spec.capture.packed):
        raise SpecError("the spec already names its recorder", path=str(path), line=spec.line_of("capture"))
    if "[capture]\n" not in text:
        text += "\n[capture]\n"
    kind = "_".join(k for k in ("" if recorder == "global" and packed else recorder, "packed" if packed else "") if k)
    name_line = next(line for line in text.splitlines() if line.startswith("name = "))
    text = text.replace(name_line, f'name = "{spec.name}_{kind}"', 1)
    keys = [f'recorder = "{recorder}"'] + ([f"ring = {ring}"] if ring else []) + (
        [f"warps = {warps}"] if warps else []) + (["packed = true"] if packed else [])
    text = text.replace("[capture]\n", "[capture]\n" + "".join(f"{k}\n" for k in keys), 1)
    out = path.with_name(f"{path.stem}_{kind}.toml")
    out.write_text(text)
    parse_spec(text, out, None)  # the copy must be a valid spec
    return out

def _parse_site(t, i, err, unknown, typed, lines, language: str) -> Site:
    k = ("site", i)
    if not isinstance(t, dict):
        raise err("each site must be a [[site]] table", *k)
    unknown(t, SITE_KEYS, *k)
    name = typed(t, "name", str, *k, required=True)
    if not NAME_RE.match(name):
        raise err(f"site name {name!r} must be an identifier (letters, digits, _ and .) of at most 32 characters",
                  *k, "name")
    a = typed(t, "anchor", dict, *k, required=True)
    kinds = [x for x in a if x in ANCHOR_KINDS]
    extra = [x for x in a if x not in ANCHOR_KINDS and x != "occurrence"]
    if extra or len(kinds) != 1:
        raise err(f"site {name!r}: anchor needs exactly one of {', '.join(ANCHOR_KINDS)} (plus optional occurrence)",
                  *k, "anchor", hint='e.g. anchor = { ptx = "wgmma.commit_group" }')
    kind = kinds[0]
    if kind in ("entry", "exit"):
        if a[kind] is not True:
            raise err(f"site {name!r}: write `anchor = {{ {kind} = true }}`", *k, "anchor")
        pattern = ""
    else:
        pattern = a[kind]
        if not isinstance(pattern, str) or not pattern.strip():
            raise err(f"site {name!r}: anchor {kind} must be a non-empty string", *k, "anchor")
    occ = typed(a, "occurrence", int, *k, "anchor", lo=1)
    position = typed(t, "position", str, *k, default={"entry": "entry", "exit": "exit"}.get(kind, "before"))
    if position not in ANCHOR_POSITIONS[kind]:
        raise err(f"site {name!r}: position {position!r} does not apply to a {kind} anchor", *k, "position",
                  hint=f"use one of: {', '.join(ANCHOR_POSITIONS[kind])}")
    role = typed(t, "role", str, *k, default="lane0")
    if role not in ROLE_NAMES:
        raise err(f"site {name!r}: role {role!r} is not one of {', '.join(ROLE_NAMES)}", *k, "role")
    predicate = typed(t, "predicate", str, *k)
    if (role == "predicate") != (predicate is not None):
        raise err(f"site {name!r}: `predicate` goes with role = \"predicate\" and only with it", *k, "role")
    exprs = {"predicate": predicate, "payload": typed(t, "payload", str, *k)}
    for key, expr in exprs.items():
        why = expression_problem(expr) if expr is not None else None
        if why:
            raise err(f"site {name!r}: {key} {expr!r} {why}", *k, key,
                      hint=f"write one {language} expression on one line; it is pasted into the generated code "
                           "as is")
    ctas = typed(t, "ctas", dict, *k, default={})
    unknown(ctas, CTAS_KEYS, *k, "ctas")
    stride = typed(ctas, "stride", int, *k, "ctas", default=1, lo=1)
    limit = typed(ctas, "limit", int, *k, "ctas", default=0)
    warps = typed(t, "warps", list, *k)
    if warps is not None:
        if not warps or not all(isinstance(w, int) and not isinstance(w, bool) and 0 <= w < 32 for w in warps):
            raise err(f"site {name!r}: warps must list warp indices 0..31", *k, "warps")
        warps = tuple(sorted(set(warps)))
    every = typed(t, "every", int, *k, default=1, lo=1)
    return Site(name=name, anchor=Anchor(kind, pattern, occ), position=position, role=Role(role), predicate=predicate,
                payload=exprs["payload"], cta_stride=stride, cta_limit=limit, warps=warps, every=every,
                line=lines.of(*k))


def confine(rel: str, base: Path, root: Path, where: str, line: int | None) -> Path:
    """Resolve a spec or manifest path and refuse anything outside the project tree, inside the
    tool's or git's own state, or not a regular file."""
    def refuse(msg: str, hint: str = "name a file inside the project, relative to the spec") -> SpecError:
        return SpecError(msg, path=where, line=line, hint=hint)

    if not isinstance(rel, str) or not rel or not rel.isprintable() or len(rel) > 4096:
        raise refuse(f"path {str(rel)[:80]!r} is empty, too long, or holds control characters")
    try:
        p = Path(rel)
        full = (p if p.is_absolute() else base / p).resolve()
        inside = full.relative_to(root)
    except ValueError:
        raise refuse(f"path {rel!r} leaves the project tree {root}",
                     hint="name a file inside the project; the tree's root is the nearest folder above the source "
                          "holding .git or .atrex (mkdir .atrex there), or pass --root") from None
    except OSError as e:
        raise refuse(f"path {rel!r} cannot be resolved: {e.strerror}") from None
    if NEVER_TARGETS & set(inside.parts):
        raise refuse(f"path {rel!r} is inside {'/'.join(NEVER_TARGETS & set(inside.parts))}/, which atrex-inject "
                     "and git own", hint="name the kernel source itself, not the tool's saved copies")
    try:
        regular = full.is_file()
    except OSError as e:
        raise refuse(f"path {rel!r} cannot be read: {e.strerror}") from None
    if not regular:
        raise refuse(f"source file {rel!r} does not exist ({full})")
    return full


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
