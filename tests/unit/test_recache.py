"""doctor/recache.py: regexes served from the user cache are the patterns ``re`` compiles,
damaged or foreign files cost only time, and nothing is installed without a safe place.

Each scenario runs in a fresh interpreter: ``re`` keeps its own in-memory cache, and the
CLI (imported by other tests) installs the hook in this process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascend_doctor import recache

pytestmark = pytest.mark.skipif(recache.cache_name() is None or recache._compiler() is None,
                                reason="not CPython 3.11+: the hook is never installed")

# what the CLI meets: groups, names, flags, classes, bytes, non-ASCII, lone surrogates
PATTERNS = [
    (r"(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>\S+)", 0),
    (r"token|secret|passw(or)?d", re.IGNORECASE),
    (r"^\s*include\s+(\S+)", re.MULTILINE),
    (r"EZ\d{4,6}|ERR\d+", 0),
    (r"aclnn\w+ failed.*?(?:code|错误码)[:=]\s*(\d+)", re.IGNORECASE | re.DOTALL),
    ("[\ud800-\udfff]+", 0),  # real lone surrogates, not escapes
    (r"(a)(b)?(?:c)(?P<d>d)", 0),
    (rb"\x00[\x80-\xff]{2}(?P<tag>..)", 0),
    (r"ß|ǅ|ﬃ", re.IGNORECASE),
    (r"(?x) \d+ \# [ ]", 0),
]
TEXTS = ["key = value", "TOKEN=abc", "  include /etc/ld.so.conf.d/*.conf", "ERR123 EZ9999",
         "aclnnAdd failed, code: 507015", "\ud800x", "abd abcd", "SS ǆ ffi", "12 # "]

SCRIPT = r"""
import json, re, sys
from ascend_doctor import recache
installed = recache.install()
pats = [(p.encode("latin-1") if kind == "b" else p, f) for kind, p, f in json.loads(sys.argv[1])]
texts = json.loads(sys.argv[2])
out = []
for p, f in pats:
    pat = re._compiler.compile(p, f)
    ref = recache._state["orig"](p, f) if installed else pat
    found = []
    for t in texts:
        t = t.encode("utf-8", "surrogatepass") if isinstance(p, bytes) else t
        found.append([repr((m.span(), m.groupdict(), m.lastgroup, m.lastindex))
                          for m in pat.finditer(t)])
    out.append({"equal": pat == ref, "groupindex": pat.groupindex == ref.groupindex,
                "groups": pat.groups == ref.groups, "found": found})
print(json.dumps({"installed": installed, "hook": re._compiler.compile.__module__,
                  "served": len(recache._state.get("used", ())) - len(recache._state.get("new", ())),
                  "out": out}))
"""


def _arg(patterns) -> str:
    return json.dumps([("b", p.decode("latin-1"), int(f)) if isinstance(p, bytes)
                       else ("s", p, int(f)) for p, f in patterns], ensure_ascii=True)


def _run(xdg: Path, patterns=PATTERNS, **env) -> dict:
    e = {**os.environ, "XDG_CACHE_HOME": str(xdg), **env}
    if "ASCEND_DOCTOR_CACHE" not in env:
        e.pop("ASCEND_DOCTOR_CACHE", None)
    r = subprocess.run([sys.executable, "-c", SCRIPT, _arg(patterns),
                        json.dumps(TEXTS, ensure_ascii=True)],
                       capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])  # re.DEBUG prints its parse first


def _reference() -> list:
    """What ``re`` itself finds, in this process without the hook's table."""
    orig = recache._state.get("orig") or recache._compiler().compile
    out = []
    for p, f in PATTERNS:
        pat = orig(p, f)
        found = []
        for t in TEXTS:
            t = t.encode("utf-8", "surrogatepass") if isinstance(p, bytes) else t
            found.append([repr((m.span(), m.groupdict(), m.lastgroup, m.lastindex))
                          for m in pat.finditer(t)])
        out.append(found)
    return out


def _cache_file(xdg: Path) -> Path:
    return xdg / "ascend-doctor" / recache.cache_name()


def test_first_run_keeps_every_pattern_and_the_second_serves_them_all(xdg):
    first = _run(xdg)
    assert first["installed"] and first["served"] == 0
    assert all(o["equal"] and o["groupindex"] and o["groups"] for o in first["out"])
    doc = json.loads(_cache_file(xdg).read_text())
    assert doc["format"] == recache.FORMAT
    kept = {(k, p, f) for k, p, f, *_ in doc["entries"]}
    assert ("s", "[\ud800-\udfff]+", 0) in kept  # a lone surrogate survives the JSON file
    assert ("b", PATTERNS[7][0].decode("latin-1"), 0) in kept
    second = _run(xdg)
    assert second["served"] == len(PATTERNS)  # nothing compiled by re a second time
    assert all(o["equal"] and o["groupindex"] and o["groups"] for o in second["out"])
    assert [o["found"] for o in second["out"]] == [o["found"] for o in first["out"]]
    assert [o["found"] for o in second["out"]] == _reference()


def test_damaged_rows_cost_only_their_compile(xdg):
    _run(xdg)
    path = _cache_file(xdg)
    doc = json.loads(path.read_text())
    rows = doc["entries"]
    bad = [list(r) for r in rows]
    bad[0][4] = recache._row(("s", "", 0), (0, [99999, 1, 2], 0, {}))[4]  # code _sre refuses
    bad[1][5] = 10**6                              # a group count out of bounds
    bad[2][6] = {"x": 0}                           # a group numbered 0
    bad[3] = bad[3][:5]                            # a short row
    bad[4][4] = "zz" + bad[4][4][2:]               # not hex
    bad[5][4] = bad[5][4][:-2]                     # not whole words
    doc["entries"] = bad + [["s", "never asked", 0, 0, [], 0, {}], "junk", None]
    path.write_text(json.dumps(doc))
    os.chmod(path, 0o600)
    out = _run(xdg)
    assert all(o["equal"] and o["groupindex"] and o["groups"] for o in out["out"])
    assert [o["found"] for o in out["out"]] == _reference()
    assert out["served"] >= len(PATTERNS) - 6  # the rows left intact still serve


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"format": 99, "entries": []}',
                                     b'{"format": 1, "entries": {}}', b"\xff\xfe",
                                     b"[" * 100000])
def test_an_unreadable_file_is_no_file(xdg, content):
    path = _cache_file(xdg)
    path.parent.mkdir(mode=0o700)
    path.write_bytes(content)
    os.chmod(path, 0o600)
    out = _run(xdg)
    assert out["installed"] and out["served"] == 0
    assert [o["found"] for o in out["out"]] == _reference()
    assert json.loads(path.read_text())["entries"]  # rewritten with this run's patterns


def test_a_file_others_can_write_is_not_read(xdg):
    _run(xdg)
    os.chmod(_cache_file(xdg), 0o666)
    assert _run(xdg)["served"] == 0


def test_not_installed_without_a_safe_place_or_when_switched_off(tmp_path, xdg):
    open_dir = tmp_path / "shared"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)  # anyone could plant a cache here
    out = _run(open_dir)
    assert not out["installed"] and out["hook"] != recache.__name__
    assert not (open_dir / "ascend-doctor").exists()
    off = _run(xdg, ASCEND_DOCTOR_CACHE="0")
    assert not off["installed"] and not (xdg / "ascend-doctor").exists()


def test_debug_patterns_are_never_served(xdg):
    pats = [(r"a+b", re.DEBUG)]
    _run(xdg, pats)
    assert not _cache_file(xdg).exists() or all(
        r[2] & re.DEBUG == 0 for r in json.loads(_cache_file(xdg).read_text())["entries"])


def test_the_table_is_bounded(xdg):
    many = [(f"x{i}y+", 0) for i in range(recache.MAX_ENTRIES + 50)]
    _run(xdg, many)
    doc = json.loads(_cache_file(xdg).read_text())
    assert len(doc["entries"]) <= recache.MAX_ENTRIES


# a small regex grammar: what a KB signature or a redaction rule is made of
_atom = st.sampled_from(["a", "b", "\\d", "\\w", "\\s", ".", "[a-c]", "[^x]", "é", "K", "ſ",
                         "\\.", "(?:ab)", "(x|y)"])
_piece = st.tuples(_atom, st.sampled_from(["", "*", "+", "?", "{1,3}", "*?"])).map("".join)
_regex = st.lists(_piece, min_size=1, max_size=8).map("".join)
_flags = st.sampled_from([0, re.I, re.M, re.S, re.I | re.S, re.ASCII, re.I | re.ASCII])


@settings(max_examples=300, deadline=None)
@given(_regex, _flags, st.text(alphabet="abcxyKkſé.19 _\n", max_size=30))
def test_a_kept_entry_rebuilds_re_own_pattern(pattern, flags, text):
    comp = recache._compiler()
    ref = re.compile(pattern, flags)
    value = recache.entry_for(comp, pattern, flags, ref)
    assert value is not None
    row = json.loads(json.dumps([recache._row(("s", pattern, flags), value)], ensure_ascii=True))
    key, stored = recache._entry(row[0])
    assert key == ("s", pattern, flags)
    built = recache._build(pattern, stored)
    assert built == ref and built.groupindex == ref.groupindex
    assert [m.span() for m in built.finditer(text)] == [m.span() for m in ref.finditer(text)]


def test_nothing_is_kept_when_the_rebuilt_pattern_differs_from_re_own():
    """The equality guard: internals that build other code (another interpreter's, say)
    keep nothing rather than a pattern that matches differently."""
    comp = recache._compiler()

    class Other:
        _parser = comp._parser

        @staticmethod
        def _code(parsed, flags):
            return comp._code(comp._parser.parse("b+", flags), flags)

    ref = re.compile("a+")
    assert recache.entry_for(comp, "a+", 0, ref) is not None
    assert recache.entry_for(Other, "a+", 0, ref) is None
