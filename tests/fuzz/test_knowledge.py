"""Knowledge files: mutated real TOML gives entries or a KnowledgeError naming the file."""

from __future__ import annotations

from hypothesis import example, given, strategies as st

from ascend_doctor import knowledge
from ascend_doctor.knowledge import Entry, KnowledgeError, parse_file
from tests.fuzz.harness import assert_total, mutated

REAL = [(n, raw) for n, raw in knowledge.data_files() if n not in knowledge.DATA_FILES_EXCLUDED]


def test_real_files_parse():
    assert REAL and all(parse_file(n, raw) for n, raw in REAL)


@given(st.sampled_from(REAL).flatmap(lambda nr: st.tuples(st.just(nr[0]),
                                                          mutated([nr[1]], max_ops=3))))
@example(("libs.toml", b"entry = 3\n"))
@example(("libs.toml", b"[[entry]]\nid = 'ASC-LIB-999'\ntitle = 'x'\ncause = {en='c'}\n"))
@example(("libs.toml", b"[[entry]]\nid = 'ASC-LIB-999'\ntitle = {en='t'}\ncause = {en='c'}\n"
                       b"signatures = ['(unclosed']\n"))
@example(("libs.toml", b"\xff\xfe"))
def test_parse_file_total(name_raw):
    name, raw = name_raw
    out = assert_total(parse_file, name, raw, allowed=(KnowledgeError,))
    if isinstance(out, KnowledgeError):
        assert str(out).startswith(name)
    else:
        for e in out:
            assert isinstance(e, Entry) and isinstance(e.text("title"), str)
            e.steps_for("zh")
            assert len(e.compiled) == len(e.signatures)
