"""The knowledge-base cache (knowledge/cache.py): the same entries as parsing the TOML,
used only from a directory the user owns, a corrupt or foreign file treated as absent."""

from __future__ import annotations

import sys

import json
import os

import pytest

from ascend_doctor import knowledge
from ascend_doctor.knowledge import DATA_FILES_EXCLUDED, Entry, cache, data_files, parse_file

CODE = (knowledge.__file__,)


def _files() -> list[tuple[str, bytes]]:
    return [(n, raw) for n, raw in data_files() if n not in DATA_FILES_EXCLUDED]


def _kb_files(xdg) -> list:
    """The kb cache files (the directory also holds stamps.json)."""
    return [p for p in (xdg / "ascend-doctor").iterdir() if p.name.startswith("kb-")]


def _parsed(files) -> list[Entry]:
    return [e for n, raw in files for e in parse_file(n, raw)]


def _no_parse(name: str, raw: bytes) -> list[Entry]:
    raise AssertionError(f"parsed {name}: the cache was not used")


def test_hit_gives_the_same_entries_in_the_same_order(xdg):
    files = _files()
    want = _parsed(files)
    first = cache.load_entries(files, parse_file, Entry, CODE)
    (f,) = _kb_files(xdg)
    assert f.name.startswith("kb-") and (f.stat().st_mode & 0o777) == 0o600
    assert ((xdg / "ascend-doctor").stat().st_mode & 0o777) == 0o700
    again = cache.load_entries(files, _no_parse, Entry, CODE)
    assert first == want and again == want
    assert [e.id for e in again] == [e.id for e in want]
    assert all(isinstance(e.steps, tuple) and isinstance(e.signatures, tuple) for e in again)
    # the real load() builds the same knowledge base as parsing every file
    knowledge.load.cache_clear()
    try:
        assert list(knowledge.load().entries.values()) == want
    finally:
        knowledge.load.cache_clear()


def test_an_edited_file_is_a_miss(xdg):
    files = _files()
    cache.load_entries(files, parse_file, Entry, CODE)
    name, raw = files[0]
    edited = [(name, raw.replace(b'severity = "', b'severity = "', 1) + b"\n# edited\n"),
              *files[1:]]
    calls = []

    def counting(n, r):
        calls.append(n)
        return parse_file(n, r)

    cache.load_entries(edited, counting, Entry, CODE)
    assert calls == [n for n, _ in files]


def _split(f) -> tuple[dict, list[bytes]]:
    """The kb cache file's header and entry rows (format 2: crc line, header, rows)."""
    _, header, *rows = f.read_bytes().split(b"\n")
    return json.loads(header), rows


def _join(f, header: dict, rows: list[bytes]) -> None:
    """Write a header and rows back with a crc that fits: only the content is wrong."""
    import zlib

    body = b"\n".join([json.dumps(header, ensure_ascii=False).encode(), *rows])
    f.write_bytes(b"ascend-doctor-kb %08x\n" % zlib.crc32(body) + body)


# damage the crc catches, and damage under a crc that fits (a file written by hand): the
# header is checked when read, each row against the header when its entry is first used
DAMAGE = ["truncate", "garbage", "flipped-byte", "other-key", "wrong-shape", "row-missing",
          "header-types", "duplicate-id", "row-of-another-id", "row-not-json", "format-1"]


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_corrupt_cache_is_absent_and_rewritten(xdg, damage):
    files = _files()
    want = _parsed(files)
    cache.load_entries(files, parse_file, Entry, CODE)
    (f,) = _kb_files(xdg)
    text = f.read_text()
    header, rows = _split(f)
    if damage == "truncate":
        f.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        f.write_bytes(b"\xff\xfe\x00not json")
    elif damage == "flipped-byte":  # in a row, crc left as it was
        raw = bytearray(f.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        f.write_bytes(bytes(raw))
    elif damage == "other-key":
        _join(f, {**header, "key": "0" * 32}, rows)
    elif damage == "wrong-shape":
        row = json.loads(rows[0])
        row["unexpected"] = 1
        _join(f, header, [json.dumps(row).encode(), *rows[1:]])
    elif damage == "row-missing":
        _join(f, header, rows[:-1])
    elif damage == "header-types":
        _join(f, {**header, "signatures": [7, *header["signatures"][1:]]}, rows)
    elif damage == "duplicate-id":
        _join(f, {**header, "ids": [header["ids"][1], *header["ids"][1:]]}, rows)
    elif damage == "row-of-another-id":
        _join(f, header, [rows[1], rows[0], *rows[2:]])
    elif damage == "row-not-json":
        _join(f, header, [b"{not json", *rows[1:]])
    else:  # the whole document of format 1, under this key
        doc = {"format": 1, "key": header["key"], "tuples": header["tuples"],
               "entries": [json.loads(r) for r in rows]}
        f.write_text(json.dumps(doc))
    assert cache.load_entries(files, parse_file, Entry, CODE) == want
    assert cache.read(cache.key_for(files, CODE), Entry) == want  # rewritten, usable again


@pytest.mark.parametrize("damage", ["wrong-shape", "row-of-another-id", "row-not-json"])
def test_a_row_that_does_not_rebuild_is_parsed_when_used(xdg, damage):
    """Under a crc that fits, a bad row is found only when its entry is used: that entry
    comes from the parsed TOML, and the file is rewritten."""
    files = _files()
    want = _parsed(files)
    cache.load_entries(files, parse_file, Entry, CODE)
    (f,) = _kb_files(xdg)
    header, rows = _split(f)
    if damage == "wrong-shape":
        row = json.loads(rows[0])
        del row["cause"]
        rows = [json.dumps(row).encode(), *rows[1:]]
    elif damage == "row-of-another-id":
        rows = [rows[1], rows[0], *rows[2:]]
    else:
        rows = [b"[]", *rows[1:]]
    _join(f, header, rows)
    got = cache.load_lazy(files, parse_file, Entry, CODE)
    assert isinstance(got, cache.LazyEntries)
    assert got[want[0].id] == want[0] and list(got.values()) == want
    assert cache.read(cache.key_for(files, CODE), Entry) == want  # rewritten


def test_a_lazy_hit_is_the_parsed_knowledge_base(xdg):
    """The same entries, ids, order, signatures and matches as a KB built from parsing."""
    from ascend_doctor.knowledge import KnowledgeBase

    files = _files()
    want = _parsed(files)
    cache.load_entries(files, parse_file, Entry, CODE)
    lazy = cache.load_lazy(files, _no_parse, Entry, CODE)
    assert isinstance(lazy, cache.LazyEntries)
    parsed, cached = KnowledgeBase(want), KnowledgeBase(lazy)
    assert cached.signatures() == parsed.signatures()
    assert list(cached.entries) == list(parsed.entries)
    assert len(cached.entries) == len(parsed.entries) and cached.entries == parsed.entries
    assert cached.get("EZ9999") == parsed.get("EZ9999")
    assert [e.id for e in cached.search("hccl timeout")] == \
        [e.id for e in parsed.search("hccl timeout")]


def test_a_file_others_can_write_is_not_read(xdg):
    files = _files()
    cache.load_entries(files, parse_file, Entry, CODE)
    (f,) = _kb_files(xdg)
    os.chmod(f, 0o666)
    assert cache.read(cache.key_for(files, CODE), Entry) is None


def test_a_symlinked_cache_dir_is_not_used(xdg, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, xdg / "ascend-doctor")
    files = _files()
    assert cache.load_entries(files, parse_file, Entry, CODE) == _parsed(files)
    assert list(elsewhere.iterdir()) == []


def test_a_group_writable_cache_dir_is_not_used(xdg):
    d = xdg / "ascend-doctor"
    d.mkdir()
    os.chmod(d, 0o777)
    files = _files()
    cache.load_entries(files, parse_file, Entry, CODE)
    assert list(d.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another uid")
def test_root_under_another_users_home_writes_nothing(tmp_path, monkeypatch):
    home = tmp_path / "alice"
    home.mkdir()
    os.chown(home, 4242, 4242)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("ASCEND_DOCTOR_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(home))
    files = _files()
    assert cache.load_entries(files, parse_file, Entry, CODE) == _parsed(files)
    assert list(home.iterdir()) == []


def test_switched_off_writes_nothing(xdg, monkeypatch):
    monkeypatch.setenv("ASCEND_DOCTOR_CACHE", "0")
    files = _files()
    assert cache.load_entries(files, parse_file, Entry, CODE) == _parsed(files)
    assert not (xdg / "ascend-doctor").exists()


def test_a_parse_error_is_raised_and_nothing_cached(xdg):
    files = [("bad.toml", b"[[entry]]\nid = 'ASC-LIB-999'\n")]
    with pytest.raises(knowledge.KnowledgeError, match="bad.toml"):
        cache.load_entries(files, parse_file, Entry, CODE)
    assert not (xdg / "ascend-doctor").exists() or not list((xdg / "ascend-doctor").iterdir())


def test_compat_matrix_cached_is_the_parsed_toml(xdg):
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the tomli backport (a dependency there)
        import tomli as tomllib

    (raw,) = [r for n, r in data_files() if n == "compat.toml"]
    want = tomllib.loads(raw.decode("utf-8"))
    loads = lambda r: tomllib.loads(r.decode("utf-8"))  # noqa: E731
    assert cache.load_doc("compat.toml", raw, loads, CODE) == want
    (f,) = [p for p in (xdg / "ascend-doctor").iterdir() if p.name.startswith("toml-compat-")]
    assert cache.load_doc("compat.toml", raw, _no_parse, CODE) == want  # a hit: not parsed
    f.write_text('{"format": 1, "key": "x", "doc": {"torch_python": []}}')  # another key
    assert cache.load_doc("compat.toml", raw, loads, CODE) == want
    f.write_bytes(b"\xff")
    assert cache.load_doc("compat.toml", raw, loads, CODE) == want
    knowledge.compat.cache_clear()
    try:
        assert knowledge.compat() == want
    finally:
        knowledge.compat.cache_clear()


def _derived(kb) -> dict:
    from ascend_doctor.knowledge.gate import anchor
    from ascend_doctor.probes.logs import required_literal

    pats = kb.signatures()
    return {"anchors": [[a.kind, a.text] for a in map(anchor, pats)],
            "literals": [required_literal(p) for p in pats]}


def test_signature_keys_cached_are_the_derived_ones(xdg, monkeypatch):
    """The gate anchors and prefilter literals kept in the cache are what parsing every
    pattern gives; a second KB object reads them back without deriving anything."""
    from ascend_doctor.knowledge import KnowledgeBase, gate

    entries = _parsed(_files())
    want = _derived(KnowledgeBase(entries))
    assert KnowledgeBase(entries).signature_keys() == want
    (f,) = [p for p in (xdg / "ascend-doctor").iterdir() if p.name.startswith("derived-")]
    assert (f.stat().st_mode & 0o777) == 0o600
    monkeypatch.setattr(gate, "anchor", lambda p: (_ for _ in ()).throw(AssertionError(p)))
    kb = KnowledgeBase(entries)
    assert kb.signature_keys() == want
    _, g = kb._flat()  # the gate built from the cached anchors
    assert g.candidates("torch_npu: EngineDeadError raised") != []


@pytest.mark.parametrize("damage", ["garbage", "wrong-shape", "wrong-types"])
def test_a_damaged_signature_keys_cache_is_derived_again(xdg, damage):
    from ascend_doctor.knowledge import KnowledgeBase

    entries = _parsed(_files())
    want = _derived(KnowledgeBase(entries))
    KnowledgeBase(entries).signature_keys()
    (f,) = [p for p in (xdg / "ascend-doctor").iterdir() if p.name.startswith("derived-")]
    doc = json.loads(f.read_text())
    if damage == "garbage":
        f.write_bytes(b"\x00{not json")
    elif damage == "wrong-shape":  # a document of the right key whose lists are one short
        doc["doc"]["anchors"] = doc["doc"]["anchors"][:-1]
        f.write_text(json.dumps(doc))
    else:  # the right lengths, values of other types
        doc["doc"]["literals"][0] = 7
        doc["doc"]["anchors"][0] = ["regex", 1]
        f.write_text(json.dumps(doc))
    assert KnowledgeBase(entries).signature_keys() == want


def test_signature_keys_without_a_cache(monkeypatch):
    from ascend_doctor.knowledge import KnowledgeBase

    monkeypatch.setenv("ASCEND_DOCTOR_CACHE", "0")
    kb = KnowledgeBase(_parsed(_files()))
    assert kb.signature_keys() == _derived(kb)
