"""Every spec value is checked, at its line, when the spec is read and planned (its backend's rules,
plan.make_plan): ranges the generated code and the capture format can hold, payload/predicate text
that is one expression on one line of the backend's language, paths that stay out of .atrex/.git,
reserved names, and specs that are not TOML or not UTF-8 at all. Each case plants one fault in a
valid spec and expects one exact refusal."""
from __future__ import annotations


import re

import pytest

from atrex_inject import registry
from atrex_inject.errors import SpecError
from atrex_inject.plan import make_plan
from atrex_inject.spec import load_spec

BASE = '''version = 1
name = "t"
question = "q"
backend = "cuda"
source = "k.cu"
kernel = "k"

[capture]
capacity = 8

[[site]]
name = "a"
anchor = { entry = true }
payload = "kt"

[[site]]
name = "b"
anchor = { exit = true }

[expect]
a = 1
'''


@pytest.fixture
def tree(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    return tmp_path


def refused(tree, text: str | bytes) -> SpecError:
    p = tree / "t.toml"
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(SpecError) as e:
        make_plan(load_spec(p))
    return e.value


def plant(tree, old: str, new: str) -> SpecError:
    assert old in BASE
    return refused(tree, BASE.replace(old, new, 1))


def line_of(needle: str, text: str = BASE) -> int:
    return next(i for i, l in enumerate(text.split("\n"), 1) if needle in l)


def test_base_spec_is_valid(tree):
    (tree / "t.toml").write_text(BASE)
    assert load_spec(tree / "t.toml").sites[0].payload == "kt"


@pytest.mark.parametrize("old,new,msg", [
    ('anchor = { exit = true }', 'anchor = { exit = true }\nctas = { stride = 4294967296 }',
     "site[1].ctas.stride must be between 1 and 4294967295, not 4294967296"),
    ('anchor = { exit = true }', 'anchor = { exit = true }\nctas = { limit = -1 }',
     "site[1].ctas.limit must be between 0 and 4294967295, not -1"),
    ('anchor = { exit = true }', 'anchor = { exit = true }\nevery = 4294967296',
     "site[1].every must be between 1 and 4294967295, not 4294967296"),
    ("a = 1", "a = -3", "expect.a must be between 0 and 4294967295, not -3"),
    ("a = 1", "a = 4294967296", "expect.a must be between 0 and 4294967295, not 4294967296"),
    ("capacity = 8", "capacity = 0", "capture.capacity must be between 1 and 1048576 events per owner, not 0"),
    ("capacity = 8", "capacity = 8\nskip = -1", "capture.skip must be between 0 and 9223372036854775807, not -1"),
    ("anchor = { entry = true }", "anchor = { call = \"f\", occurrence = 0 }",
     "site[0].anchor.occurrence must be between 1 and 4294967295, not 0"),
])
def test_out_of_range_values_refused_at_their_line(tree, old, new, msg):
    e = plant(tree, old, new)
    text = BASE.replace(old, new, 1)
    assert e.message == msg
    assert e.line == line_of(new.split("\n")[-1], text)


@pytest.mark.parametrize("payload,why", [
    ("}", "holds '}' outside parentheses: it must be one expression, not statements"),
    ("kt /* ", "holds a comment"),
    ("kt // x", "holds a comment"),
    ("kt\\n#error x", "holds a newline or control character (U+000A)"),
    ("kt\\u2028", "holds a newline or control character (U+2028)"),
    ("kt; return", "holds ';' outside parentheses: it must be one expression, not statements"),
    ("(kt", "has an unclosed bracket"),
    ("kt)", "holds ')' outside parentheses: it must be one expression, not statements"),
    ("#x", "holds '#x', which is not part of a C++ expression"),
    ("", "is empty"),
])
def test_payload_must_be_one_cpp_expression(tree, payload, why):
    e = plant(tree, 'payload = "kt"', f'payload = "{payload}"')
    assert why in e.message and e.message.startswith("site 'a': payload")
    assert e.line == line_of("payload")


@pytest.mark.parametrize("expr", ["kt", "threadIdx.x % 64 == 0", "a ? b : c", "static_cast<int>(x) + y[2]",
                                  '"*/ ;"', "f([](int v) { return v; })"])
def test_valid_cpp_expressions_pass(expr):
    assert registry.get("cuda").expression_problem(expr) is None


def test_predicate_checked_too(tree):
    e = plant(tree, 'anchor = { exit = true }', 'anchor = { exit = true }\nrole = "predicate"\n'
                                               'predicate = "threadIdx.x == 0 /* lane 0 */"')
    assert e.message.startswith("site 'b': predicate") and "holds a comment" in e.message


def test_cutedsl_payload_is_a_python_expression(tree):
    (tree / "k.py").write_text("x = 1\n")
    text = BASE.replace('backend = "cuda"', 'backend = "cutedsl"').replace('"k.cu"', '"k.py"')
    e = refused(tree, text.replace('payload = "kt"', 'payload = "}"'))
    assert "payload '}' is not a Python expression" in e.message and e.line == line_of("payload")
    e = refused(tree, text.replace('payload = "kt"', 'payload = "kt # note"'))
    assert "holds a comment" in e.message


@pytest.mark.parametrize("name", ["history", "lock"])
def test_reserved_workspace_names(tree, name):
    e = plant(tree, 'name = "t"', f'name = "{name}"')
    assert e.message == f"spec name {name!r} is reserved (.atrex/{name} is not a workspace)" and e.line == 2


@pytest.mark.parametrize("source,msg", [
    (".atrex/t/clean/k.cu", "is inside .atrex/"),
    (".git/config", "is inside .git/"),
    ("k\\u0000.cu", "holds control characters"),
    ("a" * 5000, "too long"),
    ("../outside.cu", "leaves the project tree"),
])
def test_source_paths_confined(tree, source, msg):
    for p in (tree / ".atrex/t/clean/k.cu", tree / ".git/config"):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("__global__ void k() {}\n")
    e = plant(tree, 'source = "k.cu"', f'source = "{source}"')
    assert msg in e.message and e.line == 5


def test_missing_key_points_at_its_table(tree):
    e = plant(tree, 'anchor = { exit = true }\n', "")
    assert e.message == "missing required key 'anchor'" and e.line == line_of('name = "b"') - 1  # [[site]]
    e = plant(tree, 'kernel = "k"\n', "")
    assert e.message == "missing required key 'kernel'" and e.line == 1


def test_toml_errors_have_a_line(tree):
    e = plant(tree, 'question = "q"', 'question = "q')
    assert e.message.startswith("malformed TOML") and e.line == 3
    e = refused(tree, BASE + 'x = [1, 2')  # an error at the end of the document
    assert e.line == BASE.count("\n") + 1


def test_deep_nesting_refused_at_its_line(tree):
    e = refused(tree, BASE.replace('question = "q"', "question = " + "[" * 5000 + "]" * 5000))
    assert e.message == "arrays or tables nested too deeply to read" and e.line == 3


def test_non_utf8_spec(tree):
    e = refused(tree, BASE.encode().replace(b'question = "q"', b'question = "\xff"'))
    byte = BASE.index('question = "q"') + len('question = "')
    assert e.message == f"the spec is not UTF-8 text (byte {byte})"
    assert e.line == 3


def test_nine_owner_groups_point_at_the_ninth(tree):
    sites = "".join(f'[[site]]\nname = "s{i}"\nanchor = {{ entry = true }}\nctas = {{ stride = {i + 1} }}\n\n'
                    for i in range(9))
    text = BASE.split("[[site]]")[0] + sites
    e = refused(tree, text)
    assert e.message.startswith("9 owner groups") and "the 9th starts at site 's8'" in e.message
    assert e.line == line_of('name = "s8"', text) - 1


def test_more_intervals_than_the_export_can_show_are_refused_at_their_line(tmp_path):
    """17 intervals: refused by parse_spec at the intervals line, not later by export."""
    from atrex_inject.spec import MAX_INTERVALS, parse_spec

    sites = "".join(f'[[site]]\nname = "s{i}"\nanchor = {{ entry = true }}\n' for i in range(MAX_INTERVALS + 2))
    ivs = ", ".join(f'"s{i} -> s{i + 1}"' for i in range(MAX_INTERVALS + 1))
    text = (f'version = 1\nname = "n"\nquestion = "q"\nbackend = "cuda"\nsource = "k.cu"\nkernel = "k"\n'
            f"intervals = [{ivs}]\n{sites}")
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    with pytest.raises(SpecError, match=f"{MAX_INTERVALS + 1} intervals; at most {MAX_INTERVALS}") as e:
        parse_spec(text, tmp_path / "s.toml", tmp_path)
    assert e.value.line == 7


@pytest.mark.parametrize("pair, message", [
    ('["s0 -> s1", "s0 -> s2"]', "pair names 's0 -> s2', which is not one of the spec's intervals"),
    ('["s0 -> s1"]', "pair ['s0 -> s1'] must name two different intervals"),
    ('["s0 -> s1", "s0 -> s1"]', "must name two different intervals"),
])
def test_a_pair_that_is_not_two_of_the_intervals_is_refused_at_its_line(pair, message, tmp_path):
    from atrex_inject.spec import parse_spec

    sites = "".join(f'[[site]]\nname = "s{i}"\nanchor = {{ entry = true }}\n' for i in range(3))
    text = (f'version = 1\nname = "n"\nquestion = "q"\nbackend = "cuda"\nsource = "k.cu"\nkernel = "k"\n'
            f'intervals = ["s0 -> s1", "s1 -> s2"]\npair = {pair}\n{sites}')
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    with pytest.raises(SpecError, match=re.escape(message)) as e:
        parse_spec(text, tmp_path / "s.toml", tmp_path)
    assert e.value.line == 8


def test_a_pair_is_kept_in_the_manifest(tmp_path):
    from atrex_inject.spec import parse_spec

    sites = "".join(f'[[site]]\nname = "s{i}"\nanchor = {{ entry = true }}\n' for i in range(3))
    text = (f'version = 1\nname = "n"\nquestion = "q"\nbackend = "cuda"\nsource = "k.cu"\nkernel = "k"\n'
            f'intervals = ["s0 -> s1", "s1 -> s2"]\npair = ["s1 -> s2", "s0 -> s1"]\n{sites}')
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    assert parse_spec(text, tmp_path / "s.toml", tmp_path).pair == ("s1 -> s2", "s0 -> s1")
