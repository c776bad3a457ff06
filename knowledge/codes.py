"""Documented error codes: AscendCL / runtime (1xxxxx, 2xxxxx, 5xxxxx), HcclResult, DCMI and
the CANN ``E<module><4 digits>`` families, each with a meaning and a first step.

The tables are data (``knowledge/tables/*.toml``), each naming the public document its
numbers come from; meanings are written in our own words. ``codes_in(line)`` finds the codes
a log line carries and how it carries them: torch_npu's ``error code is N``, CANN's
``runtime result = N``, ``EZ9999:``, ``HcclX…, error code is 9``, ``ret is -8005``. A code
that no table lists still gets its family's meaning (the class digit, the module letter).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Mapping

from . import _tomllib, pick

TABLES = ("acl", "hccl", "dcmi", "ecodes", "pta")

# how codes appear in log lines (the group ``c`` is the code)
_ACL = re.compile(
    r"(?:(?P<strong>error ?code(?: is)?|err ?code|runtime result|rtError|aclError|ACL error)|"
    r"ret(?:urn)?(?: ?code)?|result|status|"
    # "aclrtSynchronizeStream (AICPU) failed: 507018", "run failed with code 507018"
    r"failed(?: with(?: error)? code)?)\s*[=:]?\s*\(?\s*(?P<c>[1-5]\d{5})\b", re.IGNORECASE)
_ECODE = re.compile(r"(?<![A-Za-z0-9])(?P<c>[EW][0-9A-Z]\d{4})(?![0-9A-Za-z])(?! \d\d:\d\d)")
_HCCL = re.compile(r"(?:\bHccl\w*|\bHCCL\b)[^\n]{0,200}?(?:error code is|ret(?:urn)?|result|"
                   r"HcclResult)\s*[=:]?\s*\(?(?P<c>\d{1,2})\b", re.IGNORECASE)
# torch_npu's ERR<sub-module 2 digits><error type 3 digits> (NPUException.h)
_PTA = re.compile(r"\b(?P<c>ERR\d{5})\b")
_DCMI = re.compile(r"(?:dcmi|npu-smi|DrvMng)[^\n]{0,200}?(?:ret(?: is)?|error code|result|"
                   r"errno)\s*[=:]?\s*\(?(?P<c>-(?:80\d\d|8255|99999))\b", re.IGNORECASE)


@dataclass(frozen=True)
class Code:
    """A documented code: which table, its meaning and first step (per language)."""

    table: str  # acl | hccl | dcmi | cann
    code: str
    meaning: Mapping[str, str]
    step: Mapping[str, str]
    source: str  # the public document of the table
    exact: bool  # False: only the family (class digit, module letter) is known
    # an "internal error" code (EE9999, 500001): it says something failed, not what; the
    # cause is on the lines around it, and an entry reached only through it is not specific
    catchall: bool = False

    def text(self, lang: str = "en") -> str:
        return pick(self.meaning, lang)

    def first_step(self, lang: str = "en") -> str:
        return pick(self.step, lang) if self.step else ""


@dataclass(frozen=True)
class CodeHit:
    """A code found in a line: where, and the table entry (None: no table knows it)."""

    code: Code
    start: int
    end: int


@functools.lru_cache(maxsize=1)
def tables() -> dict[str, dict[str, Any]]:
    """The parsed tables by name (``acl``, ``hccl``, ``dcmi``, ``cann``, ``pta``)."""
    from ascend_doctor.pkgdata import read_bytes

    out = {}
    for name in TABLES:
        doc = _tomllib().loads(read_bytes(__package__ or "ascend_doctor.knowledge", __file__, f"tables/{name}.toml")
                               .decode("utf-8"))
        out[doc["name"]] = doc
    return out


def _texts(d: Mapping[str, str], prefix: str = "") -> dict[str, str]:
    return {lang: d[prefix + lang] for lang in ("en", "zh") if d.get(prefix + lang)}


def lookup(table: str, code: str) -> Code | None:
    """The code in ``table``: its own row, else its family's meaning, else None."""
    t = tables().get(table)
    if t is None:
        return None
    if table == "pta":
        return _pta(t, code)
    row = t.get("codes", {}).get(code)
    if row is not None:
        step = _texts(row, "step_")
        if not step:  # a row without its own step takes its family's
            fam = _family_row(t, table, code)
            step = _texts(fam, "step_") if fam else {}
        return Code(table, code, _texts(row), step, t["source"], True, _catchall(t, code))
    fam = _family_row(t, table, code)
    if fam is None:
        return None
    meaning = _texts(fam)
    if table == "cann":
        internal = code[2:3] == "9"
        meaning = {
            "en": f"{'internal' if internal else 'user'} error of CANN's {meaning['en']} module",
            "zh": f"CANN {meaning['zh']}模块的{'内部' if internal else '用户'}错误"}
    return Code(table, code, meaning, _texts(fam, "step_"), t["source"], False,
                _catchall(t, code))


def _catchall(t: Mapping[str, Any], code: str) -> bool:
    """Whether the table lists the code as an internal catch-all (``catchall``, or
    ``catchall_suffix`` for the CANN E-families' xx9999)."""
    suffix = t.get("catchall_suffix")
    return code in t.get("catchall", ()) or bool(suffix and code.endswith(suffix))


def _pta(t: Mapping[str, Any], code: str) -> Code | None:
    """ERR02200: the sub-module (02, DIST) and the error type (200, a call into HCCL)."""
    sub = t.get("submodule", {}).get(code[3:5])
    row = t.get("codes", {}).get(code[5:8])
    if sub is None and row is None:
        return None
    what = _texts(row) if row else {"en": "an error", "zh": "错误"}
    where = _texts(sub) if sub else {"en": "torch_npu", "zh": "torch_npu"}
    meaning = {"en": f"{where['en']}: {what['en']}", "zh": f"{where['zh']}：{what['zh']}"}
    return Code("pta", code, meaning, _texts(row, "step_") if row else {}, t["source"],
                sub is not None and row is not None, code[5:8] in t.get("catchall", ()))


def _family_row(t: Mapping[str, Any], table: str, code: str) -> Mapping[str, str] | None:
    fam = t.get("family", {})
    if table == "acl":
        return fam.get(code[0])
    if table == "cann":
        return fam.get(code[1])
    return None


def codes_in(line: str) -> list[CodeHit]:
    """Every documented code the line carries, in line order (one per position)."""
    hits: list[CodeHit] = []
    taken: set[int] = set()

    def add(table: str, m: "re.Match[str]") -> None:
        s = m.start("c")
        if s in taken:
            return
        c = lookup(table, m.group("c").upper() if table == "cann" else m.group("c"))
        # a number the table does not list counts only after a word that names a code
        if c is not None and (c.exact or table != "acl" or m.group("strong")):
            taken.add(s)
            hits.append(CodeHit(c, s, m.end("c")))

    if "E" in line or "W" in line:
        for m in _ECODE.finditer(line):
            add("cann", m)
    for m in _ACL.finditer(line):
        add("acl", m)
    low = line.lower()
    if "hccl" in low:
        for m in _HCCL.finditer(line):
            add("hccl", m)
    if "ERR" in line:
        for m in _PTA.finditer(line):
            add("pta", m)
    if "-8" in line or "-99999" in line:
        for m in _DCMI.finditer(line):
            add("dcmi", m)
    return sorted(hits, key=lambda h: h.start)


def all_codes() -> list[tuple[str, str]]:
    """(table, code) of every row, for lint and the docs."""
    return [(name, c) for name, t in tables().items() for c in t.get("codes", {})]
