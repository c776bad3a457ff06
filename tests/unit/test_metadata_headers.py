"""read_headers (doctor/probes/packages.py) reads a METADATA header block as the stdlib
email parser does (HeaderParser, compat32: what the core metadata spec names), which it
replaced to spare its import: the same fields, values and order on real METADATA files,
the fuzz corpus, and generated blocks with folding, odd line ends and malformed lines."""

from __future__ import annotations

from email.parser import HeaderParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascend_doctor.probes.packages import parse_metadata, read_headers
from tests.fuzz.harness import corpus


def reference(text: str) -> list[tuple[str, str]]:
    return list(HeaderParser().parsestr(text).items())


def _real_metadata() -> list[Path]:
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    return sorted(site.glob("*.dist-info/METADATA"))[:60]


@pytest.mark.parametrize("path", _real_metadata(), ids=lambda p: p.parent.name)
def test_installed_metadata(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    assert read_headers(text) == reference(text)


def test_fuzz_corpus():
    for raw in corpus("metadata"):
        for text in (raw.decode("utf-8", "replace"), raw.decode("latin-1")):
            assert read_headers(text) == reference(text)


PIECES = st.sampled_from(["Name", "Version", "Requires-Dist", "name", ":", ": ", " ", "\t",
                          "\n", "\r\n", "\r", "From ", "x", "torch==2.1", "; extra == 'a'",
                          "a b", "\u00e9", "=", "\f", "\x0b", "\x85", "\u2028", "\n\n"])


@settings(max_examples=400)
@given(st.lists(PIECES, max_size=40))
def test_generated_header_blocks(pieces):
    text = "".join(pieces)
    assert read_headers(text) == reference(text)


@given(st.text(max_size=300))
def test_any_text(text):
    assert read_headers(text) == reference(text)


def test_long_block_across_the_parser_s_8192_reads():
    text = "Name: a\n" + "".join(f"Requires-Dist: p{i}\r\n" for i in range(900)) + "Version: 1\n"
    assert read_headers(text) == reference(text)
    assert len(parse_metadata(text).requires) == 900
