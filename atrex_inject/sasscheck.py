"""`atrex-inject check-sass`: is the recording run the kernel it observes? The spec's source is
compiled clean and instrumented with the recorder apply chooses (or chose, or --recorder), and
sass.compare reads what the probes did; choice.judge, the judgment the recorder choice applies,
says whether the recording keeps the kernel, is another kernel, or SASS cannot decide."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import choice
from .choicerecord import Choice
from .errors import AtrexError
from .progress import step
from .sassrecord import Comparison


@dataclass(frozen=True)
class SassCheck:
    """check-sass's answer: the comparison of the kernel judged (the first instantiation with the
    worst verdict), the recorder it was compiled with, and the judgment of every instantiation
    together. `to_json` writes its documented keys (docs/design.md, "The SASS check")."""
    spec: str
    kernel: str
    copy: str  # the instrumented copy's name
    recorder: Choice
    versioned: bool  # the copy's body is versioned: CTAs that record nothing run a clean side
    comparison: Comparison
    verdict: str  # choice.KEEPS, UNSURE or ANOTHER
    problems: tuple[str, ...]
    doubts: tuple[str, ...]
    flags: tuple[str, ...]  # nvcc's flags
    include_dirs: tuple[str, ...]  # -I folders besides the source's own
    hint: str | None  # what to do next (_hint)

    def __post_init__(self):
        if self.verdict not in (choice.KEEPS, choice.UNSURE, choice.ANOTHER) or not isinstance(self.recorder, Choice) \
                or not isinstance(self.comparison, Comparison):
            raise ValueError(f"not a check-sass answer: verdict {self.verdict!r}")

    @property
    def ok(self) -> bool:
        """The recording is not known to be another kernel (check-sass exits 0)."""
        return self.verdict != choice.ANOTHER

    def to_json(self) -> dict:
        return {"spec": self.spec, "kernel": self.kernel, "copy": self.copy, "recorder": self.recorder.to_json(),
                "versioned": self.versioned, **self.comparison.to_json(), "verdict": self.verdict,
                "problems": list(self.problems), "doubts": list(self.doubts), "ok": self.ok, "flags": list(self.flags),
                "include_dirs": list(self.include_dirs), "hint": self.hint}


def clean_texts(spec) -> tuple[str, dict[str, str]]:
    """The spec's clean source and launchers (rel path -> text): the files themselves, or, once
    applied, the clean copies apply saved (verified by their hashes)."""
    from .cuda.probes import MARK  # noqa: PLC0415
    from .fsio import sha256_bytes  # noqa: PLC0415
    from .snapshot import load_manifest, workspace  # noqa: PLC0415

    text = spec.source.read_text()
    launchers = {rel: p.read_text() for p, rel in zip(spec.launchers, spec.launcher_rels)}
    if MARK not in text:
        return text, launchers
    ws = workspace(spec)
    m = load_manifest(ws)
    saved = {None: (m.clean_copy, m.source.clean_sha256), **{f.path: (f.clean_copy, f.clean_sha256) for f in m.launchers}} \
        if m else {}
    data = {rel: _read(ws / copy) for rel, (copy, _) in saved.items()}
    if not saved or any(data[rel] is None or sha256_bytes(data[rel]) != sha for rel, (_, sha) in saved.items()):
        raise AtrexError(f"{spec.source_rel} is instrumented and no verified clean copy is saved for spec {spec.name!r}",
                         path=str(spec.path), hint="revert it, or run check-sass before apply")
    text = data.pop(None).decode()
    launchers.update({rel: d.decode() for rel, d in data.items()})
    return text, launchers


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def check(spec_path: Path, root: Path | None = None, nvcc_flags: list[str] | None = None,
          recorder: str | None = None) -> SassCheck:
    """check-sass: compile the spec's source clean and instrumented with the recorder apply chooses
    (or chose, or `recorder`), compare them (sass.compare), and judge the recording as the choice
    judges it (choice.judge: one build, one answer): `verdict` keeps / unsure / another kernel,
    `problems` why it would be another kernel, `doubts` what SASS cannot decide (measure does);
    `ok` unless it is another kernel."""
    from .cuda.rewrite import rewrite  # noqa: PLC0415
    from .plan import BufferPath, make_plan, requested_mode  # noqa: PLC0415
    from .spec import load_spec  # noqa: PLC0415

    spec = load_spec(spec_path, root)
    if spec.backend != "cuda":
        raise AtrexError(f"check-sass reads CUDA builds; spec {spec.name!r} is for the {spec.backend} backend",
                         path=str(spec.path), hint=f"check a CuTe DSL spec with `atrex-inject check-iket {spec_path}`")
    text, launchers = clean_texts(spec)
    target = choice.Target.of(spec, text, nvcc_flags, launchers)
    # the global path's rewrite says any anchor error, and names the kernel as the rewriter resolved it
    global_mode = requested_mode(spec, BufferPath.GLOBAL)
    first = rewrite(make_plan(spec, global_mode), target.text, runtime=target.runtime, launchers=launchers or None)
    choice.learn(target, first)
    picked = choice.resolve(spec, target, recorder, step)
    plan = make_plan(spec, picked.mode)
    # what the choice compiled just now is not compiled again (a cached choice compiled nothing)
    made, inst = target.built.get(picked.mode, (first if picked.mode == global_mode else None, None))
    made = made or rewrite(plan, target.text, runtime=target.runtime, launchers=launchers or None)
    with tempfile.TemporaryDirectory(prefix=".atrex-sass-") as tmp:  # not beside the source (choice.SCRATCH_PREFIX)
        step("compiling the clean build (nvcc)")
        clean = choice.clean_build(target, Path(tmp))
        step(f"compiling the build with the {picked.mode.path.value} recorder (nvcc)")
        inst = inst or target.build(Path(tmp), "instrumented", made.text, made.launchers or None)
    step("reading the builds' SASS")
    copy = made.copy
    r, problems, doubts = choice.assess(clean, inst, target.kernel, copy.clone, target.threads,
                                        choice.some_ctas_idle(plan), copy.versioned, copy.sized_at_launch)
    doubts += choice.per_trip(plan.spec.sites)
    verdict = choice.verdict(problems, doubts)
    return SassCheck(spec.name, spec.kernel, copy.clone, picked, copy.versioned, r, verdict, tuple(problems),
                     tuple(doubts), tuple(target.flags), tuple(target.include[1:]), _hint(picked, verdict))


def _hint(picked: Choice, verdict: str) -> str | None:
    """What to do next when the recording is not known to keep the kernel."""
    if verdict == choice.UNSURE:
        return ("SASS cannot decide whether the recording keeps the kernel: time the clean build against the "
                "instrumented one with `atrex-inject measure --baseline '[CLEAN, ...]' --instrumented '[BUILD, ...]'` "
                "(docs/measure.md); within the spec's target, the recording is the kernel it observes")
    if verdict == choice.KEEPS:
        return None
    if picked.how == "asked":
        return (f"the spec (or --recorder) asks for the {picked.mode.path.value} recorder: drop [capture] recorder "
                "(auto) and apply compiles the candidates and keeps one that leaves the kernel as it was")
    return ("no recorder keeps this kernel (apply --dry-run --json lists each candidate's problems under "
            "recorder.evidence): fewer sites in the timed loop, or an `every` equal to the loop's unroll, change what "
            "the copy needs; the recording is then another kernel, and measure will show by how much")
