"""Secret redaction, applied at collection time and again when any report is rendered.

A name is secret when it contains one of the markers the collect_env tools and our issue
agreed on (TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL, AUTH, COOKIE, SIGNATURE and a
whole-part SIG, for pre-signed OBS/S3/SAS URLs), or ends in a
password/access-key part (*_PWD, *_PASS, Huawei Cloud's OBS_AK / OBS_SK), case-insensitively.

Every pattern is linear-time: a name is matched only where a run of name characters starts
(a lookbehind), with possessive quantifiers, and secret-ness is decided in Python on the
match; nothing can backtrack over a run it already consumed. Input beyond MAX_TEXT is cut
with a marker (the kept part redacted), so one hostile argv or log line costs bounded time.
Bytes are redacted line-wise (surrogateescape keeps invalid UTF-8 and NULs byte-exact), and
Redactor does the same for a stream fed in arbitrary chunks.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

REDACTED = "<redacted>"
MAX_TEXT = 1 << 20  # characters of one string / bytes of one line that are kept
TRUNCATED = "…<truncated {n} chars>"
_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
# TOKEN but not TOKENS/TOKENIZER (--max-num-batched-tokens is a count, not a secret);
# AUTH but not AUTHOR; PWD/PASS/AK/SK only as a whole part of a name (DB_PASS, MYSQL_PWD,
# OBS_AK, HUAWEICLOUD_SDK_SK), never PWD itself, BYPASS, TASK or PEAK.
_MARKER = (r"(?:TOKEN(?!S(?![A-Za-z])|IZER)|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH(?!OR)"
           r"|COOKIE|(?<=[_.-])PWD(?![A-Za-z])|(?<![A-Za-z])PASS(?![A-Za-z])"
           r"|(?<![A-Za-z])[AS]K(?![A-Za-z])"
           # pre-signed URLs: OBS/S3 v2 Signature=, S3 v4 X-Amz-Signature=, Azure SAS sig=
           r"|SIGNATURE(?!S(?![A-Za-z]))|(?<![A-Za-z])SIG(?![A-Za-z]))")
_MARKER_RE = re.compile(_MARKER, re.IGNORECASE)
_NC = r"A-Za-z0-9_.\-"  # characters of a name
# No possessive quantifiers (Python 3.10's re has none): every repeat below is followed by a
# character class disjoint from its own, so a failed match backtracks at most once over it.
_NAME = rf"(?<![{_NC}])([{_NC}]+)"

# NAME=value in env files, systemd Environment= lines, shell exports, URL queries.
_ASSIGN = re.compile(rf"{_NAME}([ \t]*=[ \t]*)")
_VALUE = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'&;]+")
# --api-key VALUE / --api-key=VALUE / --hf-token VALUE and friends on command lines.
_FLAG = re.compile(rf"(?<![{_NC}])(--[{_NC}]+)(=|[ \t]+)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)")
# HTTP headers and bearer tokens anywhere in text.
_HEADER = re.compile(r"(?im)^((?:proxy-)?authorization|cookie|set-cookie|x-api-key)"
                     r"([ \t]*:[ \t]*)([^\n]+)")
_BEARER = re.compile(r"(?i)(?<![A-Za-z0-9_])(bearer|basic)([ \t]+)([A-Za-z0-9._~+/=-]{8,})")
# "name": "value" in JSON, and 'name': 'value' in Python reprs of dicts (headers, env).
_JSON_FIELD = re.compile(rf"(\"[{_NC} ]{{1,200}}\"[ \t]*:[ \t]*)(\"(?:[^\"\\\n]|\\.)*\")")
_REPR_FIELD = re.compile(rf"('[{_NC} ]{{1,200}}'[ \t]*:[ \t]*)('[^'\n]*'|\"[^\"\n]*\")")
# YAML / ini "key: value" at the start of a line (password: x, - token: y).
_YAML = re.compile(rf"(?m)^([ \t]*(?:-[ \t]+)?)([{_NC}]+)([ \t]*:[ \t]+)([^\s#][^\n]*)")
# Tokens recognisable by their own shape, wherever they stand: OpenAI-style, Hugging Face,
# GitHub, Slack, AWS access key ids, JWTs.
_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{16,}"
                    r"|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}"
                    r"|AKIA[0-9A-Z]{16}(?![0-9A-Z])"
                    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})")
# URL userinfo: scheme://user:PASSWORD@host, and scheme://LONGTOKEN@host (git over https).
_URL_CRED = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,30}://)([^/\s:@]+)"
                       r"(:[^@\s/]+)?(@)")
# Other users' argv in ps-like text: curl/wget -u user:pw, sshpass -p PW, mysql -p PW.
_USER_FLAG = re.compile(r"(?<!\S)(-u|--user|--proxy-user|-U)([ \t]+|=)([^\s:]+:)(\S+)")
_PW_PROG = re.compile(r"(?<![\w/.-])((?:sshpass|mysql|mysqladmin|mysqldump|mariadb)"
                      r"(?:[ \t]+[^\s]+){0,8}?[ \t]+-p)([ \t]*)([^\s-]\S*)")
# PEM private keys: everything between BEGIN and END goes.
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_PEM_BEGIN_B = re.compile(_PEM_BEGIN.pattern.encode())
_YAML_NOT = re.compile(r"(?:Error|Exception|Warning)$")
_PW_PROGS = {"sshpass", "mysql", "mysqladmin", "mysqldump", "mariadb"}
_USER_PROGS = {"curl", "wget"}


def is_secret_name(name: str) -> bool:
    return _MARKER_RE.search(name) is not None


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of an environment with every secret-named value replaced."""
    return {k: (REDACTED if is_secret_name(k) else redact_text(v)) for k, v in env.items()}


def _named(m: re.Match) -> str:
    if not is_secret_name(m.group(1)):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{REDACTED}"


def _assignments(text: str) -> str:
    """NAME=value, scanning on after a harmless NAME= so url=https://h/?api_key=X is seen."""
    out, pos = [], 0
    while True:
        m = _ASSIGN.search(text, pos)
        if m is None:
            break
        v = _VALUE.match(text, m.end())
        if v is None or not is_secret_name(m.group(1)):
            out.append(text[pos:m.end()])
            pos = m.end()
            continue
        out.append(text[pos:m.end()] + REDACTED)
        pos = v.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def _json_field(m: re.Match) -> str:
    if not is_secret_name(m.group(1)):
        return m.group(0)
    q = m.group(2)[0]
    return f"{m.group(1)}{q}{REDACTED}{q}"


def _yaml(m: re.Match) -> str:
    name = m.group(2)
    if not is_secret_name(name) or _YAML_NOT.search(name):
        return m.group(0)
    return f"{m.group(1)}{name}{m.group(3)}{REDACTED}"


def _url(m: re.Match) -> str:
    scheme, user, pw, at = m.group(1), m.group(2), m.group(3), m.group(4)
    if pw:
        return f"{scheme}{user}:{REDACTED}{at}"
    return m.group(0) if len(user) < 16 else f"{scheme}{REDACTED}{at}"


def _redact_pem(text: str) -> str:
    """Cut the body of every PEM private key, also one whose END is missing (cut off)."""
    out, pos = [], 0
    while True:
        b = _PEM_BEGIN.search(text, pos)
        if b is None:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos:b.end()])
        e = _PEM_END.search(text, b.end())
        out.append("\n" + REDACTED + "\n")
        if e is None:
            return "".join(out)
        out.append(text[e.start():e.end()])
        pos = e.end()


def redact_text(text: str) -> str:
    """Replace secrets in free text: assignments, flags, headers, tokens, URLs, PEM keys.

    Linear in len(text); text longer than MAX_TEXT is cut (with a marker) first. A long
    text is redacted line by line, only on the lines that hold a hint (_redact_dirty_lines).
    """
    if len(text) <= _GATE_MIN or ("-----BEGIN" in text and _PEM_BEGIN.search(text)):
        return _redact_text_plain(text)
    tail = ""
    if len(text) > MAX_TEXT:
        tail = TRUNCATED.format(n=len(text) - MAX_TEXT)
        text = text[:MAX_TEXT]
    raw = text.encode("utf-8", "surrogatepass")  # any lone surrogate round-trips
    out = _redact_dirty_lines(raw, "surrogatepass")
    return (text if out is raw else out.decode("utf-8", "surrogatepass")) + tail


_GATE_MIN = 4096  # below this the hint scan costs more than the patterns


def _redact_text_plain(text: str) -> str:
    """redact_text on the whole text at once (short texts, PEM keys, the reference)."""
    if not text:
        return text
    tail = ""
    if len(text) > MAX_TEXT:
        tail = TRUNCATED.format(n=len(text) - MAX_TEXT)
        text = text[:MAX_TEXT]
    if "-----BEGIN" in text:
        text = _redact_pem(text)
    out = _pipeline(text)
    return out + tail if tail else out  # unchanged: the very object (a Msg stays one)


# Every pattern of _patterns needs one of these inside its match: "=", ":", "@", "-", a
# token's prefix, or bearer/basic (folded as those patterns fold them). A text without one
# (most evidence strings: argv words, numbers, paths without a dash) cannot change.
_ANY_HINT = re.compile(r"[=:@-]|hf_|gh[pousr]_|xox|AKIA|eyJ|(?i:bearer|basic)")


def _pipeline(text: str) -> str:
    """Every line-local pattern, in order (each substitution stays inside one line)."""
    return _patterns(text) if _ANY_HINT.search(text) else text


def _patterns(text: str) -> str:
    """_pipeline without the hint gate (the reference the tests compare it with)."""
    text = _assignments(text)
    text = _FLAG.sub(_named, text)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _JSON_FIELD.sub(_json_field, text)
    text = _REPR_FIELD.sub(_json_field, text)
    text = _YAML.sub(_yaml, text)
    text = _URL_CRED.sub(_url, text)
    text = _USER_FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{REDACTED}", text)
    text = _PW_PROG.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _TOKEN.sub(REDACTED, text)
    return text


def redact_argv(argv: "list[str] | tuple[str, ...]") -> list[str]:
    """Redact secret values in an argv: after a secret flag (``--api-key sk-…``), sshpass /
    mysql ``-p PW`` (and ``-pPW``), curl/wget ``-u user:PW``."""
    out: list[str] = []
    hide_next = user_next = False
    prog = ""
    for i, arg in enumerate(argv):
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if user_next:
            user, sep, _pw = arg.partition(":")
            out.append(f"{user}:{REDACTED}" if sep else arg)
            user_next = False
            continue
        base = arg.rsplit("/", 1)[-1]
        if base in _PW_PROGS or base in _USER_PROGS or i == 0:
            prog = base
        if arg.startswith("--") and is_secret_name(arg.split("=", 1)[0]):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(arg)
                hide_next = True
            continue
        if prog in _PW_PROGS and arg.startswith("-p") and not arg.startswith("--"):
            out.append("-p" if arg == "-p" else "-p" + REDACTED)
            hide_next = arg == "-p"
            continue
        if arg in ("-u", "--user", "--proxy-user", "-U"):
            out.append(arg)
            user_next = True
            continue
        out.append(redact_text(arg))
    return out


_BINARY_MAGIC = (b"\x7fELF", b"\x1f\x8b", b"PK\x03\x04", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4",
                 b"\x0a\x0d\x0d\x0a", b"\x89PNG")


def is_binary(data: bytes) -> bool:
    """Executables, archives and captures: their offsets matter and they are not text."""
    return data.startswith(_BINARY_MAGIC)


class Redactor:
    """Redacts a byte stream fed in arbitrary chunks, line by line.

    A partial last line is held back until its newline arrives (at most MAX_TEXT bytes:
    longer lines are cut with a marker), so a secret split across two chunks is still seen
    whole. A PEM private key open at a chunk's end stays open into the next one.
    Lines are decoded with surrogateescape: invalid UTF-8 and NULs come out byte-exact.
    """

    _text = staticmethod(redact_text)  # what _redact_all runs on each slice

    def __init__(self) -> None:
        self._pending = b""
        self._skipping = 0  # bytes dropped from the current over-long line
        self._in_pem = False

    def feed(self, data: bytes) -> bytes:
        buf = self._pending + data
        cut = buf.rfind(b"\n") + 1
        whole, self._pending = buf[:cut], buf[cut:]
        out = b""
        if self._skipping and whole:  # the over-long line ends in this chunk
            nl = whole.find(b"\n")
            self._skipping += nl
            out = TRUNCATED.format(n=self._skipping).encode() + b"\n"
            whole, self._skipping = whole[nl + 1:], 0
        elif self._skipping:
            self._skipping += len(self._pending)
            self._pending = b""
            return b""
        if len(self._pending) > MAX_TEXT:
            self._skipping = len(self._pending) - MAX_TEXT
            head, self._pending = self._pending[:MAX_TEXT], b""
            whole += head
        return out + self._redact(whole)

    def close(self) -> bytes:
        tail, self._pending = self._pending, b""
        out = self._redact(tail)
        if self._skipping:
            out += TRUNCATED.format(n=self._skipping).encode()
            self._skipping = 0
        return out

    def _redact(self, chunk: bytes) -> bytes:
        if not chunk:
            return chunk
        if not self._in_pem and (b"-----BEGIN" not in chunk or not _PEM_BEGIN_B.search(chunk)):
            return _redact_dirty_lines(chunk)
        return self._redact_all(chunk)

    def _redact_all(self, chunk: bytes) -> bytes:
        """Every line through redact_text (a PEM key may span lines: the state is kept)."""
        text = chunk.decode("utf-8", "surrogateescape")
        if self._in_pem:  # drop lines up to the END marker
            e = _PEM_END.search(text)
            if e is None:
                return b""
            text, self._in_pem = text[e.start():], False
        last_begin = None
        for last_begin in _PEM_BEGIN.finditer(text):
            pass
        if last_begin is not None and not _PEM_END.search(text, last_begin.end()):
            self._in_pem = True
        if len(text) <= MAX_TEXT:
            return self._text(text).encode("utf-8", "surrogateescape")
        parts, pos = [], 0  # slices end at a newline, so no secret is cut in two
        while pos < len(text):
            end = text.rfind("\n", pos, pos + MAX_TEXT) + 1
            if end <= pos:  # one line longer than MAX_TEXT: redact_text cuts it with a marker
                nl = text.find("\n", pos)
                end = len(text) if nl < 0 else nl + 1
            if len(text) - pos <= MAX_TEXT:
                end = len(text)
            parts.append(self._text(text[pos:end]))
            pos = end
        return "".join(parts).encode("utf-8", "surrogateescape")


# A line no redaction pattern can change is copied as bytes, unread by redact_text: every
# substitution in redact_text (PEM aside) is confined to one line, and each needs one of
# these on that line, found in the ASCII-lowercased bytes (each pattern has a literal
# prefix, so the scan runs at memchr speed). A secret name needs a _MARKER word; headers,
# bearer/basic, URL userinfo, -u user:pw, sshpass/mysql -p and the token shapes have their
# own. The non-ASCII letters that re.IGNORECASE folds onto ASCII ones (İ ı ſ K) mark a line
# too. Over-approximating costs only time; a line missing here would leak, so the
# differential test (tests/unit/test_redact_fast.py) compares with redact_text.
_LITERAL_HINTS = (b"key", b"secret", b"credential", b"auth", b"cookie", b"bearer", b"basic",
                  b"signature",
                  b"mysql", b"mariadb", b"hf_", b"xox", b"eyj",
                  *(c.encode() for c in "\u0130\u0131\u017f\u212a"))  # İ ı ſ K
_REGEX_HINTS = tuple((re.compile(p), None) for p in (
    rb"token(?!s(?![a-z])|izer)", rb"://[^/\s@]*@", rb"-u[ \t=]", rb"--(?:proxy-)?user",
    rb"gh[pousr]_"))
# hints that also need the byte before them checked: PASS, SK, AK, AKIA (a non-letter), PWD
# (one of _.-); "pass" also covers PASSWORD/PASSWD and sshpass
_PASS = re.compile(rb"pass")


def _pass_ok(low: bytes, i: int) -> bool:
    after = low[i + 4:i + 5]
    return (after == b"w" or low[max(i - 3, 0):i] == b"ssh"
            or not ((i and 0x61 <= low[i - 1] <= 0x7A) or (after and 0x61 <= after[0] <= 0x7A)))


def _sk_ok(low: bytes, i: int) -> bool:
    return not (i and 0x61 <= low[i - 1] <= 0x7A)


def _pwd_ok(low: bytes, i: int) -> bool:
    return bool(i) and low[i - 1] in b"_.-"


_SK_PWD = ((re.compile(rb"sk(?![a-z])"), _sk_ok), (re.compile(rb"ak(?:ia|(?![a-z]))"), _sk_ok),
           (re.compile(rb"pwd(?![a-z])"), _pwd_ok), (re.compile(rb"sig(?![a-z])"), _sk_ok))


def _hint_lines(low: bytes) -> list[int]:
    """Start offsets of the lines of ``low`` (lower-cased bytes) that hold a hint. Each
    pattern resumes after the line of its last hit, so a line full of hits costs one."""
    starts: set[int] = set()

    def mark(i: int) -> int:
        starts.add(low.rfind(b"\n", 0, i) + 1)
        nl = low.find(b"\n", i)
        return len(low) if nl < 0 else nl + 1

    for lit in _LITERAL_HINTS:
        i = low.find(lit)
        while i >= 0:
            i = low.find(lit, mark(i))
    for rx, ok in _REGEX_HINTS + ((_PASS, _pass_ok),) + _SK_PWD:
        m = rx.search(low)
        while m is not None:
            i = m.start()
            m = rx.search(low, mark(i) if ok is None or ok(low, i) else i + 1)
    return sorted(starts)


def _redact_dirty_lines(chunk: bytes, errors: str = "surrogateescape") -> bytes:
    """redact_text's result on every line of ``chunk``, computed only for the lines that
    hold a hint or are longer than MAX_TEXT (redact_text cuts those); the rest is copied."""
    starts = _hint_lines(chunk.lower())
    if len(chunk) > MAX_TEXT:  # over-long lines: redact_text cuts them with a marker
        pos, long_ = 0, []  # a line of >= MAX_TEXT bytes (chars <= bytes); steps of MAX_TEXT
        while len(chunk) - pos >= MAX_TEXT:
            nl = chunk.rfind(b"\n", pos, pos + MAX_TEXT)
            if nl >= 0:
                pos = nl + 1
                continue
            long_.append(pos)
            nl = chunk.find(b"\n", pos + MAX_TEXT)
            if nl < 0:
                break
            pos = nl + 1
        if long_:
            starts = sorted(set(starts) | set(long_))
    if not starts:
        return chunk
    out, done = [], 0
    for start in starts:
        nl = chunk.find(b"\n", start)
        end = len(chunk) if nl < 0 else nl + 1
        out.append(chunk[done:start])
        line = chunk[start:end].decode("utf-8", errors)
        out.append((_pipeline(line) if end - start < MAX_TEXT else _redact_text_plain(line))
                   .encode("utf-8", errors))
        done = end
    out.append(chunk[done:])
    return b"".join(out)


def redact_bytes(data: bytes) -> bytes:
    """Redact text-looking shapes in bytes (invalid UTF-8 and NULs kept byte-exact around
    them); executables, archives and captures pass unchanged."""
    if not data or is_binary(data):
        return data
    r = Redactor()
    out = r.feed(data) + r.close()
    return data if out == data else out


def redact_environ_blob(data: bytes) -> bytes:
    """Redact a NUL-separated /proc/<pid>/environ image, keeping its format."""
    parts = []
    for item in data.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and is_secret_name(name.decode("utf-8", "replace")):
            parts.append(name + b"=" + REDACTED.encode())
        elif sep:  # a harmless name may still hold one (PIP_INDEX_URL=https://u:pw@…)
            parts.append(name + b"=" + redact_bytes(value))
        else:
            parts.append(item)
    return b"\0".join(parts)


def redact_obj(obj: Any) -> Any:
    """Deep-copy JSON-like data, redacting secret-named keys and secrets inside strings."""
    if isinstance(obj, Mapping):
        return {k: (REDACTED if isinstance(k, str) and is_secret_name(k)
                    and isinstance(v, (str, int, float)) else redact_obj(v))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(v, str) for v in obj):  # maybe an argv: --api-key, VALUE
            return redact_argv(list(obj))
        return [redact_obj(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def neutralise(text: str) -> str:
    """Show C0/C1 control characters (ESC, BEL, OSC 52 …) as visible ``\\x1b`` text, keeping
    tab and newline, so a log line cannot drive the operator's terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """Replace characters XML 1.0 cannot hold (and C1 controls) with visible ``\\xNN`` text."""
    return _XML_BAD.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)
