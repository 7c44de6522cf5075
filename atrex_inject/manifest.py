"""The manifest (`.atrex/<name>/manifest.json`, docs/format.md) as typed, frozen objects.

`apply` builds one (snapshot.build_manifest) and writes `to_json()`; every later stage (revert,
decode, validate, summary, export, the picture, capture, the grade) reads it through `load()` or
`from_json()`, which check every field they read once, here, so a manifest that lacks one or has
the wrong type ends in a message naming the field (exit 2), never in a KeyError deep in decode.
Its shape is this file: renaming a field breaks the type checker and the round-trip test, not a
reader silently.

`to_json()` writes the keys in the order apply always wrote them, so `json.dumps(m.to_json(),
indent=2)` is byte-identical to the manifests apply wrote before these types existed. Fields a
manifest of an older tool version lacks take the defaults below (older CuTe DSL manifests have no
`capture.staging`); unknown keys are ignored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from . import registry, runrecord
from .causal_spec import KEYS as CAUSALITY_KEYS
from .causal_spec import Causality
from .choicerecord import Choice, mode_of_record
from .errors import AtrexError, SnapshotError
from .layout import EVENT_BYTES, MAX_GROUPS, U32, Role
from .plan import CaptureSettings, Group, Staging
from .spec import MAX_INTERVALS, Anchor, Interval

FORMAT = "atrex-manifest"
VERSION = 1
FILE_NAME = "manifest.json"
I64 = (1 << 63) - 1
NULL = type(None)  # in a field's kinds: the field may be null


@dataclass(frozen=True)
class FileRef:
    """A file the workspace keeps or the build used, by path (or name) and sha256."""
    path: str
    sha256: str


@dataclass(frozen=True)
class SourceIdentity:
    """The kernel source: its path in the project, its clean and instrumented hashes, and the
    source id its captures carry (source_id.py)."""
    path: str
    clean_sha256: str
    instrumented_sha256: str
    source_id: str


@dataclass(frozen=True)
class LauncherFile:
    """A file besides the source that apply rewrote (a launcher: docs/spec.md, "Launches"): its
    path in the project, its clean and instrumented hashes, and its clean copy and patch in the
    workspace."""
    path: str
    clean_sha256: str
    instrumented_sha256: str
    clean_copy: str
    patch: FileRef


@dataclass(frozen=True)
class PlacedSite:
    """A site as placed by the rewriter: its id (its order in the spec), group and lines."""
    id: int
    name: str
    role: Role
    group: int
    position: str = ""
    anchor: Anchor | None = None
    payload: str | None = None
    every: int = 1
    source_line: int = 0  # the anchor's line in the clean source
    instrumented_line: int = 0


@dataclass(frozen=True)
class IketRange:
    name: str  # the range's IKeT name: its start site's
    start_site: int
    end_site: int


@dataclass(frozen=True)
class IketMap:
    """How IKeT's event names map to site ids (cutedsl backend): run-iket reports names."""
    names: tuple[str, ...]
    ranges: tuple[IketRange, ...]
    marks: dict[str, int]


@dataclass(frozen=True)
class StripMined:
    line: int
    every: int
    sites: tuple[str, ...]
    trip: int = 0  # staged rings: iterations per trip (the ring copied out before the first and after each); 0 = none


@dataclass(frozen=True)
class NotStripMined:
    sites: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Perturbation:
    """How the CUDA rewriter kept the clean kernel for launches and CTAs that record nothing
    (docs/design.md): the instrumented copy's name, and how its body is versioned."""
    clone: str | None  # KERNEL__atrex, launched only while recording (None in older manifests)
    versioned: bool
    not_versioned_because: str | None
    strip_mined: tuple[StripMined, ...]
    not_strip_mined: tuple[NotStripMined, ...]


@dataclass(frozen=True)
class Manifest:
    backend: str
    name: str
    kernel: str
    source: SourceIdentity
    clean_copy: str  # the clean copy's path inside the workspace
    patch: FileRef
    capture: CaptureSettings
    groups: tuple[Group, ...]
    sites: tuple[PlacedSite, ...]
    intervals: tuple[Interval, ...]
    expect: dict[str, int]  # events per owner per site
    applied_utc: str
    tool_version: str = ""
    question: str = ""
    spec: FileRef | None = None
    runtime: FileRef | None = None  # the recorder header: `path` is its file name
    launches: tuple[dict, ...] = ()  # launch statements the rewriter wrapped, as it describes them
    not_captured: tuple[dict, ...] = ()  # launches (or uses of the kernel's address) left without a session
    launchers: tuple[LauncherFile, ...] = ()  # other files apply rewrote
    warnings: tuple[str, ...] = ()
    spans: dict[str, int] = field(default_factory=dict)  # interval name -> iterations it spans, where more than one
    pair: tuple[str, ...] = ()  # the spec's `pair`: two intervals the question weighs against each other
    causality: tuple[Causality, ...] = ()  # the spec's [[causality]]: consumer sites observing producer sites' writes
    recorder: Choice | None = None  # the recorder choice and its evidence; older manifests: none
    perturbation: Perturbation | None = None  # cuda backend
    iket: IketMap | None = None  # cutedsl backend
    version: int = VERSION

    # ---- lookups ----
    @cached_property
    def site_ids(self) -> dict[str, int]:
        return {s.name: s.id for s in self.sites}

    def site(self, name: str) -> PlacedSite:
        return self.sites[self.site_ids[name]]

    @cached_property
    def site_group(self) -> tuple[int, ...]:
        """Site id -> group id."""
        return tuple(s.group for s in self.sites)

    @cached_property
    def endpoint_ids(self) -> frozenset[int]:
        """Sites that start or end an interval (the others are marks)."""
        return frozenset(i for iv in self.intervals for i in (iv.start_id, iv.end_id))

    @cached_property
    def endpoint_names(self) -> frozenset[str]:
        return frozenset(self.sites[i].name for i in self.endpoint_ids)

    def role_of_group(self, group: int) -> Role:
        return self.groups[group].role

    # ---- JSON ----
    def to_json(self) -> dict:
        """The manifest as apply writes it (docs/format.md), keys in apply's order."""
        c = self.capture
        out = {
            "format": FORMAT, "version": self.version, "tool_version": self.tool_version, "backend": self.backend,
            "name": self.name, "question": self.question, **({"pair": list(self.pair)} if self.pair else {}),
            "kernel": self.kernel,
            "spec": _ref(self.spec, "path"),
            "source": {"path": self.source.path, "clean_sha256": self.source.clean_sha256,
                       "instrumented_sha256": self.source.instrumented_sha256, "source_id": self.source.source_id},
            "clean_copy": self.clean_copy,
            "patch": _ref(self.patch, "path"),
            "runtime": _ref(self.runtime, "header"),
            "capture": {"capacity": c.capacity, "clock": c.clock, "skip": c.skip, "count": c.count,
                        "event_bytes": c.event_bytes,
                        "staging": c.staging and {"events": c.staging.events, "warps": c.staging.warps,
                                                  "shared_bytes_per_cta": c.staging.shared_bytes_per_cta,
                                                  **({"resident": True} if c.staging.resident else {})}},
            **({"recorder": self.recorder.to_json()} if self.recorder is not None else {}),
            "groups": [{"id": g.id, "role": g.role.value, "role_code": g.role.code, "cta_stride": g.cta_stride,
                        "cta_limit": g.cta_limit, "warp_mask": g.warp_mask, "predicate": g.predicate}
                       for g in self.groups],
            "sites": [{"id": s.id, "name": s.name, "role": s.role.value, "group": s.group, "position": s.position,
                       "anchor": s.anchor and {"kind": s.anchor.kind, "pattern": s.anchor.pattern,
                                               "occurrence": s.anchor.occurrence},
                       "payload": s.payload, "every": s.every, "source_line": s.source_line,
                       "instrumented_line": s.instrumented_line} for s in self.sites],
            "intervals": [{"name": iv.name, "start": iv.start, "end": iv.end,
                           **({"spans": self.spans[iv.name]} if iv.name in self.spans else {})} for iv in self.intervals],
            "expect": dict(self.expect),
            **({"causality": [c.to_json() for c in self.causality]} if self.causality else {}),
            "launches": [dict(x) for x in self.launches],
        }
        # written when not empty, so a manifest from before them reads back byte for byte
        if self.not_captured:
            out["not_captured"] = [dict(x) for x in self.not_captured]
        if self.launchers:
            out["launchers"] = [{"path": f.path, "clean_sha256": f.clean_sha256,
                                 "instrumented_sha256": f.instrumented_sha256, "clean_copy": f.clean_copy,
                                 "patch": _ref(f.patch, "path")} for f in self.launchers]
        out["warnings"] = list(self.warnings)
        if self.perturbation is not None:
            p = self.perturbation
            out["perturbation"] = {
                "clone": p.clone, "versioned": p.versioned, "not_versioned_because": p.not_versioned_because,
                "strip_mined": [{"line": s.line, "every": s.every, "sites": list(s.sites),
                                 **({"trip": s.trip} if s.trip else {})} for s in p.strip_mined],
                "not_strip_mined": [{"sites": list(s.sites), "reason": s.reason} for s in p.not_strip_mined]}
        if self.iket is not None:
            out["iket"] = {"names": list(self.iket.names),
                           "ranges": [{"name": r.name, "start_site": r.start_site, "end_site": r.end_site}
                                      for r in self.iket.ranges],
                           "marks": dict(self.iket.marks)}
        out["applied_utc"] = self.applied_utc
        return out

    def dumps(self) -> str:
        """The file's text: what apply writes and what a copy of the manifest holds."""
        return json.dumps(self.to_json(), indent=2) + "\n"

    @classmethod
    def from_json(cls, obj: Any, where: str) -> "Manifest":
        """A parsed manifest.json, every field the tools read checked; `where` names it in messages."""
        return _parse(obj, where)


def _ref(r: FileRef | None, key: str) -> dict | None:
    return None if r is None else {key: r.path, "sha256": r.sha256}


def load(path: str | Path) -> Manifest:
    """A manifest file under any name (the workspace's, or a copy next to a capture)."""
    p = Path(path)
    try:
        obj = json.loads(p.read_bytes())
    except (OSError, ValueError, RecursionError) as e:
        raise SnapshotError(f"manifest {p} is unreadable: {getattr(e, 'strerror', None) or e}",
                            hint="restore it from history or remove the workspace") from None
    return _parse(obj, str(p))


def load_if_present(path: str | Path) -> Manifest | None:
    """load(), or None when there is no file (a workspace not applied)."""
    return load(path) if Path(path).exists() else None


def for_capture(capture_dir: str | Path | None, manifest: str | Path | None = None) -> Manifest:
    """The manifest a capture is read with: `manifest` when given, else CAPTURE_DIR/manifest.json
    (what `atrex-inject capture` copies in)."""
    if manifest is None and (capture_dir is None or not Path(capture_dir).is_dir()):
        raise AtrexError(f"capture folder {capture_dir} does not exist",
                         hint="give the folder the program wrote with ATREX_TIMELINE_OUT")
    path = Path(manifest) if manifest is not None else Path(capture_dir) / FILE_NAME
    m = load_if_present(path)
    if m is None:
        raise _no_manifest(path, None if manifest is not None else Path(capture_dir))
    return m


def _pair(top: "_Obj", intervals: list[Interval]) -> tuple[str, ...]:
    """The manifest's `pair`: absent, or two of its intervals' names."""
    pair = top.get("pair", list, [])
    if pair and (len(pair) != 2 or not all(n in {iv.name for iv in intervals} for n in pair)):
        raise top.bad(f"pair {pair!r} does not name two of the manifest's intervals")
    return tuple(pair)


def _no_manifest(path: Path, capture_dir: Path | None) -> AtrexError:
    """Why a capture folder has no manifest, as far as the folder says: its capture failed, or it
    holds captures in subfolders, or it was written without `atrex-inject capture`."""
    failed = runrecord.failure(capture_dir) if capture_dir else None
    if failed:
        return AtrexError(f"the capture into {capture_dir} failed, so it holds no capture: {failed}",
                          hint="fix that, then run `atrex-inject capture` again into this folder")
    inner = sorted(p.parent for p in capture_dir.glob(f"*/{FILE_NAME}")) if capture_dir else []
    if inner:
        return AtrexError(f"{capture_dir} is not a capture: it holds {len(inner)} capture folder(s), "
                          + ", ".join(str(p) for p in inner), hint=f"give one of them, e.g. {inner[0]}")
    return AtrexError(f"no manifest at {path}", hint="pass --manifest .atrex/<spec name>/manifest.json")


# ---- checked reading ----------------------------------------------------------------------------
class _Obj:
    """One JSON object of the manifest, read field by field with its type checked; `label` is its
    path (`sites[2]`) for messages."""

    def __init__(self, obj: Any, label: str, bad: Callable[[str], SnapshotError]):
        if not isinstance(obj, dict):
            raise bad(f"{label or 'the manifest'} is not a JSON object")
        self.obj, self.label, self.bad = obj, label, bad

    def _name(self, key: str) -> str:
        return f"{self.label + '.' if self.label else ''}{key}"

    def get(self, key: str, kind, default: Any = ..., hi: int = U32):
        """obj[key] of type `kind` (an int in 0..hi); `default` when absent (... : required).
        `kind` may be a tuple that includes NULL for a nullable field."""
        if key not in self.obj:
            if default is ...:
                raise self.bad(f"field {self._name(key)} is missing or not a {_kind_name(kind)}")
            return default
        v = self.obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
            raise self.bad(f"field {self._name(key)} is missing or not a {_kind_name(kind)}")
        if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= hi:
            raise self.bad(f"field {self._name(key)} = {v} is outside 0..{hi}")
        return v

    def sub(self, key: str, default: Any = ...) -> "_Obj | None":
        v = self.get(key, (dict, NULL) if default is None else dict, default)
        return None if v is None else _Obj(v, self._name(key), self.bad)

    def items(self, key: str, default: Any = ...) -> list["_Obj"]:
        return [_Obj(x, f"{self._name(key)}[{i}]", self.bad) for i, x in enumerate(self.get(key, list, default))]

    def strings(self, key: str, default: Any = ...) -> tuple[str, ...]:
        v = self.get(key, list, default)
        if not all(isinstance(x, str) for x in v):
            raise self.bad(f"field {self._name(key)} must list strings")
        return tuple(v)


def _kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("null" if k is NULL else k.__name__ for k in kinds)


def _role(o: _Obj, key: str) -> Role:
    word = o.get(key, str)
    try:
        return Role(word)
    except ValueError:
        raise o.bad(f"field {o._name(key)} = {word!r} is not a role ({', '.join(Role)})") from None


def _refusal(where: str) -> Callable[[str], SnapshotError]:
    def bad(msg: str) -> SnapshotError:
        return SnapshotError(f"manifest {where}: {msg}",
                             hint="apply the spec again, or restore the manifest from .atrex/history/")
    return bad


def perturbation_of(obj: dict | None) -> Perturbation | None:
    """A rewriter's perturbation record (Rewrite.backend_data, manifest JSON form), typed."""
    return None if obj is None else _perturbation(_Obj(obj, "perturbation", _refusal("being built")))


def iket_of(obj: dict | None, n_sites: int) -> IketMap | None:
    """A rewriter's IKeT name map (Rewrite.backend_data, manifest JSON form), typed."""
    return None if obj is None else _iket(_Obj(obj, "iket", _refusal("being built")), n_sites)


def _parse(obj: Any, where: str) -> Manifest:
    bad = _refusal(where)
    top = _Obj(obj, "", bad)
    if top.get("format", str) != FORMAT:
        raise bad("not an atrex manifest")
    version = top.get("version", int, VERSION)
    if version != VERSION:
        raise bad(f"manifest version {version}; this tool reads version {VERSION}")
    backend = top.get("backend", str)
    if backend not in registry.names():
        raise bad(f"backend {backend!r} is not one of {', '.join(registry.names())}")
    src, pat, cap = top.sub("source"), top.sub("patch"), top.sub("capture")
    stage = cap.sub("staging", None)
    capture = CaptureSettings(
        capacity=cap.get("capacity", int), event_bytes=cap.get("event_bytes", int), clock=cap.get("clock", bool, False),
        skip=cap.get("skip", int, 0, hi=I64), count=cap.get("count", int, 1, hi=I64),
        staging=stage and Staging(stage.get("events", int), stage.get("warps", int),
                                  stage.get("shared_bytes_per_cta", int), stage.get("resident", bool, False)))
    groups = tuple(Group(g.get("id", int, i), _group_role(g), g.get("cta_stride", int), g.get("cta_limit", int),
                         g.get("warp_mask", int), g.get("predicate", (str, NULL), None))
                   for i, g in enumerate(top.items("groups")))
    sites = []
    for s in top.items("sites"):
        a = s.sub("anchor", None)
        sites.append(PlacedSite(
            id=s.get("id", int), name=s.get("name", str), role=_role(s, "role"), group=s.get("group", int),
            position=s.get("position", str, ""),
            anchor=a and Anchor(a.get("kind", str), a.get("pattern", str), a.get("occurrence", (int, NULL), None)),
            payload=s.get("payload", (str, NULL), None), every=s.get("every", int, 1),
            source_line=s.get("source_line", int, 0), instrumented_line=s.get("instrumented_line", int, 0)))
    if capture.event_bytes not in EVENT_BYTES or capture.capacity < 1 or any(g.cta_stride < 1 for g in groups):
        raise bad("capture.event_bytes must be 4, 8 or 16, capture.capacity and every group's cta_stride >= 1")
    if not 1 <= len(groups) <= MAX_GROUPS:
        raise bad(f"{len(groups)} owner groups; a launch header holds 1 to {MAX_GROUPS}")
    ids = {s.name: s.id for s in sites}
    if [s.id for s in sites] != list(range(len(sites))) or not all(0 <= s.group < len(groups) for s in sites):
        raise bad("site ids are not 0, 1, 2, ... or a site names a group that does not exist")
    intervals, spans = [], {}
    for iv in top.items("intervals"):
        name, a, b = iv.get("name", str), iv.get("start", str), iv.get("end", str)
        if iv.get("spans", int, 1) > 1:
            spans[f"{a} -> {b}"] = iv.get("spans", int)
        for site in (a, b):
            if site not in ids:
                raise bad(f"interval {name!r} names unknown site {site!r}")
        intervals.append(Interval(a, b, ids[a], ids[b]))
    if len(intervals) > MAX_INTERVALS:
        raise bad(f"{len(intervals)} intervals; at most {MAX_INTERVALS} (the spec refuses more)")
    expect = top.get("expect", dict)
    for k, v in expect.items():
        if k not in ids:
            raise bad(f"expect names unknown site {k!r}")
        if not isinstance(v, int) or isinstance(v, bool):
            raise bad("expect counts must be integers")
    return Manifest(
        backend=backend, name=top.get("name", str), kernel=top.get("kernel", str),
        source=SourceIdentity(src.get("path", str), src.get("clean_sha256", str), src.get("instrumented_sha256", str),
                              src.get("source_id", str)),
        clean_copy=top.get("clean_copy", str), patch=FileRef(pat.get("path", str), pat.get("sha256", str)),
        capture=capture, groups=groups, sites=tuple(sites), intervals=tuple(intervals), expect=dict(expect),
        applied_utc=top.get("applied_utc", str), tool_version=top.get("tool_version", str, ""),
        question=top.get("question", str, ""), spec=_file_ref(top, "spec", "path"),
        runtime=_file_ref(top, "runtime", "header"),
        launches=tuple(dict(x.obj) for x in top.items("launches", [])),
        not_captured=tuple(_not_captured(x) for x in top.items("not_captured", [])),
        launchers=tuple(_launcher(x) for x in top.items("launchers", [])),
        warnings=top.strings("warnings", ()),
        spans=spans, pair=_pair(top, intervals), causality=_causality(top, ids), recorder=_recorder(top, capture),
        perturbation=_perturbation(top.sub("perturbation", None)), iket=_iket(top.sub("iket", None), len(sites)),
        version=version)


def _causality(top: _Obj, ids: dict[str, int]) -> tuple[Causality, ...]:
    """The manifest's `causality` (absent: none): its consumer a site of the manifest, and its
    producer too unless another spec holds it."""
    out = []
    for c in top.items("causality", []):
        one = Causality(c.get("producer", str), c.get("consumer", str), c.get("key", str),
                        c.get("producer_spec", (str, NULL), None))
        if one.key not in CAUSALITY_KEYS or one.consumer not in ids or (one.producer_spec is None
                                                                          and one.producer not in ids):
            raise top.bad(f"causality {one.name!r}: key must be one of {', '.join(CAUSALITY_KEYS)} and its sites the "
                          "manifest's (the producer another spec's where producer_spec names it)")
        out.append(one)
    return tuple(out)


def _recorder(top: _Obj, capture: CaptureSettings) -> Choice | None:
    """The recorder choice (choicerecord.Choice.to_json's record), its mode the capture settings'
    on the record's path and register cap."""
    rec = top.get("recorder", (dict, NULL), None)
    try:
        return None if rec is None else Choice.from_json(rec, mode_of_record(rec, capture.mode))
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise top.bad(f"field recorder is not a recorder choice ({type(e).__name__} {e})") from None


def _group_role(g: _Obj) -> Role:
    """A group's role: its name, which must agree with its header code."""
    code = g.get("role_code", int)
    role = _role(g, "role") if "role" in g.obj else next((r for r in Role if r.code == code), None)
    if role is None or role.code != code:
        raise g.bad(f"field {g._name('role_code')} = {code} is not the code of role {g.obj.get('role')!r}")
    return role


def _file_ref(top: _Obj, key: str, path_key: str) -> FileRef | None:
    r = top.sub(key, None)
    return r and FileRef(r.get(path_key, str), r.get("sha256", str))


def _not_captured(n: _Obj) -> dict:
    """A launch left without a session, as the rewriter described it (validate and status read these)."""
    return {"file": n.get("file", str), "line": n.get("line", int), "via": n.get("via", str),
            "reason": n.get("reason", str), "hint": n.get("hint", str)}


def _launcher(f: _Obj) -> LauncherFile:
    p = f.sub("patch")
    return LauncherFile(f.get("path", str), f.get("clean_sha256", str), f.get("instrumented_sha256", str),
                        f.get("clean_copy", str), FileRef(p.get("path", str), p.get("sha256", str)))


def _perturbation(p: _Obj | None) -> Perturbation | None:
    if p is None:
        return None
    return Perturbation(
        clone=p.get("clone", (str, NULL), None), versioned=p.get("versioned", bool),
        not_versioned_because=p.get("not_versioned_because", (str, NULL)),
        strip_mined=tuple(StripMined(s.get("line", int), s.get("every", int), s.strings("sites"), s.get("trip", int, 0))
                          for s in p.items("strip_mined")),
        not_strip_mined=tuple(NotStripMined(s.strings("sites"), s.get("reason", str))
                              for s in p.items("not_strip_mined")))


def _iket(k: _Obj | None, n_sites: int) -> IketMap | None:
    if k is None:
        return None
    ranges = tuple(IketRange(r.get("name", str), r.get("start_site", int), r.get("end_site", int))
                   for r in k.items("ranges"))
    marks = k.get("marks", dict)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in marks.values()) or not all(
            0 <= i < n_sites for i in [*marks.values(), *(x for r in ranges for x in (r.start_site, r.end_site))]):
        raise k.bad("iket.marks and iket.ranges must name site ids of the manifest")
    return IketMap(k.strings("names"), ranges, dict(marks))
