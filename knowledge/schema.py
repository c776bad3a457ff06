"""The schema of a knowledge file, as a function: a list of problems (empty = valid).

Kept out of the test so that `ascend-doctor kb lint` and CI run the same rules on the
shipped files and on a contributor's new file.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from . import LANGS, LIST_KEYS, VERSION_KEYS, _canon_spec

ID_RX = re.compile(r"^ASC-[A-Z]+-\d{3}$")
REQUIRED = ("id", "title", "cause", "steps", "sources")
KNOWN = {"id", "title", "cause", "steps", "signatures", "aliases", "checks", "fix",
         "applies_to", "advice", "sources", "severity", "message", "description", "generic",
         # optional fields from ascend-fd's schema (anchors §10.6), accepted for the future
         "links", "explains", "category", "since", "deprecated", "cause_above", "examples"}
SEVERITIES = {"none", "low", "medium", "high", "critical"}
SOURCE_PREFIXES = ("seed:", "facts:", "https://", "http://", "doc:", "issue:", "man:")


def _bilingual(value: Any, where: str, prose: bool = False) -> list[str]:
    if not isinstance(value, Mapping):
        return [f"{where}: must be a table {{en = …, zh = …}}"]
    out = []
    for lang in LANGS:
        text = value.get(lang)
        if not isinstance(text, str) or not text.strip():
            out.append(f"{where}: missing the {lang} text")
    if prose and "zh" in value and isinstance(value["zh"], str) and value["zh"].strip() and not re.search(
            r"[\u4e00-\u9fff]", value["zh"]):
        out.append(f"{where}: the zh text has no Chinese characters")
    return out


def validate_entry(d: Mapping[str, Any], *, check_ids: Iterable[str] | None = None,
                   fix_ids: Iterable[str] | None = None,
                   seed_names: Iterable[str] = ()) -> list[str]:
    """Problems of one entry; ``check_ids``/``fix_ids`` None = do not check references."""
    eid = d.get("id", "?")
    p = [f"{eid}: missing field {k!r}" for k in REQUIRED if k not in d]
    p += [f"{eid}: unknown field {k!r}" for k in d if k not in KNOWN]
    if "id" in d and not ID_RX.match(str(d["id"])):
        p.append(f"{eid}: id is not of the form ASC-<DOMAIN>-NNN")
    for k in ("title", "cause"):
        if k in d:
            p += _bilingual(d[k], f"{eid}.{k}", prose=True)
    for k in ("message", "description"):
        if k in d:
            p += _bilingual(d[k], f"{eid}.{k}")
    steps = d.get("steps", [])
    if not isinstance(steps, list) or not steps:
        p.append(f"{eid}.steps: needs at least one step")
    else:
        for i, s in enumerate(steps, 1):
            p += _bilingual(s, f"{eid}.steps[{i}]")
            if isinstance(s, Mapping) and "cmd" in s and not (
                    isinstance(s["cmd"], str) and s["cmd"].strip()):
                p.append(f"{eid}.steps[{i}].cmd: empty command")
    for i, rx in enumerate(d.get("signatures", []), 1):
        try:
            re.compile(rx, re.IGNORECASE | re.MULTILINE)
        except (re.error, TypeError) as exc:
            p.append(f"{eid}.signatures[{i}]: does not compile ({exc})")
    for a in d.get("aliases", []):
        if not isinstance(a, str) or not a.strip():
            p.append(f"{eid}.aliases: empty alias")
    if check_ids is not None:
        known = set(check_ids)
        p += [f"{eid}.checks: unknown check id {c!r}" for c in d.get("checks", [])
              if c not in known]
    if fix_ids is not None and d.get("fix") is not None and d["fix"] not in set(fix_ids):
        p.append(f"{eid}.fix: unknown fix recipe {d['fix']!r}")
    if d.get("severity", "medium") not in SEVERITIES:
        p.append(f"{eid}.severity: {d.get('severity')!r} not in {sorted(SEVERITIES)}")
    p += _versions(d.get("applies_to", {}), f"{eid}.applies_to")
    for i, a in enumerate(d.get("advice", []), 1):
        p += _bilingual(a, f"{eid}.advice[{i}]")
        if isinstance(a, Mapping):
            p += _versions(a.get("when", {}), f"{eid}.advice[{i}].when")
    if not isinstance(d.get("generic", False), bool):
        p.append(f"{eid}.generic: must be true or false")
    sources = d.get("sources", [])
    if not isinstance(sources, list) or not sources:
        p.append(f"{eid}.sources: needs at least one source")
    seeds = set(seed_names)
    for s in sources if isinstance(sources, list) else []:
        if not isinstance(s, str) or not s.startswith(SOURCE_PREFIXES):
            p.append(f"{eid}.sources: {s!r} must start with one of {SOURCE_PREFIXES}")
        elif s.startswith("seed:") and seeds:
            name = s[5:].split()[0]
            if name not in seeds:
                p.append(f"{eid}.sources: no seed file named {name!r}")
    return p


def _versions(table: Any, where: str) -> list[str]:
    if not isinstance(table, Mapping):
        return [f"{where}: must be a table"]
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    out = []
    for k, v in table.items():
        if k in LIST_KEYS:
            if not isinstance(v, (list, str)):
                out.append(f"{where}.{k}: must be a list of names")
            continue
        if k not in VERSION_KEYS:
            out.append(f"{where}: unknown component {k!r} (known: {VERSION_KEYS + LIST_KEYS})")
            continue
        try:
            SpecifierSet(_canon_spec(str(v)))
        except InvalidSpecifier:
            out.append(f"{where}.{k}: {v!r} is not a version specifier")
    return out


def validate_file(name: str, raw: bytes, **refs: Any) -> list[str]:
    """Problems of one knowledge file (TOML syntax, then each entry, then duplicate ids)."""
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [f"{name}: not valid TOML ({exc})"]
    entries = doc.get("entry", [])
    if not isinstance(entries, list):
        return [f"{name}: [[entry]] must be an array of tables"]
    out: list[str] = []
    seen: set[str] = set()
    for d in entries:
        out += [f"{name}: {m}" for m in validate_entry(d, **refs)]
        if d.get("id") in seen:
            out.append(f"{name}: duplicate id {d.get('id')}")
        seen.add(d.get("id"))
    return out
