"""Every core parser is total: random and mutated real inputs give a value or a named error.

The corpus under tests/fuzz/corpus/ holds real samples (this machine's ld.so.conf tree and
/proc/net tables, METADATA and entry_points.txt of the torch_npu and vllm_ascend wheels, the
package probe's own JSON output, /proc/<pid>/stat|status|cmdline of real processes).
"""

from __future__ import annotations

import json

from hypothesis import example, given, strategies as st

from ascend_doctor.errors import ParseError
from ascend_doctor.host import ProcInfo, proc_info_from_files
from ascend_doctor.probes.ldconf import Directive, parse_ldconf_text
from ascend_doctor.probes.packages import (Package, Packages, parse_entry_points, parse_metadata,
                                    parse_packages_json)
from ascend_doctor.probes.procs import parse_environ
from ascend_doctor.procnet import parse_proc_net
from tests.fuzz.harness import (NotTotal, assert_total, byte_inputs, corpus, json_mutated,
                                text_inputs)

import pytest


# -- the harness itself must be able to fail ------------------------------------------------
def test_harness_rejects_unnamed_exceptions():
    def bad(text: str) -> int:
        return int(text.split()[1])

    assert assert_total(bad, "a 7") == 7
    with pytest.raises(NotTotal, match="IndexError"):
        assert_total(bad, "a")
    err = assert_total(lambda s: (_ for _ in ()).throw(ParseError("x", "bad")), "")
    assert isinstance(err, ParseError)
    with pytest.raises(NotTotal, match="empty message"):
        assert_total(lambda s: (_ for _ in ()).throw(ValueError("")), "", allowed=(ValueError,))
    with pytest.raises(NotTotal):
        assert_total(lambda s: (_ for _ in ()).throw(ValueError("other")), "",
                     allowed=((ValueError, "^METADATA"),))


# -- ld.so.conf ----------------------------------------------------------------------------
@given(text_inputs(corpus("ldconf")))
def test_ldconf_text_total(text):
    out = assert_total(parse_ldconf_text, text, allowed=())
    assert all(isinstance(d, Directive) for d in out)
    assert all(d.value.startswith("/") for d in out if d.kind == "dir")
    assert all(d.line >= 1 for d in out)


# -- Python packages -----------------------------------------------------------------------
@given(text_inputs(corpus("metadata")))
def test_metadata_total(text):
    out = assert_total(parse_metadata, text, allowed=((ValueError, "^METADATA without"),))
    if isinstance(out, Package):
        assert out.name and out.version


@given(text_inputs(corpus("entry_points")))
def test_entry_points_total(text):
    out = assert_total(parse_entry_points, text, allowed=())
    assert all(len(e) == 3 and all(isinstance(x, str) for x in e) for e in out)


_PKG_DOCS = [json.loads(b) for b in corpus("packages_json")]


@given(st.one_of(text_inputs(corpus("packages_json")),
                 json_mutated(_PKG_DOCS).map(json.dumps)))
@example('{"python": "3.11", "packages": null}')  # found by this test: AttributeError
@example('{"packages": {"torch": "2.13.0"}}')
def test_packages_json_total(text):
    out = assert_total(parse_packages_json, text, "subprocess python3")
    if isinstance(out, ParseError):
        assert out.source == "subprocess python3"
    else:
        assert isinstance(out, Packages)


# -- /proc ---------------------------------------------------------------------------------
@given(text_inputs(corpus("proc_net")), st.sampled_from(["tcp", "tcp6", "udp", "udp6"]))
@example(corpus("proc_net")[0].decode(), "tcp6")  # found by this test: struct.error
@example("h\n 0: FFFFFFFFFF:0050 00000000:0000 0A\n", "tcp")
def test_proc_net_total(text, proto):
    out = assert_total(parse_proc_net, text, proto, allowed=())
    for c in out:
        assert 0 <= c.laddr[1] and c.type in ("tcp", "udp")


@given(byte_inputs(corpus("environ")))
def test_environ_total(blob):
    env = assert_total(parse_environ, blob, allowed=())
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())


_ENV_NAME = st.text(st.characters(blacklist_characters="=\0", blacklist_categories=("Cs",)),
                    min_size=1, max_size=12)
_ENV_VALUE = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                     max_size=40)


@given(st.dictionaries(_ENV_NAME, _ENV_VALUE, max_size=8))
def test_environ_round_trip(env):
    blob = b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())
    assert parse_environ(blob) == env


@given(st.integers(1, 2**22), byte_inputs(corpus("proc_cmdline")), byte_inputs(corpus("proc_stat")),
       byte_inputs(corpus("proc_status")))
@example(1, b"", "1 (x) S ² 0".encode(), "Uid:\t①\t0".encode())  # found: ValueError
def test_proc_info_total(pid, cmdline, stat, status):
    info = assert_total(proc_info_from_files, pid, cmdline, stat, status, allowed=())
    assert isinstance(info, ProcInfo) and info.pid == pid and isinstance(info.ppid, int)


def test_proc_info_real_sample():
    stat, status = corpus("proc_stat")[1], corpus("proc_status")[1]
    info = proc_info_from_files(77, b"sleep\x001\x00", stat, status)
    assert info.name == "sleep" and info.cmdline == ("sleep", "1") and info.uid == 0
