"""The probe plan: the spec's sites with stable ids and their owner groups, backend-neutral.

Site ids are the sites' order in the spec; group ids the order in which a (role, density,
predicate) combination first appears. apply builds the plan once and hands it to the backend's
rewriter and to the manifest, which records both for decode.
"""
from __future__ import annotations

from dataclasses import dataclass

from .layout import staging_bytes
from .manifest import Group, Staging
from .spec import ProbeSpec, Site


@dataclass(frozen=True)
class Plan:
    spec: ProbeSpec
    groups: tuple[Group, ...]
    site_group: tuple[int, ...]  # site id -> group id

    @property
    def wide_events(self) -> bool:
        """16-byte events when any site carries a payload or the clock is recorded."""
        return self.spec.capture.clock or any(s.payload for s in self.spec.sites)

    @property
    def event_bytes(self) -> int:
        """An event in the capture buffer: 16 bytes wide, 4 packed (spec [capture] packed), else 8."""
        return 16 if self.wide_events else 4 if self.spec.capture.packed else 8

    @property
    def slot_bytes(self) -> int:
        """A staging ring's slot in shared memory: packed events are packed when copied out, so 8."""
        return 16 if self.wide_events else 8

    @property
    def staging(self) -> Staging | None:
        """Shared-memory staging (spec [capture] staging): each group keeps warps + 1 rings of
        `events` slots (the extra ring absorbs warps past `warps`); its footprint is per CTA."""
        c = self.spec.capture
        if not c.staging_events:
            return None
        return Staging(c.staging_events, c.staging_warps,
                       staging_bytes(c.staging_events, c.staging_warps, self.slot_bytes, self.groups,
                                     c.staging_resident), c.staging_resident)

    def group_of(self, site: Site) -> Group:
        return self.groups[self.site_group[self.spec.site_id(site.name)]]


def make_plan(spec: ProbeSpec) -> Plan:
    keys: list[tuple] = []
    site_group = []
    for s in spec.sites:
        if s.group_key not in keys:
            keys.append(s.group_key)
        site_group.append(keys.index(s.group_key))
    groups = tuple(Group.of_key(i, k) for i, k in enumerate(keys))
    return Plan(spec, groups, tuple(site_group))
