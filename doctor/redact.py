"""Secret redaction, applied at collection time and again when any report is rendered.

A name is secret when it contains one of the markers the collect_env tools and our issue
agreed on (TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL, AUTH), case-insensitively.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

REDACTED = "<redacted>"
_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
# TOKEN but not TOKENS/TOKENIZER (--max-num-batched-tokens is a count, not a secret);
# AUTH but not AUTHOR.
_MARKER = r"(?:TOKEN(?!S(?![A-Za-z])|IZER)|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH(?!OR)|COOKIE)"
_MARKER_RE = re.compile(_MARKER, re.IGNORECASE)
_SECRET_NAME = rf"(?:[A-Za-z0-9_.-]*{_MARKER}[A-Za-z0-9_.-]*)"

# NAME=value in env files, systemd Environment= lines, shell exports, /proc environ dumps.
_ASSIGN = re.compile(rf"(?i)\b({_SECRET_NAME})(\s*=\s*)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'&;]+)")
# --api-key VALUE / --api-key=VALUE / --hf-token VALUE and friends on command lines.
_FLAG = re.compile(rf"(?i)(--{_SECRET_NAME})(=|\s+)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)")
# HTTP headers and bearer tokens anywhere in text.
_HEADER = re.compile(r"(?im)^((?:proxy-)?authorization|cookie|set-cookie|x-api-key)(\s*:\s*)(.+)$")
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{8,})")
# "name": "value" in JSON, and 'name': 'value' in Python reprs of dicts (headers, env).
_JSON_FIELD = re.compile(rf"(?i)(\"{_SECRET_NAME}\"\s*:\s*)(\"[^\"]*\")")
_REPR_FIELD = re.compile(rf"(?i)('{_SECRET_NAME}'\s*:\s*)('[^'\n]*'|\"[^\"\n]*\")")
# Tokens recognisable by their own shape, wherever they stand (a bare `sk-…` in a log line,
# an argv element after the flag was split off): OpenAI-style, Hugging Face, GitHub, Slack,
# AWS access key ids, JWTs.
_TOKEN = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
                    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
                    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})")
# The password in URL userinfo: scheme://user:PASSWORD@host (pip index URLs, proxies).
_URL_CRED = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)([^@\s/]+)(@)")


def is_secret_name(name: str) -> bool:
    return _MARKER_RE.search(name) is not None


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of an environment with every secret-named value replaced."""
    return {k: (REDACTED if is_secret_name(k) else redact_text(v)) for k, v in env.items()}


def redact_text(text: str) -> str:
    """Replace secrets in free text: assignments, flags, auth headers, bearer tokens."""
    if not text:
        return text
    text = _ASSIGN.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _JSON_FIELD.sub(lambda m: f"{m.group(1)}\"{REDACTED}\"", text)
    text = _REPR_FIELD.sub(lambda m: f"{m.group(1)}'{REDACTED}'", text)
    text = _URL_CRED.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", text)
    text = _TOKEN.sub(REDACTED, text)
    return text


def redact_argv(argv: "list[str] | tuple[str, ...]") -> list[str]:
    """Redact the value that follows a secret flag (``--api-key sk-…``) in an argv."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("--") and is_secret_name(arg.split("=", 1)[0]):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_text(arg))
    return out


def redact_bytes(data: bytes) -> bytes:
    """Redact text-looking content; binary data (ELF, pcap, NUL bytes) passes unchanged."""
    if b"\0" in data[:4096]:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    red = redact_text(text)
    return data if red == text else red.encode("utf-8")


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
