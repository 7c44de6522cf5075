"""What a spec declares about causality (`[[causality]]`, docs/spec.md, "Causality"): a consumer
site whose events observe a producer site's write, and which events observe which.

Events of two owners, kernels or devices are ordered by nothing the recorder sees; the program
orders them (a barrier, a flag in memory). The spec says where: the producer site stands before the
write that publishes (a flag store, a barrier arrival), the consumer site after the wait that sees
it, so on a correct timeline no consumer event precedes the producer events it observes.
`causality.py` checks that; this module reads the declaration from the spec and the manifest.

`key` says which producer events a consumer event observes:
- "cta": the k-th event of an owner at the consumer site observes the k-th event of every owner
  of the same CTA at the producer site (a CTA barrier, a flag every warp raises), in one launch;
- "payload": an event observes every producer event recorded with the same payload (a tile index
  the producer publishes and the consumer waited for), in the launches of the same launch number
  (each kernel's N-th launch: the launches running together). Both sites record a payload.
The producer may be a site of another applied spec (`producer_spec`), captured in the same run
(key "payload" only: a CTA of one kernel is not a CTA of another).
"""
from __future__ import annotations

from dataclasses import dataclass

from .spec_table import Table

KEYS = ("cta", "payload")
CAUSALITY_KEYS = {"producer", "consumer", "key", "producer_spec"}


@dataclass(frozen=True)
class Causality:
    producer: str  # a site name, of this spec or of producer_spec
    consumer: str  # a site of this spec
    key: str  # one of KEYS
    producer_spec: str | None = None  # the name of the applied spec holding the producer site; None: this one

    @property
    def name(self) -> str:
        return f"{self.producer_spec + '.' if self.producer_spec else ''}{self.producer} => {self.consumer}"

    def to_json(self) -> dict:
        return {"producer": self.producer, "consumer": self.consumer, "key": self.key,
                **({"producer_spec": self.producer_spec} if self.producer_spec else {})}


def parse(top: Table, sites: dict[str, str | None], spec_name: str, name_ok) -> tuple[Causality, ...]:
    """The spec's `[[causality]]` tables; `sites` maps each site's name to its payload expression
    (None: no payload), `name_ok` tells a spec name."""
    raw = top.get("causality", list, [])
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            raise top.error("each causality must be a [[causality]] table", "causality", i)
        out.append(_one(Table(t, ("causality", i), top.file), sites, spec_name, name_ok))
    return tuple(out)


def _one(t: Table, sites: dict[str, str | None], spec_name: str, name_ok) -> Causality:
    t.refuse_unknown(CAUSALITY_KEYS)
    producer, consumer = t.require("producer", str), t.require("consumer", str)
    key = t.get("key", str, "payload")
    other = t.get("producer_spec", str)
    listed = ", ".join(sites)
    if key not in KEYS:
        raise t.error(f"causality key {key!r} is not one of {', '.join(KEYS)}", "key",
                      hint='"cta": a barrier or flag within a CTA; "payload": events matched by the payload both record')
    if consumer not in sites:
        raise t.error(f"causality consumer {consumer!r} is not a site of this spec", "consumer", hint=f"sites: {listed}")
    if other is not None and (other == spec_name or not name_ok(other)):
        raise t.error(f"producer_spec {other!r} must name another spec (its `name`)", "producer_spec",
                      hint="leave producer_spec out for a producer site of this spec")
    if other is None and producer not in sites:
        raise t.error(f"causality producer {producer!r} is not a site of this spec", "producer",
                      hint=f"sites: {listed}; a site of another spec captured in the same run needs producer_spec")
    if other is None and producer == consumer:
        raise t.error(f"causality producer and consumer are the same site {producer!r}", "consumer")
    if key == "cta" and other is not None:
        raise t.error("key \"cta\" relates owners of one CTA, which a producer of another kernel is not", "key",
                      hint='key = "payload": the consumer and producer record the value they hand over')
    if key == "payload":
        for role, site in (("consumer", consumer), ("producer", producer if other is None else None)):
            if site is not None and sites[site] is None:
                raise t.error(f"causality {role} site {site!r} records no payload, which key \"payload\" matches on",
                              role, hint=f"give site {site!r} `payload = ...` (the tile or slot index it hands over)")
    return Causality(producer, consumer, key, other)
