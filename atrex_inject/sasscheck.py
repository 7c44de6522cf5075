"""`atrex-inject check-sass`: is the recording run the kernel it observes? The spec's source is
compiled clean, instrumented with the recorder apply chooses (or chose, or --recorder), and
instrumented as one copy, and sass.compare reads what the probes did; choice.problems says, by the
rules the recorder choice applies, why the recording would be another kernel."""
from __future__ import annotations

import tempfile
from pathlib import Path

from . import choice
from .errors import AtrexError
from .progress import step
from .sass import compare


def clean_text(spec) -> str:
    """The spec's clean source: the file itself, or, once applied, the clean copy apply saved."""
    from .cuda.probes import MARK  # noqa: PLC0415
    from .fsio import sha256_bytes  # noqa: PLC0415
    from .snapshot import load_manifest, workspace  # noqa: PLC0415

    text = spec.source.read_text()
    if MARK not in text:
        return text
    ws = workspace(spec)
    m = load_manifest(ws)
    data = (ws / m.clean_copy).read_bytes() if m else b""
    if not m or sha256_bytes(data) != m.source.clean_sha256:
        raise AtrexError(f"{spec.source_rel} is instrumented and no verified clean copy is saved for spec {spec.name!r}",
                         path=str(spec.path), hint="revert it, or run check-sass before apply")
    return data.decode()


def check(spec_path: Path, root: Path | None = None, nvcc_flags: list[str] | None = None,
          recorder: str | None = None) -> dict:
    """check-sass: compile the spec's source clean, instrumented with the recorder apply chooses (or
    chose, or `recorder`), and instrumented as one copy (no versioning), and compare them (compare);
    `problems` lists, by the recorder choice's rules (choice.problems), why the recording run would
    not be the clean kernel; `ok` when there is none."""
    from .cuda.rewrite import rewrite  # noqa: PLC0415
    from .plan import BufferPath, make_plan, requested_mode  # noqa: PLC0415
    from .spec import load_spec  # noqa: PLC0415

    spec = load_spec(spec_path, root)
    if spec.backend != "cuda":
        raise AtrexError(f"check-sass reads CUDA builds; spec {spec.name!r} is for the {spec.backend} backend",
                         path=str(spec.path), hint=f"check a CuTe DSL spec with `atrex-inject check-iket {spec_path}`")
    target = choice.Target.of(spec, clean_text(spec), nvcc_flags)
    # the global path's rewrite says any anchor error, and names the kernel as the rewriter resolved it
    global_mode = requested_mode(spec, BufferPath.GLOBAL)
    first = rewrite(make_plan(spec, global_mode), target.text, runtime=target.runtime)
    choice.learn(target, first)
    picked = choice.resolve(spec, target, recorder, step)
    plan = make_plan(spec, picked.mode)
    # what the choice compiled just now is not compiled again (a cached choice compiled nothing)
    made, inst = target.built.get(picked.mode, (first if picked.mode == global_mode else None, None))
    texts = {"instrumented": made or rewrite(plan, target.text, runtime=target.runtime),
             "one_copy": rewrite(plan, target.text, version_body=False, runtime=target.runtime)}
    with tempfile.TemporaryDirectory(dir=spec.source.parent, prefix=".atrex-sass-") as tmp:
        step("compiling the clean build (nvcc)")
        clean = choice.clean_build(target, Path(tmp))
        step(f"compiling the build with the {picked.mode.path.value} recorder (nvcc)")
        instrumented = inst or target.build(Path(tmp), "instrumented", texts["instrumented"].text)
        step("compiling the instrumented build without versioning (nvcc)")
        built = {"clean": clean, "instrumented": instrumented,
                 "one_copy": target.build(Path(tmp), "one_copy", texts["one_copy"].text)}
    step("reading the builds' SASS")
    clone = texts["instrumented"].backend_data["perturbation"]["clone"]
    r = compare(built["clean"], built["instrumented"], target.kernel, clone, built["one_copy"], target.threads)
    problems = choice.problems(r, choice.some_ctas_idle(plan))
    return {"spec": spec.name, "kernel": spec.kernel, "copy": clone, "recorder": picked.to_json(),
            "versioned": texts["instrumented"].backend_data["perturbation"]["versioned"], **r,
            "problems": problems, "ok": r["off_identical"] and not problems, "flags": target.flags,
            "include_dirs": target.include[1:],
            "hint": _hint(picked) if problems else None}


def _hint(picked) -> str:
    """What to change when the recording run would be another kernel."""
    if picked.how == "asked":
        return (f"the spec (or --recorder) asks for the {picked.mode.path.value} recorder: drop [capture] recorder "
                "(auto) and apply compiles the candidates and keeps one that leaves the kernel as it was")
    return ("no recorder keeps this kernel (apply --dry-run --json lists each candidate's problems under "
            "recorder.evidence): fewer sites in the timed loop, or an `every` equal to the loop's unroll, change what "
            "the copy needs; the recording is then another kernel, and measure will show by how much")
