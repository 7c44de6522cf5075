"""Each captured launch bracketed by a capture session that picks the instrumented copy while it
records (docs/launches.md)."""
from __future__ import annotations

from .clone import CLONE_SUFFIX, copy_of
from .edits import AFTER, BEFORE, Edits
from .launches import CHEVRON, Launch, Mirror
from .source import Kernel


def wrap_launches(edits: Edits, launches: list[Launch], mirrors: list[Mirror], kernel: Kernel, sfx: str,
                  defaults: bool) -> None:
    """Bracket each captured launch's statement with a capture session, `{ Capture c(...); STMT
    c.finish(); }`, and have the launch pick the instrumented copy while the session records:
    `(c.on() ? K__atrex<T> : K<T>)` in place of its kernel expression (through an alias:
    `(c.on() ? K__atrex<T> : kernel)`). A declaration (`auto e = LAUNCH;`) gets no braces, so its
    name stays in scope, and a session of its own name; a `return LAUNCH;` gets no finish()
    (nothing after it runs): the session's destructor finishes it as the return leaves the braces.
    A template kernel launched with deduced template arguments (`k<<<g, b>>>(x)`) cannot be named
    in a conditional expression, so its statement is written twice: `if (c.on()) { STMT with
    k__atrex } else { STMT }`; so is a `<<<...>>>` launch of a kernel with default arguments
    (`defaults`: the conditional is a pointer, which has none). Each call setting the kernel's attributes is repeated for the copy
    right after it."""
    text = edits.src.text
    for n, l in enumerate(launches):
        cap = "__atrex_cap" if l.braced else f"__atrex_cap{n}"
        session = (f"atrex::host::Capture {cap}(__atrex_plan{sfx}, dim3({l.grid}), dim3({l.block}), {l.stream});")
        open_ = ("{ " + session if l.braced else session, f"capture session for this launch of {kernel.label}")
        finish = "" if l.shape == "return" else f"{cap}.finish();"
        close = ((finish + " }").strip() if l.braced else finish,
                 "end of capture session" + (" (the return finishes it)" if l.shape == "return" else ""))
        if l.deduced:
            _two_branches(edits, l, cap, open_, close, "its template arguments deduced as the kernel's")
            continue
        if defaults and l.via == CHEVRON and l.alias is None:
            _two_branches(edits, l, cap, open_, close, "its default arguments given as the kernel's")
            continue
        edits.insert(l.callee[0], BEFORE, f"({cap}.on() ? {copy_of(text, kernel, l.named_by, l.name_span)} : ")
        edits.insert(l.callee[1], AFTER, ")")
        _around(edits, l.stmt, open_, close)
    for m in mirrors:
        call = text[m.call[0]:m.arg[0]] + copy_of(text, kernel, m.named_by, m.name_span) + text[m.arg[1]:m.call[1]]
        item = (f"(void){call};", f"the same for {kernel.name}{CLONE_SUFFIX}, the instrumented copy")
        a, b = m.stmt
        if m.unbraced:
            _around(edits, m.stmt, ("{", "braces keep the call below and its copy's in one branch"),
                    (item[0] + " }", item[1]))
        elif edits.rest_blank(b):
            edits.insert(edits.src.lines.line_end(b) + 1, AFTER, edits.lines_of([item], edits.indent(a)), 1)
        else:
            edits.insert(b, AFTER, " " + edits.inline([item]), 1)


def _two_branches(edits: Edits, l: Launch, cap: str, open_: tuple[str, str], close: tuple[str, str],
                  why: str) -> None:
    """The launch's statement once with the copy's name, for `cap.on()`, and once as it is."""
    text, (a, b), n1 = edits.src.text, l.stmt, l.name_span[1]
    copy = text[a:n1] + CLONE_SUFFIX + text[n1:b]
    on = (f"if ({cap}.on()) {{", f"the instrumented copy, {why}")
    if edits.starts_line(a) and edits.rest_blank(b):
        ind, nl = edits.indent(a), edits.nl
        edits.insert(edits.src.lines.line_start(a), BEFORE, edits.lines_of([open_, on], ind) + ind + copy + nl
                     + edits.lines_of([("} else {", "the kernel itself")], ind), -1)
        edits.insert(edits.src.lines.line_end(b) + 1, AFTER,
                     edits.lines_of([("}", "end of the kernel's branch"), close], ind), 1)
    else:
        edits.insert(a, BEFORE, f"{edits.inline([open_, on])} {copy} }} else {{ ", -1)
        edits.insert(b, AFTER, " } " + edits.inline([close]), 1)


def _around(edits: Edits, stmt: tuple[int, int], open_: tuple[str, str], close: tuple[str, str]) -> None:
    """`open_` before the statement and `close` after it: on lines of their own when the statement
    has its lines to itself, else inline."""
    a, b = stmt
    if edits.starts_line(a) and edits.rest_blank(b):
        ind = edits.indent(a)
        edits.insert(edits.src.lines.line_start(a), BEFORE, edits.lines_of([open_], ind), -1)
        edits.insert(edits.src.lines.line_end(b) + 1, AFTER, edits.lines_of([close], ind), 1)
    else:
        edits.insert(a, BEFORE, edits.inline([open_]) + " ", -1)
        edits.insert(b, AFTER, " " + edits.inline([close]), 1)
