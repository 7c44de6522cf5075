"""A spec's variant under one recorder (spec.with_recorder): what it sets, and its one serialiser.

The variant is written as text, next to the spec, because it is used as a spec file: apply,
capture, check-sass and measure read it by path, in other processes too (bench/, the GPU hosts'
scripts), and its bytes are the spec's identity there (the manifest's spec sha256, the recorder
choice's cache key). So the serialiser edits the spec's own text at the lines the parser found
and keeps every other byte, comments included, rather than writing the parsed spec out anew."""
from __future__ import annotations

from dataclasses import dataclass

from .spec_table import KeyLines


@dataclass(frozen=True)
class RecorderVariant:
    """The [capture] keys a variant sets: the recorder, and its warps, ring and packed events."""
    recorder: str  # one of spec.RECORDERS but "auto"
    warps: int = 0  # 0: not written
    ring: int = 0  # 0: not written
    packed: bool = False

    @property
    def kind(self) -> str:
        """The variant's suffix, of its spec's name and file: `staged`, `resident_packed`, and
        `packed` for the global recorder's packed events."""
        words = ("" if self.recorder == "global" and self.packed else self.recorder, "packed" if self.packed else "")
        return "_".join(w for w in words if w)

    def capture_keys(self) -> list[str]:
        """Its [capture] lines, in the order they are written."""
        return [f'recorder = "{self.recorder}"'] + ([f"ring = {self.ring}"] if self.ring else []) + (
            [f"warps = {self.warps}"] if self.warps else []) + (["packed = true"] if self.packed else [])


def variant_text(text: str, name: str, variant: RecorderVariant) -> str:
    """`text`, a spec named `name`, as the variant: its top-level `name` line renamed
    `<name>_<kind>`, the variant's keys written first in its [capture] table (a [capture] table
    appended where the spec has none as a header)."""
    return capture_variant(text, f"{name}_{variant.kind}", variant.capture_keys())


def capture_variant(text: str, name: str, keys: list[str]) -> str:
    """`text` with its top-level `name` line set to `name` and `keys` (TOML lines `key = value`)
    set in its [capture] table: a key the table already has takes the new line where it stands, the
    others are written first in the table (a [capture] table appended where the spec has none as a
    header). What the benchmarks' other variants use too (a clock, a block size)."""
    if ("capture",) not in KeyLines(text).headers:
        text += "\n[capture]\n"
    lines = KeyLines(text)
    rows = text.split("\n")
    cr = lambda row: "\r" if row.endswith("\r") else ""  # noqa: E731
    at_name, at_capture = lines.of("name") - 1, lines.headers[("capture",)] - 1
    rows[at_name] = f'name = "{name}"{cr(rows[at_name])}'
    new = []
    for key_line in keys:
        at = lines.lines.get(("capture", KeyLines.KEY.match(key_line).group(1)))
        if at is None:
            new.append(key_line)
        else:
            rows[at - 1] = key_line + cr(rows[at - 1])
    rows[at_capture + 1:at_capture + 1] = new
    return "\n".join(rows)
