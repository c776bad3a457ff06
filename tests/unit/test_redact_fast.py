"""The fast byte redactor (lines without a hint are copied, not run through redact_text) gives
exactly what running every line through redact_text gives: a differential test on texts
built from every secret shape, its near misses, case-folding letters and invalid UTF-8,
whole and fed to the stream Redactor in arbitrary chunks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascend_doctor.redact import (MAX_TEXT, Redactor, _patterns, _pipeline, _redact_dirty_lines,
                                  _redact_text_plain, redact_bytes, redact_text)

FRAGMENTS = [
    "OBS_AK=", "OBS_SK='x1'", "HUAWEICLOUD_SDK_SK=", "MYSQL_PWD=", "DB_PASS=", "password: ",
    "  - token: ", "?token=", "&access_token=", "url=https://h/?api_key=", "https://user:",
    "@pypi.example", "pw@pypi.example", "https://abcdefghijklmnopqrstu@github.com", "sshpass -p ", "curl -u ",
    "admin:", "--user=", "--proxy-user ", "-U ", "mysql -h db -p ", "mariadb -pX", "--password ",
    "--api-key=", "--hf-token ", "Authorization: ", "authorization: Basic ", "Bearer ",
    "cookie: a=b", "Set-Cookie: s=1", "x-api-key: k", '"api_key": "v"', "'secret': 'v'",
    "sk-abcdefghijklmnopqrst", "hf_abcdefghijklmnopqrst", "ghp_abcdefghijklmnopqrstuvwx",
    "xoxb-1234567890ab", "AKIAABCDEFGHIJKLMNOP", "eyJabcdefghij.abcdefghij.abcdefghij",
    "tokens/s", "tokenizer", "TOKENS=3", "author=me", "bypass=1", "task=2", "peak=3", "PWD=/x",
    "a_pwd=", "x.pwd=", "ask=", "_sk=", "SK=", "mask=", "sshpassword", "passed", "pass=",
    "K\u212aEY=", "\u0131", "PA\u017fS=", "\u0130", "ſecret=", "coo\u212aie: x", "Authorızation: x", "Baſic abcdefghij", "basıc abcdefghij",
    "BASİC abcdefghij", "cookıe: x", "Basic abcdefghij", "AWS_CREDENTIALS=",
    " ", "\t", "=", ":", "'", '"', "&", ";", "/", "@", "-", "_", ".", "x", "v", "12", "é", "中文",
    "\x00", "\x1b[31m", "\u00a0", "\u2003",
]
RAW = [b"\xff", b"\xc3", b"\xe2\x84", b"\x80"]


@st.composite
def texts(draw) -> bytes:
    parts = draw(st.lists(st.one_of(st.sampled_from(FRAGMENTS).map(str.encode),
                                    st.sampled_from(RAW), st.just(b"\n")), max_size=60))
    return b"".join(parts)


class Reference(Redactor):
    """Every slice through the whole-text patterns (no hint gate anywhere)."""

    _text = staticmethod(_redact_text_plain)

    def _redact(self, chunk: bytes) -> bytes:
        return self._redact_all(chunk)


def _slow(data: bytes) -> bytes:
    r = Reference()
    return r.feed(data) + r.close()


@settings(max_examples=600)
@given(texts())
def test_fast_lines_equal_redact_text_on_every_line(data: bytes) -> None:
    assert _redact_dirty_lines(data) == Reference()._redact_all(data)


@settings(max_examples=300)
@given(texts(), st.integers(1, 400), st.sampled_from(["", "\ud800", "\udcff x"]))
def test_long_redact_text_equals_the_whole_text_patterns(data: bytes, times: int,
                                                         odd: str) -> None:
    text = (data.decode("utf-8", "surrogateescape") + odd) * times  # past the gate size
    assert redact_text(text) == _redact_text_plain(text)


@settings(max_examples=300)
@given(texts(), st.lists(st.integers(0, 400), max_size=6),
       st.booleans())
def test_stream_in_chunks_equals_the_all_lines_redactor(data: bytes, cuts: list[int],
                                                        pem: bool) -> None:
    if pem:
        data = data + b"\n-----BEGIN RSA PRIVATE KEY-----\nMIIpem\n" + data + \
            b"\n-----END RSA PRIVATE KEY-----\n" + data
    fast, slow = Redactor(), Reference()
    out_f, out_s, pos = [], [], 0
    for c in sorted(set(cuts)) + [len(data)]:
        out_f.append(fast.feed(data[pos:c]))
        out_s.append(slow.feed(data[pos:c]))
        pos = max(pos, c)
    assert b"".join(out_f) + fast.close() == b"".join(out_s) + slow.close()


@pytest.mark.parametrize("line_len", [MAX_TEXT - 1, MAX_TEXT, MAX_TEXT + 1, MAX_TEXT + 4000])
def test_over_long_lines_without_a_hint_are_cut_as_before(line_len: int) -> None:
    data = b"short\n" + b"y" * line_len + b"\nHF_TOKEN=hf_abcdefghijklmnopqrst\ntail"
    assert redact_bytes(data) == _slow(data)
    multibyte = b"a\n" + "中".encode() * (MAX_TEXT // 2) + b"\nb"  # > MAX_TEXT bytes, < chars
    assert redact_bytes(multibyte) == _slow(multibyte)


def test_every_pair_of_fragments_on_a_line_of_its_own() -> None:
    """Deterministic: each fragment followed by each other, at a line start and inside."""
    lines = [f"{pre}{a}{b}" for a in FRAGMENTS for b in FRAGMENTS for pre in ("", "x ")]
    data = "\n".join(lines).encode("utf-8", "surrogateescape")
    assert _redact_dirty_lines(data) == Reference()._redact_all(data)


@settings(max_examples=400, deadline=None)
@given(texts(), st.text(max_size=40))
def test_the_hint_gate_never_skips_a_text_a_pattern_changes(data: bytes, noise: str) -> None:
    """_pipeline returns a text as it is only where every pattern would leave it alone."""
    for text in (data.decode("utf-8", "surrogateescape"), noise,
                 noise + data.decode("utf-8", "replace")):
        assert _pipeline(text) == _patterns(text)


def test_the_hint_gate_on_every_fragment_alone_and_in_pairs() -> None:
    for a in FRAGMENTS:
        for b in ("", "x", " ", *FRAGMENTS[:40]):
            assert _pipeline(a + b) == _patterns(a + b), (a, b)


def test_an_unchanged_message_is_returned_itself() -> None:
    """A Msg that holds no secret comes back as the very object, so it stays translatable."""
    from ascend_doctor.i18n import T

    msg = T("{path} is searched first", path="/usr/local/Ascend/driver/lib64")
    assert redact_text(msg) is msg
    assert redact_text("OBS_SK=abcdef") == "OBS_SK=<redacted>"
