"""The probe plan: the spec's sites with stable ids and their owner groups, backend-neutral.

Site ids are the sites' order in the spec; group ids the order in which a (role, density,
predicate) combination first appears. Both are written to the manifest and read by decode.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .spec import ProbeSpec, Site

ROLE_CODES = {"thread": 0, "lane0": 1, "warpgroup": 2, "cta": 3, "predicate": 4}


@dataclass(frozen=True)
class Group:
    id: int
    role: str
    cta_stride: int
    cta_limit: int
    warp_mask: int
    predicate: str | None

    def to_json(self) -> dict:
        return {"id": self.id, "role": self.role, "role_code": ROLE_CODES[self.role], "cta_stride": self.cta_stride,
                "cta_limit": self.cta_limit, "warp_mask": self.warp_mask, "predicate": self.predicate}


@dataclass(frozen=True)
class Plan:
    spec: ProbeSpec
    groups: tuple[Group, ...]
    site_group: tuple[int, ...]  # site id -> group id

    @property
    def wide_events(self) -> bool:
        """16-byte events when any site carries a payload or the clock is recorded; else 8 bytes."""
        return self.spec.capture.clock or any(s.payload for s in self.spec.sites)

    @property
    def event_bytes(self) -> int:
        return 16 if self.wide_events else 8

    @property
    def staging(self) -> dict | None:
        """Shared-memory staging (spec [capture] staging): each group keeps warps + 1 rings of
        `events` slots (the extra ring absorbs warps past `warps`); its footprint is per CTA."""
        c = self.spec.capture
        if not c.staging_events:
            return None
        per_group = (c.staging_warps + 1) * c.staging_events * self.event_bytes
        return {"events": c.staging_events, "warps": c.staging_warps,
                "shared_bytes_per_cta": per_group * len(self.groups)}

    def group_of(self, site: Site) -> Group:
        return self.groups[self.site_group[self.spec.site_id(site.name)]]


def make_plan(spec: ProbeSpec) -> Plan:
    keys: list[tuple] = []
    site_group = []
    for s in spec.sites:
        if s.group_key not in keys:
            keys.append(s.group_key)
        site_group.append(keys.index(s.group_key))
    groups = tuple(Group(i, *k) for i, k in enumerate(keys))
    return Plan(spec, groups, tuple(site_group))


@dataclass
class SitePlacement:
    """Where a backend placed a site: what the manifest's site table records."""
    site: Site
    site_id: int
    source_line: int  # line of the anchor in the clean source
    instrumented_line: int = 0


@dataclass
class Rewrite:
    """A backend rewriter's result; snapshot.apply turns it into the patch, manifest and writes."""
    text: str  # the instrumented source
    source_id: str  # what captures carry to name their source (docs/format.md)
    placements: list[SitePlacement]
    launches: list[dict]
    warnings: list[str] = field(default_factory=list)
    backend_data: dict = field(default_factory=dict)  # e.g. the IKeT event map, kept in the manifest
    not_captured: list[dict] = field(default_factory=list)  # launches (or may-be launches) left without capture
    launchers: dict[str, str] = field(default_factory=dict)  # other files rewritten: rel path -> their new text
