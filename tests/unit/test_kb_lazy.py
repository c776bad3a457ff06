"""The cached KB as a run gets it (knowledge/cache.py): entries rebuilt only when used, the
files keyed by their stamps. Compared with the KB built by parsing the TOML (the path with
the cache off): the same entries, and the same matches, counts, line numbers and groups on
the demo's log and every log of tests/corpus. The stamps must never serve a stale digest."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from ascend_doctor import knowledge
from ascend_doctor.knowledge import (DATA_FILES_EXCLUDED, Entry, KnowledgeBase, cache,
                                     data_files, parse_file)
from ascend_doctor.probes.logmatch import match_file
from ascend_doctor.probes.logs import LogScan

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
HERE = Path(knowledge.__file__).parent
CODE = (knowledge.__file__, cache.__file__)


def _files() -> list[tuple[str, bytes]]:
    return [(n, raw) for n, raw in data_files() if n not in DATA_FILES_EXCLUDED]


def _paths() -> list[tuple[str, str]]:
    return [(n, str(HERE / n)) for n, _ in _files()]


def _parsed_kb() -> KnowledgeBase:
    return KnowledgeBase([e for n, raw in _files() for e in parse_file(n, raw)])


def _logs() -> list[tuple[str, bytes]]:
    from ascend_doctor.demo.parts.service import SERVER_LOG

    out = [("demo server.log", SERVER_LOG.encode())]
    for p in sorted(CORPUS.rglob("*")):
        if p.is_file() and p.suffix in (".txt", ".log"):
            out.append((str(p.relative_to(CORPUS)), p.read_bytes()))
    return out


def _scan(kb: KnowledgeBase, data: bytes) -> tuple:
    r = LogScan()
    m = match_file(kb, io.BytesIO(data), len(data), r)
    return [(a.entry, a.count, a.lines, a.groups) for a in m], r.lines, r.last_stats


def _lines(kb: KnowledgeBase, data: bytes) -> list:
    text = data.decode("utf-8", "replace").splitlines(keepends=True)
    return [(m.entry, m.score, m.lines, dict(m.groups)) for m in kb.match_lines(text)]


def test_lazy_kb_matches_every_log_as_the_parsed_kb(xdg):
    parsed = _parsed_kb()
    cache.load_lazy(_files, parse_file, Entry, CODE, paths=_paths())  # a miss: written
    lazy = cache.load_lazy(_files, parse_file, Entry, CODE, paths=_paths())
    assert isinstance(lazy, cache.LazyEntries)
    cached = KnowledgeBase(lazy)
    assert cached.signatures() == parsed.signatures()
    assert cached.signature_keys() == parsed.signature_keys()
    logs = _logs()
    assert len(logs) > 50 and logs[0][0] == "demo server.log"
    hits = 0
    for name, data in logs:
        want = _scan(parsed, data)
        assert _scan(cached, data) == want, name
        assert _lines(cached, data) == _lines(parsed, data), name
        hits += bool(want[0])
    assert hits > 40  # the comparison saw real matches, not only empty results
    assert _scan(cached, logs[0][1])[0], "the demo log matches entries"
    # every entry, once all are asked for, is the parsed one
    assert list(cached.entries.values()) == list(parsed.entries.values())


def test_load_is_the_parsed_kb_with_the_cache_on_and_off(xdg, monkeypatch):
    parsed = _parsed_kb()
    demo = _logs()[0][1]
    for setting, hit in (("1", False), ("1", True), ("0", False)):  # miss, hit, no cache
        monkeypatch.setenv("ASCEND_DOCTOR_CACHE", setting)
        knowledge.load.cache_clear()
        knowledge.compat.cache_clear()
        try:
            kb = knowledge.load()
            assert isinstance(kb.entries, cache.LazyEntries) == hit
            assert _scan(kb, demo) == _scan(parsed, demo)
            assert dict(kb.entries) == dict(parsed.entries)
            assert knowledge.compat() == json.loads(json.dumps(knowledge.compat()))
        finally:
            knowledge.load.cache_clear()
            knowledge.compat.cache_clear()
    assert sorted(p.name.split("-")[0] for p in (xdg / "ascend-doctor").iterdir()
                  if not p.name.startswith("re-")) == ["derived", "kb", "stamps.json", "toml"]


def test_stamped_key_is_the_key_of_the_bytes(xdg):
    files, paths = _files(), _paths()
    want = cache.key_for(files, CODE)
    assert cache.key_for((), CODE, paths) == want  # hashed (no stamps yet)
    cache._stamps().save()
    assert cache.key_for((), CODE, paths) == want  # from the stamps
    assert cache.key_for((), CODE, [*paths, ("gone.toml", "/nonexistent/gone.toml")]) is None


def _write(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def test_a_young_file_gets_no_stamp(xdg, tmp_path):
    """A file changed less than STAMP_AGE_NS ago may change again within the same timestamp
    tick: it is hashed every time until it is older."""
    f = tmp_path / "young.toml"
    _write(f, "a = 1\n")
    s = cache._stamps()
    assert s.digest(str(f)) == cache._sha256(b"a = 1\n").digest()
    assert str(f) not in s.new
    # the same size, the mtime put back, within the same tick: still seen
    st = f.stat()
    _write(f, "a = 2\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert s.digest(str(f)) == cache._sha256(b"a = 2\n").digest()


def test_an_edit_that_keeps_size_and_mtime_is_seen(xdg, tmp_path, monkeypatch):
    """A stamped file edited in place, its size the same and its mtime put back: ctime moved,
    so the file is hashed again."""
    f = tmp_path / "old.toml"
    _write(f, "a = 1\n")
    st = f.stat()
    time.sleep(0.05)  # past the kernel's timestamp tick, as STAMP_AGE_NS guarantees
    real = time.time_ns
    monkeypatch.setattr(cache.time, "time_ns", lambda: real() + 10 * cache.STAMP_AGE_NS)
    s = cache._stamps()
    assert s.digest(str(f)) == cache._sha256(b"a = 1\n").digest()
    assert str(f) in s.new  # old enough (by the moved clock): stamped
    s.save()
    reads = []
    monkeypatch.setattr(cache, "open", lambda *a, **k: reads.append(a) or open(*a, **k),
                        raising=False)
    assert cache._stamps().digest(str(f)) == cache._sha256(b"a = 1\n").digest()
    assert reads == []  # served from the stamp
    _write(f, "a = 2\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    assert cache._stamps().digest(str(f)) == cache._sha256(b"a = 2\n").digest()
    assert reads  # read again
    # a file replaced by another (a new inode), size and mtime as before
    g = tmp_path / "new.toml"
    _write(g, "a = 3\n")
    os.utime(g, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(g, f)
    assert cache._stamps().digest(str(f)) == cache._sha256(b"a = 3\n").digest()


@pytest.mark.parametrize("damage", ["garbage", "not-a-dict", "wrong-types", "short-digest",
                                    "other-format"])
def test_a_damaged_stamps_file_is_ignored(xdg, monkeypatch, damage):
    files, paths = _files(), _paths()
    want = cache.key_for(files, CODE)
    real = time.time_ns
    monkeypatch.setattr(cache.time, "time_ns", lambda: real() + 10 * cache.STAMP_AGE_NS)
    cache.key_for((), CODE, paths)
    cache._stamps().save()
    f = xdg / "ascend-doctor" / "stamps.json"
    doc = json.loads(f.read_text())
    first = next(iter(doc["stamps"]))
    if damage == "garbage":
        f.write_bytes(b"\x00{not json")
    elif damage == "not-a-dict":
        f.write_text(json.dumps({"format": cache.FORMAT, "stamps": [1, 2]}))
    elif damage == "wrong-types":
        doc["stamps"][first][0] = "65024"
        f.write_text(json.dumps(doc))
    elif damage == "short-digest":
        doc["stamps"][first][5] = doc["stamps"][first][5][:-2]
        f.write_text(json.dumps(doc))
    else:
        doc["format"] = 1
        f.write_text(json.dumps(doc))
    monkeypatch.setenv("HOME", "/elsewhere")  # a fresh _Stamps: the file is read again
    s = cache._stamps()
    assert cache.key_for((), CODE, paths) == want
    assert first not in s.known if damage in ("wrong-types", "short-digest") else s.known == {}


def test_every_match_is_explained_by_its_own_signatures(xdg):
    """Entries are looked up by the index of the signature that matched: each reported
    entry has a line one of its own signatures matches (a misaligned index would not)."""
    cache.load_lazy(_files, parse_file, Entry, CODE, paths=_paths())
    kb = KnowledgeBase(cache.load_lazy(_files, parse_file, Entry, CODE, paths=_paths()))
    seen = 0
    for name, data in _logs():
        for m in kb.match_lines(data.decode("utf-8", "replace").splitlines(keepends=True)):
            texts = [knowledge._normalized(t) for _, t in m.lines]
            assert any(rx.search(t) for rx in m.entry.compiled for t in texts), (name, m)
            seen += 1
    assert seen > 100


def test_the_per_signature_literal_skip_changes_no_match():
    """``match_lines`` skips a gate candidate whose required literal is not in the folded
    text: the same matches as trying every candidate (a KB whose literals are all unknown)."""
    kb = _parsed_kb()
    keys = kb.signature_keys()
    ref = _parsed_kb()
    ref._keys_cache = {"anchors": keys["anchors"], "literals": [None] * len(keys["literals"])}
    assert sum(lit is not None for lit in keys["literals"]) > 100
    seen = 0
    for name, data in _logs():
        lines = data.decode("utf-8", "replace").splitlines(keepends=True)
        got = [(m.entry.id, m.score, m.lines, dict(m.groups)) for m in kb.match_lines(lines)]
        want = [(m.entry.id, m.score, m.lines, dict(m.groups)) for m in ref.match_lines(lines)]
        assert got == want, name
        seen += len(got)
    assert seen > 100
