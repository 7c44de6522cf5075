"""The format-defined outputs of every committed capture stay what they were when recorded in
tests/fixtures/h200/golden.json: the files `decode` saves, the `summary` and `validate` JSON, and
the content of the default Perfetto export (each track's events with resolved names and times,
read back by tests/pftrace.py: the encoding may change, what the UI shows may not). Speed work on
decode, validate, summary and export must keep them.

    python tests/test_golden.py --update   # after scripts/update_fixtures.py re-records the captures
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from conftest import cli, sha  # noqa: E402
from pftrace import by_track, read  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "h200"
GOLDEN = FIX / "golden.json"
CAPTURES = sorted(d.name for d in FIX.iterdir() if (d / "manifest.json").exists() and any(d.glob("*.atrex")))


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _json(*args) -> dict:
    code, out = cli(*args, "--json")
    assert code in (0, 1), out
    return json.loads(out)


def outputs(name: str, tmp: Path) -> dict:
    """Digests of what the CLI writes for one capture folder."""
    d = FIX / name
    decoded = _json("decode", d, "--out", tmp / "decoded")
    for row in decoded["launches"]:
        row.pop("saved")
    saved = {str(p.relative_to(tmp)): sha(p) for p in sorted((tmp / "decoded").rglob("*")) if p.is_file()}
    code, out = cli("export", d, "--perfetto", tmp / "t.pftrace")
    assert code == 0, out
    tracks, events = read(tmp / "t.pftrace")
    content = {"tracks": {str(u): t.SerializeToString(deterministic=True).hex() for u, t in sorted(tracks.items())},
               "events": {str(u): [(e.ts, e.type, e.name, e.annotations, e.counter) for e in evs]
                          for u, evs in sorted(by_track(events).items())}}
    return {"atrex_sha256": {p.name: sha(p) for p in sorted(d.glob("*.atrex"))},
            "decode_json": _digest(decoded), "decode_files": saved, "summary": _digest(_json("summary", d)),
            "validate": _digest(_json("validate", d)), "export_content": _digest(content),
            "export_events": len(events)}


@pytest.mark.parametrize("name", CAPTURES)
def test_outputs_equal_the_recorded_ones(name, tmp_path):
    want = json.loads(GOLDEN.read_text())[name]
    got = outputs(name, tmp_path)
    assert got["atrex_sha256"] == want["atrex_sha256"], \
        f"{name}: the capture was re-recorded; run `python tests/test_golden.py --update` on code whose outputs you trust"
    for k in want:
        assert got[k] == want[k], f"{name}: {k} changed"


def test_every_capture_has_recorded_outputs():
    assert sorted(json.loads(GOLDEN.read_text())) == CAPTURES


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    import tempfile

    with tempfile.TemporaryDirectory() as t:
        rec = {n: outputs(n, Path(t) / n) for n in CAPTURES}
    GOLDEN.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    print(f"{GOLDEN}: {len(rec)} captures")
