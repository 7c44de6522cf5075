"""Validation's rules for run-iket captures: what run-iket's log said about the run.

normalize.py keeps what the log reported lost in each launch's sidecar (`iket_log`, the same in
every launch of the run: the log names no launch); these rules count it once per run, under the
named checks it belongs to (registered through registry.CHECK_MODULES, checks.py).
"""
from __future__ import annotations

import json

from ..checks import Check, Folder, Route, Rule
from ..launchfile import IKET_LOG_LINE_CHARS


def _said(folder: Folder) -> dict[str, str]:
    """Each distinct thing the launches' sidecars say the log said (as sorted JSON; "null": no
    log), with the first launch that says it."""
    said_by: dict[str, str] = {}
    for l in folder.launches:
        said_by.setdefault(json.dumps(l.meta.sidecar.iket_log, sort_keys=True), l.name)
    return said_by


def _facts(folder: Folder) -> list[dict]:
    return [f for f in map(json.loads, _said(folder)) if f is not None]  # None: not run-iket, or no log


def _disagree(folder: Folder, check: Check) -> None:
    """Launches that disagree on what the log said were edited or mixed."""
    said_by = _said(folder)
    check.fail(max(len(said_by) - 1, 0), "launches disagree on what run-iket's log said (iket_log): "
                                         + ", ".join(said_by.values()))


def _dropped(folder: Folder, check: Check) -> None:
    """Warp records IKeT dropped (a warp emitted more events than maxTsCntPerWarp)."""
    for facts in _facts(folder):
        log, n = facts.get("file", "run-iket.log"), facts.get("dropped_warp_records", 0)
        limit = "maxTsCntPerWarp" + (f"={facts['max_ts_cnt_per_warp']}" if "max_ts_cnt_per_warp" in facts else "")
        check.fail(n, f"run-iket's log ({log}) says IKeT dropped {n} warp record(s) of kernel "
                      f"{folder.manifest.kernel!r} (warps emitted more events than {limit} allows): this run's "
                      "launches miss events; recapture, and if it repeats raise maxTsCntPerWarp "
                      "(run-iket --max-ts-cnt-per-warp) or thin the spec's sites")


def _incomplete(folder: Folder, check: Check) -> None:
    """Lines of the log saying IKeT's trace data is incomplete, was dropped or is unavailable."""
    for facts in _facts(folder):
        log = facts.get("file", "run-iket.log")
        k, first = facts.get("incomplete_lines", 0), (facts.get("incomplete") or ["?"])[0]
        check.fail(k, f"run-iket's log ({log}) has {k} line(s) saying IKeT's trace data is "
                      f"incomplete, first: {str(first)[:IKET_LOG_LINE_CHARS]!r}; recapture")


ROUTE = Route(rules=(Rule("cross_launch_mixing", "capture", _disagree), Rule("overflow", "capture", _dropped),
                     Rule("truncation", "capture", _incomplete)))
