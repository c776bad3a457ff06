"""Extract, compile and check the message catalog (gettext conventions, no external tool).

    python -m ascend_doctor.i18n_tools extract   # writes locale/ascend-doctor.pot
    python -m ascend_doctor.i18n_tools compile   # every .po -> its .mo (deterministic)
    python -m ascend_doctor.i18n_tools check     # every msgid translated, placeholders kept,
                                                 # .mo up to date; exit 1 naming what is not

Extraction reads the package's sources with :mod:`ast` (nothing is imported): the literal
first argument of ``T(…)``, ``N_(…)``, ``tr(…)``, the template argument of ``tt(lang, …)``, both
``ntt(lang, n, one, many)`` forms,
the ``title=`` of every ``@check(…)``, and the description and ``tooltip=`` of every
textual ``Binding(…)`` (the TUI's keys). The ``.po`` is the source of truth; the ``.mo``
is what runs (:mod:`ascend_doctor.catalog`), written by a pure-Python msgfmt whose output
depends only on the ``.po``.
"""

from __future__ import annotations

import ast
import string
import struct
import sys
from pathlib import Path

from .catalog import DOMAIN
from dataclasses import dataclass, field

# function name -> index of the msgid argument (xgettext's --keyword=name:argnum)
KEYWORDS: dict[str, tuple[int, ...]] = {"T": (0,), "N_": (0,), "tr": (0,), "tt": (1,),
                                        "ntt": (2, 3)}
PKG = Path(__file__).resolve().parent
LOCALE = PKG / "locale"


def source_roots() -> list[Path]:
    """The folders of the one import package (doctor/ is ascend_doctor, checks/ … beside it)."""
    roots = [PKG]
    for sub in ("checks", "fixes", "knowledge"):
        for cand in (PKG / sub, PKG.parent / sub):
            if cand.is_dir():
                roots.append(cand)
                break
    return roots


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def extract_source(text: str, where: str = "<source>") -> list[tuple[str, str]]:
    """(msgid, "file:line") of every marked literal in one module's source."""
    out: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(text, where)):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        if name in KEYWORDS:
            for i in KEYWORDS[name]:
                arg = node.args[i] if len(node.args) > i else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value:
                    out.append((arg.value, f"{where}:{node.lineno}"))
        elif name == "Binding":  # Binding(key, action, description, …, tooltip=…)
            for arg in [*node.args[2:3], *(kw.value for kw in node.keywords
                                           if kw.arg in ("description", "tooltip"))]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value:
                    out.append((arg.value, f"{where}:{node.lineno}"))
        elif name == "check":
            for kw in node.keywords:
                if (kw.arg == "title" and isinstance(kw.value, ast.Constant)
                        and isinstance(kw.value.value, str) and kw.value.value):
                    out.append((kw.value.value, f"{where}:{node.lineno}"))
    return out


def extract() -> dict[str, list[str]]:
    """msgid -> its source references, over the whole package, in a stable order."""
    found: dict[str, list[str]] = {}
    for root in source_roots():
        base = root.parent
        for path in sorted(root.rglob("*.py")):
            if "locale" in path.parts or path.name == "i18n_tools.py":
                continue
            rel = path.relative_to(base).as_posix()
            for msgid, ref in extract_source(path.read_text(encoding="utf-8"), rel):
                found.setdefault(msgid, []).append(ref)
    return found


def placeholders(text: str) -> set[str]:
    """The ``{names}`` a ``str.format`` template uses (raises ValueError on a broken one)."""
    return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}


# --- .po reading and writing -----------------------------------------------------------

_ESC = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "r": "\r"}


def _unquote(s: str, where: str) -> str:
    s = s.strip()
    if len(s) < 2 or s[0] != '"' or s[-1] != '"':
        raise ValueError(f"{where}: expected a quoted string, got {s[:40]!r}")
    out, i, body = [], 0, s[1:-1]
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(_ESC.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _quote(s: str) -> str:
    return '"' + (s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                  .replace("\t", "\\t")) + '"'


@dataclass
class Entry:
    msgid: str
    msgstr: str = ""
    fuzzy: bool = False
    comments: list[str] = field(default_factory=list)


def parse_po(text: str, where: str = "<po>") -> dict[str, Entry]:
    """The entries of a .po file (msgid -> Entry), header included under ""."""
    entries: dict[str, Entry] = {}
    cur: dict[str, str] = {}
    key: str | None = None
    fuzzy, comments = False, []

    def flush() -> None:
        nonlocal cur, key, fuzzy, comments
        if "msgid" in cur:
            if cur["msgid"] in entries:
                raise ValueError(f"{where}: duplicate msgid {cur['msgid'][:60]!r}")
            entries[cur["msgid"]] = Entry(cur["msgid"], cur.get("msgstr", ""), fuzzy, comments)
        cur, key, fuzzy, comments = {}, None, False, []

    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        at = f"{where}:{n}"
        if not line:
            flush()
        elif line.startswith("#"):
            if "msgid" in cur and key == "msgstr":
                flush()
            if line.startswith("#,") and "fuzzy" in line:
                fuzzy = True
            elif line.startswith("#:") or line.startswith("#."):
                comments.append(line)
        elif line.startswith("msgid "):
            if "msgid" in cur:
                flush()
            key, cur["msgid"] = "msgid", _unquote(line[6:], at)
        elif line.startswith("msgstr "):
            key, cur["msgstr"] = "msgstr", _unquote(line[7:], at)
        elif line.startswith('"') and key:
            cur[key] += _unquote(line, at)
        else:
            raise ValueError(f"{at}: cannot read {line[:40]!r}")
    flush()
    return entries


def write_po(entries: dict[str, Entry], header: str) -> str:
    out = ['msgid ""', "msgstr " + _quote(header), ""]
    for msgid in sorted(k for k in entries if k):
        e = entries[msgid]
        out += e.comments
        if e.fuzzy:
            out.append("#, fuzzy")
        out += ["msgid " + _quote(msgid), "msgstr " + _quote(e.msgstr), ""]
    return "\n".join(out)


POT_HEADER = ("Project-Id-Version: ascend-doctor\n"
              "MIME-Version: 1.0\n"
              "Content-Type: text/plain; charset=UTF-8\n"
              "Content-Transfer-Encoding: 8bit\n")


def _files(refs: list[str]) -> str:
    """The ``#:`` line of a msgid: the files it is in, without line numbers (xgettext's
    --add-location=file), so the committed catalog changes only when a message does."""
    return "#: " + " ".join(dict.fromkeys(r.rsplit(":", 1)[0] for r in refs))


def write_pot(found: dict[str, list[str]]) -> str:
    entries = {m: Entry(m, "", False, [_files(refs)]) for m, refs in found.items()}
    return write_po(entries, POT_HEADER)


# --- .mo ---------------------------------------------------------------------------------

def compile_mo(entries: dict[str, Entry]) -> bytes:
    """GNU .mo bytes (little endian, no hash table), like msgfmt: untranslated and fuzzy
    entries are left out, keys sorted, so the bytes depend only on the translations."""
    pairs = sorted((e.msgid.encode(), e.msgstr.encode()) for e in entries.values()
                   if e.msgstr and (not e.fuzzy or e.msgid == ""))
    n = len(pairs)
    ids = b"".join(k + b"\0" for k, _ in pairs)
    strs = b"".join(v + b"\0" for _, v in pairs)
    start = 7 * 4 + 16 * n  # header + two tables
    koffs, voffs, pos = [], [], 0
    for k, _ in pairs:
        koffs += [len(k), start + pos]
        pos += len(k) + 1
    pos = 0
    for _, v in pairs:
        voffs += [len(v), start + len(ids) + pos]
        pos += len(v) + 1
    head = struct.pack("<7I", 0x950412DE, 0, n, 7 * 4, 7 * 4 + 8 * n, 0, 0)
    return (head + struct.pack(f"<{2 * n}I", *koffs) + struct.pack(f"<{2 * n}I", *voffs)
            + ids + strs)


def po_files() -> list[Path]:
    return sorted(LOCALE.glob(f"*/LC_MESSAGES/{DOMAIN}.po"))


def problems(found: dict[str, list[str]] | None = None) -> list[str]:
    """What keeps the catalogs from being complete, one line each (empty when all is well)."""
    found = extract() if found is None else found
    out: list[str] = []
    pot = LOCALE / f"{DOMAIN}.pot"
    if not pot.exists() or pot.read_text(encoding="utf-8") != write_pot(found):
        out.append(f"{pot.relative_to(PKG).as_posix()}: not what extract writes from the "
                   "sources (run extract, update, translate, compile)")
    for po in po_files():
        rel = po.relative_to(PKG).as_posix()
        entries = parse_po(po.read_text(encoding="utf-8"), rel)
        for msgid, refs in sorted(found.items()):
            e = entries.get(msgid)
            if e is None or not e.msgstr or e.fuzzy:
                out.append(f"{rel}: untranslated ({refs[0]}): {msgid[:80]!r}")
                continue
            try:
                want, got = placeholders(msgid), placeholders(e.msgstr)
            except ValueError as exc:
                out.append(f"{rel}: broken template {msgid[:60]!r}: {exc}")
                continue
            if want != got:
                out.append(f"{rel}: placeholders differ for {msgid[:60]!r}: "
                           f"{sorted(want)} vs {sorted(got)}")
        mo = po.with_suffix(".mo")
        if not mo.exists() or mo.read_bytes() != compile_mo(entries):
            out.append(f"{rel}: the .mo is not a fresh compile of the .po (run compile)")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cmd = argv[0] if argv else ""
    if cmd == "extract":
        found = extract()
        LOCALE.mkdir(exist_ok=True)
        (LOCALE / f"{DOMAIN}.pot").write_text(write_pot(found), encoding="utf-8")
        print(f"{len(found)} messages -> {LOCALE / (DOMAIN + '.pot')}")
        return 0
    if cmd == "update":  # add the new msgids to every .po (empty msgstr), drop none
        found = extract()
        for po in po_files():
            entries = parse_po(po.read_text(encoding="utf-8"), str(po))
            header = entries.pop("", Entry("", POT_HEADER)).msgstr
            for msgid, refs in found.items():
                entries.setdefault(msgid, Entry(msgid)).comments = [_files(refs)]
            po.write_text(write_po(entries, header), encoding="utf-8")
            print(f"updated {po}")
        return 0
    if cmd == "compile":
        for po in po_files():
            po.with_suffix(".mo").write_bytes(
                compile_mo(parse_po(po.read_text(encoding="utf-8"), str(po))))
            print(f"compiled {po.with_suffix('.mo')}")
        return 0
    if cmd == "check":
        bad = problems()
        for line in bad:
            print(line)
        return 1 if bad else 0
    print("usage: python -m ascend_doctor.i18n_tools extract|update|compile|check",
          file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
