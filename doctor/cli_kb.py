"""`explain`, `kb search|list|lint` and `triage`: the knowledge base on the command line.

`triage` exit codes: 0 at least one entry matched, 1 nothing matched, 2 unreadable input.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Iterable, Iterator

import click

from .cli_common import default_lang
from .errors import DoctorError, UsageError
from .i18n import N_, tr, tt
from .redact import neutralise, redact_text

VERSION_SOURCES = {"vllm_ascend": "vllm-ascend", "vllm": "vllm", "torch": "torch",
                   "torch_npu": "torch-npu"}


def host_versions(host, options) -> dict[str, str]:
    """Stack versions found on a host (through its Packages fact); empty when unknown."""
    from .facts import FactStore
    from .probes.packages import Packages
    from .registry import Registry
    try:
        pkgs = FactStore(host, options, Registry.discover(plugins=False)).get(Packages)
    except Exception:  # any failure here only means "versions unknown"
        return {}
    return {k: v for k, name in VERSION_SOURCES.items() if (v := pkgs.version(name))}


def _parse_versions(values: Iterable[str]) -> dict[str, str]:
    out = {}
    for v in values:
        k, eq, ver = v.partition("=")
        if not eq:
            raise UsageError(tt(default_lang(), "--version {value}: expected COMPONENT=VERSION "
                                "(e.g. cann=8.0.RC1)", value=repr(v)))
        out[k.strip().replace("-", "_")] = ver.strip()
    return out


def render_entry(e, lang: str, versions: dict[str, str] | None) -> str:
    """One KB entry as text, its labels from the catalog (the entry's own texts are
    already bilingual)."""
    out = [f"{e.id}  [{e.severity}]  {e.text('title', lang)}"]
    meta = []
    if e.aliases:
        meta.append(tt(lang, "aliases: {names}", names=", ".join(e.aliases)))
    if e.checks:
        meta.append(tt(lang, "raised by: {checks}", checks=", ".join(e.checks)))
    if meta:
        out.append("  " + "   ".join(meta))
    out += ["", "## " + tt(lang, "Cause"), "  " + e.text("cause", lang), "",
            "## " + tt(lang, "Steps")]
    for i, s in enumerate(e.steps, 1):
        out.append(f"  {i}. {s.get(lang) or s.get('en', '')}")
        if s.get("cmd"):
            out.append(f"       $ {s['cmd']}")
    if e.fix:
        # with what the entry knows (the memory entries: which flag to lower), so the plan
        # is never an empty one
        from ascend_doctor.memfix import fix_for

        from .suggest import fix_command
        recipe, params = fix_for(e.id, e.fix)
        out.append("  → " + tt(lang, "automatic fix (dry run first): {cmd}",
                               cmd=fix_command(e.fix, params if recipe == e.fix else {})))
    if e.advice:
        out.append("")
        if versions:
            found = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
            held = e.advice_for(versions, lang)
            out.append("## " + tt(lang, "Advice for the versions found ({found})", found=found))
            out += [f"  - {t}" for t in held] or ["  - " + tt(
                lang, "none of the version-specific advice applies")]
        else:
            out.append("## " + tt(lang, "Advice by version"))
            out += [f"  - [{cond}] {t}" for cond, t in e.advice_table(lang)]
    if e.applies_to:
        out += ["", tt(lang, "Applies to: {what}", what=", ".join(
            f"{k} {v}" for k, v in e.applies_to.items()))]
        if versions and e.applies(versions) is False:
            out.append("  " + tt(lang, "(not the versions found on this host)"))
    if e.signatures:
        out += ["", tt(lang, "Log signatures:")] + [f"  /{s}/" for s in e.signatures]
    out += ["", tt(lang, "Sources: {sources}", sources="; ".join(e.sources))]
    out.append(tt(lang, "source: {origin}; confidence {conf}",
                  origin=f"curated entry (knowledge/{e.domain}.toml)"
                  + (f", causes {', '.join(e.causes)}" if e.causes else ""),
                  conf="0.90" if not e.generic else "0.40"))
    return "\n".join(out) + "\n"


def _explain_code(ident: str, lang: str, as_json: bool) -> bool:
    """A documented code no curated entry knows (507013, EI0006, -8005, hccl:7): its table's
    meaning, first step and document. False when no table knows it."""
    from ascend_doctor.knowledge import codes

    key = ident.strip()
    table = ("hccl" if key.lower().startswith("hccl:") else "dcmi" if key.startswith("-")
             else "acl" if key.isdigit() else "cann")
    code = key.split(":", 1)[1] if table == "hccl" else key.upper() if table == "cann" else key
    shape = {"hccl": r"\d{1,2}", "dcmi": r"-\d{4,5}", "acl": r"\d{6}", "cann": r"[EW][0-9A-Z]\d{4}"}
    if not re.fullmatch(shape[table], code):
        return False
    c = codes.lookup(table, code)
    if c is None:
        return False
    if as_json:
        click.echo(json.dumps({"id": f"{c.table}:{c.code}", "code": c.code, "table": c.table,
                               "exact": c.exact, "meaning": c.text(lang),
                               "steps": [s for s in (c.first_step(lang),) if s],
                               "answer_source": {"source": "code-table", "document": c.source}},
                              indent=2, ensure_ascii=False))
        return True
    click.echo(f"{c.code}  [{c.table}]  {c.text(lang)}")
    if c.first_step(lang):
        click.echo("  1. " + c.first_step(lang))
    click.echo(tt(lang, "source: {origin}; confidence {conf}",
                  origin=f"error-code table {c.table} ({c.source})",
                  conf="0.70" if c.exact else "0.30"))
    return True


def _versions_for(root, bundle, demo, given) -> dict[str, str] | None:
    if not (root or bundle or demo) and not given:
        return None
    versions: dict[str, str] = {}
    if root or bundle or demo:
        from .cli_common import build_options
        from .opening import demo_host, open_host
        host = demo_host() if demo else open_host(root, bundle)
        versions = host_versions(host, build_options({}))
    versions.update(given)
    return versions


@click.command("explain", epilog="""\b
Examples:
  ascend-doctor explain ASC-LIB-002
  ascend-doctor explain EZ9999 --lang zh
  ascend-doctor explain ldconf.order --demo""")
@click.argument("ident")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None,
              help="Language [default: from LANG/LC_ALL].")
@click.option("--json", "as_json", is_flag=True, help="The answer as JSON.")
@click.option("--root", type=click.Path(exists=True, file_okay=False),
              help="Pick the advice for the versions installed in this sysroot.")
@click.option("--bundle", type=click.Path(dir_okay=False, exists=True),
              help="Pick the advice for the versions in this bundle.")
@click.option("--demo", is_flag=True, help="Pick the advice for the demo host's versions.")
@click.option("--version", "given", multiple=True, metavar="COMPONENT=VERSION",
              help="A version to decide advice on (cann=8.0.RC1, vllm_ascend=0.9.1).")
def explain_cmd(ident: str, lang: str | None, as_json: bool, root, bundle, demo, given) -> None:
    """Explain a knowledge-base entry: by id (ASC-LIB-003), alias (EZ9999, 207018) or the
    id of a check (every entry it may raise)."""
    from ascend_doctor.knowledge import load

    lang = lang or default_lang()
    kb = load()
    found = kb.lookup(ident) or sorted((e for e in kb.entries.values() if ident in e.checks),
                                       key=lambda e: e.id)  # a check id: what it may raise
    if not found and _explain_code(ident, lang, as_json):
        return
    if not found:
        near = [e.id for e in kb.search(ident)][:5]
        raise UsageError(tt(lang, "no knowledge entry {ident}", ident=repr(ident))
                         + (tt(lang, " (did you mean {near}?)", near=", ".join(near)) if near else
                            tt(lang, "; try `ascend-doctor kb search WORDS`")))
    versions = _versions_for(root, bundle, demo, _parse_versions(given))
    if as_json:
        docs = []
        for e in found:
            d = e.to_dict(lang)
            d["answer_source"] = {"source": "curated", "file": f"knowledge/{e.domain}.toml"}
            if versions is not None:
                d["versions"] = versions
                d["advice_for_versions"] = e.advice_for(versions, lang)
                d["applies_to_versions"] = e.applies(versions)
            docs.append(d)
        click.echo(json.dumps(docs[0] if len(docs) == 1 else {"matches": docs}, indent=2,
                              ensure_ascii=False))
        return
    click.echo("\n".join(render_entry(e, lang, versions) for e in found), nl=False)


@click.group("kb", epilog="""\b
Examples:
  ascend-doctor kb search libascendcl
  ascend-doctor kb list --domain libs
  ascend-doctor kb lint""")
def kb_group() -> None:
    """Search and list the knowledge base."""


@kb_group.command("search", epilog="""\b
Examples:
  ascend-doctor kb search libascendcl not found
  ascend-doctor kb search 显存 --lang zh""")
@click.argument("words", nargs=-1, required=True)
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None,
              help="Language [default: from LANG/LC_ALL].")
@click.option("--json", "as_json", is_flag=True, help="The answer as JSON.")
def kb_search(words: tuple[str, ...], lang: str | None, as_json: bool) -> None:
    """Entries whose id, alias, title, cause or steps contain every word (exit 1: none)."""
    from ascend_doctor.knowledge import load

    lang = lang or default_lang()
    hits = load().search(" ".join(words), lang)
    if as_json:
        click.echo(json.dumps([{"id": e.id, "title": e.text("title", lang),
                                "aliases": list(e.aliases)} for e in hits],
                              indent=2, ensure_ascii=False))
    else:
        for e in hits:
            click.echo(f"{e.id:<12} {e.text('title', lang)}")
        if not hits:
            click.echo(tt(lang, "no entry matches"), err=True)
    sys.exit(0 if hits else 1)


@kb_group.command("list", epilog="""\b
Examples:
  ascend-doctor kb list
  ascend-doctor kb list --domain libs --json""")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None,
              help="Language [default: from LANG/LC_ALL].")
@click.option("--domain", default=None, help="Only this domain (file name without .toml).")
@click.option("--json", "as_json", is_flag=True, help="The answer as JSON.")
def kb_list(lang: str | None, domain: str | None, as_json: bool) -> None:
    """Every entry: id, domain, title."""
    from ascend_doctor.knowledge import load

    lang = lang or default_lang()
    entries = sorted((e for e in load().entries.values() if not domain or e.domain == domain),
                     key=lambda e: e.id)
    if as_json:
        click.echo(json.dumps([{"id": e.id, "domain": e.domain, "title": e.text("title", lang),
                                "checks": list(e.checks), "fix": e.fix} for e in entries],
                              indent=2, ensure_ascii=False))
        return
    for e in entries:
        click.echo(f"{e.id:<12} {e.domain:<9} {e.text('title', lang)}")
    click.echo(tt(lang, "{n} entries", n=len(entries)), err=True)


@kb_group.command("lint", epilog="""\b
Examples:
  ascend-doctor kb lint
  ascend-doctor kb lint my-site.toml""")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, exists=True))
@click.option("--corpus", "corpus_dir", type=click.Path(file_okay=False, exists=True),
              default=None, help="Real logs (*.txt, log after '# ---') signatures may match; "
              "default: the source tree's tests/corpus/triage when present.")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None,
              help="Language [default: from LANG/LC_ALL].")
def kb_lint(files: tuple[str, ...], corpus_dir: str | None, lang: str | None) -> None:
    """Validate knowledge files (the shipped ones by default): the schema, public sources,
    every signature matching a real line, no cause written twice, paste-safe commands."""
    import os

    from ascend_doctor.fixes import FixRegistry
    from ascend_doctor.knowledge import data_files
    from ascend_doctor.knowledge.schema import cross_problems, validate_file

    from .registry import Registry
    recipes = FixRegistry.discover().recipes
    corpus = corpus_lines(corpus_dir)
    refs = {"check_ids": set(Registry.discover(plugins=False).checks),
            "fix_ids": set(recipes), "fix_params": {k: r.params for k, r in recipes.items()},
            "corpus": corpus, "negatives": corpus_lines(corpus_dir, "quiet"),
            "cause_keys": cause_keys()}
    todo = ([(os.path.basename(f), open(f, "rb").read()) for f in files] if files else
            [(n, r) for n, r in data_files() if n != "compat.toml"])
    problems = [p for name, raw in todo for p in validate_file(name, raw, **refs)]
    # a contributor's file may name shipped entries
    from ascend_doctor.knowledge import load
    problems += cross_problems(todo, known_ids=load().entries if files else ())
    lang = lang or default_lang()
    for p in problems:
        click.echo(tr(p, lang))
    click.echo(tt(lang, "{files} files, {lines} corpus lines, {problems} problems",
                  files=len(todo), lines=len(corpus), problems=len(problems)), err=True)
    sys.exit(1 if problems else 0)


def cause_keys() -> set[str] | None:
    """The cause keys of the thread corpus (tests/corpus/threads/CAUSES.md) when the source
    tree has it; None: not checked (an installed doctor has no tests)."""
    import re as _re
    from pathlib import Path

    f = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "threads" / "CAUSES.md"
    try:
        text = f.read_text(encoding="utf-8")
    except OSError:
        return None
    return set(_re.findall(r"^\| `([a-z0-9-]+)` \|", text, _re.M)) or None


def corpus_lines(corpus_dir: str | None = None, kind: str = "triage") -> list[str]:
    """The log lines of a corpus (the part of each *.txt after '# ---'): ``triage`` holds real
    failures, its sibling ``quiet`` benign lines no signature may match."""
    from pathlib import Path

    base = Path(corpus_dir) if corpus_dir else (
        Path(__file__).resolve().parents[1] / "tests" / "corpus" / "triage")
    root = base if kind == "triage" else base.parent / kind
    out: list[str] = []
    for f in sorted(root.glob("*.txt")) if root.is_dir() else []:
        text = f.read_text(encoding="utf-8", errors="replace")
        out += text.partition("# ---\n")[2].splitlines()
    return out


SMALL_PASTE = 1 << 20  # an input this small is read whole: a paste's wrapped lines, frames
MAX_KEPT_BYTES = 16 << 20  # candidate lines kept for the event reading (the most recent)
LINE_OVERHEAD = 400  # what a kept line costs besides its text (str, tuple, its parsed form)
KEPT_LINE = 4096  # bytes of a kept line the event reading looks at


class _Prefixed:
    """A binary stream with bytes already read put back in front."""

    def __init__(self, head: bytes, rest) -> None:
        self.head, self.rest = head, rest

    def read(self, n: int = -1) -> bytes:
        if self.head:
            out, self.head = (self.head, b"") if n < 0 or n >= len(self.head) else \
                (self.head[:n], self.head[n:])
            return out
        return self.rest.read(n)

    def seek(self, *_a) -> None:  # never asked: the size is unknown (no tail seek)
        raise OSError("not seekable")


def _open_binary(source: str):
    """The input as a binary stream: stdin, a file, or a gzip-compressed rotated log."""
    if source == "-":
        return click.get_binary_stream("stdin")
    try:
        if source.endswith(".gz"):
            import gzip
            return gzip.open(source, "rb")
        return open(source, "rb")
    except OSError as exc:
        raise DoctorError(tt(default_lang(), "cannot read {source}: {reason}", source=source,
                             reason=exc.strerror or exc)) from None


def read_log(source: str, kb, prefer: str | None = None):
    """(candidate lines for the event reading, curated matches over every candidate, the
    scan's counts) of a log, streamed with bounded memory."""
    from collections import deque

    from ascend_doctor.probes.logmatch import prefilter
    from ascend_doctor.probes.logs import EVENT_PATTERN, LogScan, scan_engine, scan_lines

    pre = prefilter(kb, events=True)
    scan = LogScan()
    kept: deque = deque()
    kept_bytes = 0
    fh = _open_binary(source)
    try:
        try:
            head = fh.read(SMALL_PASTE + 1)
        except (OSError, EOFError) as exc:  # truncated or corrupt .gz
            raise DoctorError(tt(default_lang(), "cannot read {source}: {reason}",
                                 source=source, reason=exc)) from None
        small = len(head) <= SMALL_PASTE
        stream = _Prefixed(head, fh)
        pats = (re.compile(EVENT_PATTERN.pattern),)
        engine = scan_engine(pre.literals, prefer, pats) if prefer else None

        def tee():
            nonlocal kept_bytes
            # the whole log, however long it takes: its end is where a failure usually is
            for n, line in scan_lines(stream, None, pre, scan, engine, every=small,
                                      patterns=pats, budget=None):
                short = line[:KEPT_LINE]
                kept.append((n, short))
                kept_bytes += len(short) + LINE_OVERHEAD
                while kept_bytes > MAX_KEPT_BYTES:
                    kept_bytes -= len(kept.popleft()[1]) + LINE_OVERHEAD
                yield n, line

        try:
            matches = kb.match_lines((), numbered=tee())
        except (OSError, EOFError) as exc:  # truncated or corrupt .gz
            raise DoctorError(tt(default_lang(), "cannot read {source}: {reason}",
                                 source=source, reason=exc)) from None
    finally:
        if source != "-":
            fh.close()
    return list(kept), matches, scan


NO_SITE = N_("no installed stack named (--site DIR, the service's site-packages): a pasted "
             "log or a bundle has none")
NOT_UNDER = N_("none of vllm, vllm_ascend, torch_npu is installed under {sites}")


def source_index_for(sites: tuple[str, ...]):
    """The source index of the stack installed under ``sites`` (site-packages dirs), and
    what to say about it (in English, as JSON gives it); (None, why) when nothing was named
    or found."""
    if not sites:
        return None, {"available": False, "reason": NO_SITE}
    from ascend_doctor.knowledge.srcindex import SourceIndex
    from ascend_doctor.probes.srcindex import index_local

    index = index_local(sites)
    if index is None or not index.sites:
        return None, {"available": False,
                      "reason": NOT_UNDER.format(sites=", ".join(sites))}
    assert isinstance(index, SourceIndex)
    return index, {"available": True, "packages": index.packages}


# what to run when no signature matched: the host's own libraries and stack explain most
# failures a log does not name
NEXT_STEP = N_("next: run `ascend-doctor check --only libs` on the host, then "
               "`ascend-doctor collect` and attach the bundle")


@click.command("triage", epilog="""\b
Examples:
  ascend-doctor triage /var/log/vllm/rank0.log
  journalctl -u vllm --since -1h | ascend-doctor triage -
  ascend-doctor triage rank0.log --json --limit 3""")
@click.argument("source", default="-", metavar="[FILE|-]")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None,
              help="Language [default: from LANG/LC_ALL].")
@click.option("--json", "as_json", is_flag=True, help="The answer as JSON.")
@click.option("--limit", type=int, default=5, show_default=True, help="Answers to show.")
@click.option("--site", "sites", multiple=True, type=click.Path(file_okay=False, exists=True),
              help="The serving stack's site-packages: trace lines to the raise and log "
                   "sites of its vllm / vllm_ascend / torch_npu (indexed once per version).")
def triage_cmd(source: str, lang: str | None, as_json: bool, limit: int,
               sites: tuple[str, ...]) -> None:
    """Read a pasted traceback or a log (streamed) as events and explain the decisive one:
    a curated entry, a documented error code, a loader/OS/Python message shape, or the
    raise site in the installed stack (--site), each with where it came from.

    Exit 0 when something explained it, 1 when nothing did, 2 when the input cannot be read.
    """
    from ascend_doctor.knowledge import load
    from ascend_doctor.knowledge.decide import decide

    lang = lang or default_lang()
    kb = load()
    lines, matches, scan = read_log(source, kb)
    index, note = source_index_for(sites)
    verdict = decide(kb, lines, index, note, matches)
    answers = verdict.answers[:max(limit, 1)]
    d = verdict.decisive
    decisive = {"line": d.n, "text": redact_text(d.text)} if d is not None else None
    confident = verdict.confident
    if as_json:
        by_id = {m.entry.id: m for m in verdict.matches}
        # advice (curated entries with their steps) only under a confident verdict: a weak
        # first candidate is no answer to act on
        curated = [a for a in answers if a.entry is not None] if confident else []
        click.echo(json.dumps({
            "source": source, "lines": scan.lines,
            "cut": {"lines": scan.cut_lines, "bytes": scan.cut_bytes,
                    "stopped": scan.cut, "read_to": scan.read_to if scan.cut else None},
            "decisive": decisive, "source_index": note,
            "confident": confident, "not_confident_because": verdict.why_not_confident(),
            "answers": [_redacted(a.to_dict(lang)) for a in answers],
            "matches": [_match_doc(a, by_id.get(a.entry.id), lang) for a in curated
                        if a.entry is not None],
            "error_lines": [_trace_doc(t) for t in verdict.traces],
            "next": verdict.next_command()}, indent=2, ensure_ascii=False))
    elif not answers:
        click.echo(tt(lang, "no known signature matched"))
        if d is not None:
            click.echo(tt(lang, "decisive line {n}: {text}", n=d.n,
                          text=neutralise(redact_text(d.text.strip())[:200])))
        click.echo(tr(NEXT_STEP, lang))
    elif not confident:
        click.echo(tt(lang, "no confident match: {why}", why=tr(verdict.why_not_confident(),
                                                                  lang)))
        if d is not None:
            click.echo(tt(lang, "decisive line {n}: {text}", n=d.n,
                          text=neutralise(redact_text(d.text.strip())[:200])))
        click.echo(tr(NEXT_STEP, lang))
        click.echo(tt(lang, "candidates (not confident; `ascend-doctor explain ID` for an "
                            "entry's steps):"))
        for rank, a in enumerate(answers, 1):
            _print_answer(rank, a, lang, steps=a.entry is None)
    else:
        for rank, a in enumerate(answers, 1):
            _print_answer(rank, a, lang, steps=True)
        if d is not None and not answers[0].decisive:  # the first answer is about another line
            click.echo(tt(lang, "decisive line {n}: {text}", n=d.n,
                          text=neutralise(redact_text(d.text.strip())[:200])))
    if not note.get("available") and not as_json:
        click.echo(tt(lang, "source index: not available ({reason})",
                      reason=tt(lang, NOT_UNDER, sites=", ".join(sites)) if sites
                      else tt(lang, NO_SITE)), err=True)
    if scan.cut_lines:
        click.echo(tt(lang, "{n} line(s) longer than 64 KiB were cut ({bytes} bytes not read)",
                      n=scan.cut_lines, bytes=scan.cut_bytes), err=True)
    if scan.cut:
        click.echo(tt(lang, "the read stopped at byte {at} ({why}): later lines were not read",
                      at=scan.read_to, why=scan.cut), err=True)
    sys.exit(0 if answers else 1)


def _print_answer(rank: int, a, lang: str, steps: bool) -> None:
    """One answer: its title, where it came from and how sure, its lines, its steps."""
    msg = neutralise(redact_text(a.title(lang)))
    click.echo(f"{rank}. {a.key}  {msg}  "
               + tt(lang, "(score {score})", score=f"{a.confidence:.2f}"))
    click.echo("     " + tt(lang, "source: {origin}; confidence {conf}",
                            origin=a.origin(lang), conf=f"{a.confidence:.2f}"))
    for n, t in a.shown_lines():
        # a log line is hostile: redact it first, cut it, show its controls as text
        click.echo("     " + tt(lang, "line {n}: {text}", n=n,
                                text=neutralise(redact_text(t.strip())[:200])))
    if not steps:
        return
    for i, s in enumerate(a.steps(lang), 1):
        click.echo(f"     {i}) {s}")
    if a.entry is not None:
        if a.entry.fix:
            click.echo("     " + tt(lang, "fix: {cmd}", cmd=f"ascend-doctor fix {a.entry.fix}"))
        click.echo("     " + tt(lang, "more: {cmd}", cmd=f"ascend-doctor explain {a.entry.id}"))


def _trace_doc(t) -> dict:
    """One error line and where it was traced (``source``: the most specific layer)."""
    d = t.to_dict()
    d["text"] = redact_text(d["text"])
    return d


def _redacted(d: dict) -> dict:
    d["line"]["text"] = redact_text(d["line"]["text"])
    d["title"] = redact_text(d["title"])
    return d


def _match_doc(a, m, lang: str) -> dict:
    """A curated answer in the shape `triage --json` has always had (``matches``)."""
    e = a.entry
    lines = a.shown_lines()
    return {"id": e.id, "score": round(m.score, 3) if m is not None else 0.0,
            "confidence": round(a.confidence, 2), "source": a.source, "how": a.how,
            "title": e.text("title", lang),
            "message": redact_text(e.render_message(a.groups, lang)),
            "groups": {k: redact_text(v) if isinstance(v, str) else v
                       for k, v in a.groups.items()},
            "lines": [{"line": n, "text": redact_text(t)} for n, t in lines],
            "steps": e.steps_for(lang, a.groups), "fix": e.fix, "causes": list(e.causes)}


COMMANDS = (explain_cmd, kb_group, triage_cmd)
