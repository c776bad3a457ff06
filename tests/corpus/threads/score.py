"""Score `ascend-doctor triage` on the thread corpus (issue 32, item 4).

    python tests/corpus/threads/score.py --part blind      # the number the README may quote
    python tests/corpus/threads/score.py --part tuning --detail
    python tests/corpus/threads/score.py --part tuning --ci-stack    # + the stack CI installs
    python tests/corpus/threads/score.py --part tuning --site DIR    # + any site-packages

Each thread's pasted log goes through the real console script (`ascend-doctor triage --json`).
The first answer is *right* when its cause keys contain the thread's key, *wrong advice* when
they do not, *no match* when nothing matched or triage said "no confident match"
(`confident: false`: it then gives no advice to act on). Cause keys of an answer: its
`causes` list in the triage answer, else the entry's `causes` field in knowledge/*.toml, else
ENTRY_CAUSES.toml. An older triage without `confident` is scored on its first `matches` entry.
Error lines are *traced* when triage says where the line came from (`error_lines[]`, each
with a `source` layer: curated entry, error-code table, message shape, source template);
with a triage that has no such field, a line counts when a match quotes it.
``--site DIR`` (repeatable) is passed to every triage call, so the source-index layer (raise
and log sites of the vllm / vllm_ascend / torch_npu … installed there) counts too; the table
header names the packages and versions triage indexed. ``--ci-stack`` adds the stack CI has
(ci_stack.py: the real vllm-ascend and torch-npu wheels, the real vLLM CPU venv).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corpus import HERE, PARTS, Thread, is_page, load_part, tomllib  # type: ignore[no-redef]
else:
    from .corpus import HERE, PARTS, Thread, is_page, load_part, tomllib

PROVENANCE_KEYS = ("source", "origin", "layer", "traced_to")


@dataclass
class Result:
    """One thread's outcome."""

    name: str
    cause: str
    verdict: str  # right | wrong | none | error
    first: str | None
    first_causes: tuple[str, ...]
    error_lines: int
    traced: int
    mode: str  # "source" (triage says where a line came from) or "matched"
    detail: str = ""
    index: dict[str, Any] = field(default_factory=dict)  # triage's source_index note
    kind: str = "thread"  # "thread" (a GitHub issue or PR) or "page" (RULE.md §2h)


@dataclass
class Table:
    part: str
    when: str
    kb: str
    results: list[Result] = field(default_factory=list)
    sites: tuple[str, ...] = ()

    def indexed(self) -> str:
        """Which stack triage indexed (the packages and versions it said), or why none."""
        if not self.sites:
            return "none (no --site)"
        for r in self.results:
            if r.index.get("available"):
                pk = r.index.get("packages") or {}
                return ", ".join(f"{k} {v}" for k, v in sorted(pk.items()))
        why = next((str(r.index.get("reason")) for r in self.results if r.index), "unknown")
        return f"none ({why})"

    def count(self, verdict: str) -> int:
        return sum(r.verdict == verdict for r in self.results)

    def by_kind(self) -> dict[str, dict[str, int]]:
        """Right / wrong / no match per kind of source: the pages (§2h) over-sample common,
        solved failures and are often trimmed to one line, so each kind is shown apart."""
        out: dict[str, dict[str, int]] = {}
        for r in self.results:
            row = out.setdefault(r.kind, {"threads": 0, "right": 0, "wrong": 0, "none": 0,
                                          "error": 0})
            row["threads"] += 1
            row[r.verdict] += 1
        return out

    def as_dict(self) -> dict[str, Any]:
        n = len(self.results)
        err = sum(r.error_lines for r in self.results)
        tr = sum(r.traced for r in self.results)
        modes = sorted({r.mode for r in self.results if r.verdict != "error"})
        return {"part": self.part, "date": self.when, "kb": self.kb, "threads": n,
                "right": self.count("right"), "wrong": self.count("wrong"),
                "no_match": self.count("none"), "errors": self.count("error"),
                "error_lines": err, "traced_lines": tr, "trace_mode": modes,
                "sites": list(self.sites), "indexed": self.indexed(),
                "by_kind": self.by_kind()}


def triage_command() -> list[str]:
    """The installed console script next to this interpreter (the real entry point)."""
    exe = Path(sys.executable).with_name("ascend-doctor")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ascend-doctor")
    if not found:
        raise SystemExit("ascend-doctor is not installed next to this Python nor on PATH")
    return [found]


def entry_causes(kb_dir: Path, table: Path = HERE / "ENTRY_CAUSES.toml") -> dict[str, tuple[str, ...]]:
    """Entry id -> cause keys: the entry's own `causes` field wins over the mapping file."""
    out: dict[str, tuple[str, ...]] = {}
    if table.exists():
        out.update({k: tuple(v) for k, v in tomllib.loads(table.read_text("utf-8")).items()})
    for f in sorted(kb_dir.glob("*.toml")):
        try:
            data = tomllib.loads(f.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        for e in data.get("entry", []) if isinstance(data.get("entry"), list) else []:
            if isinstance(e, dict) and isinstance(e.get("causes"), list) and "id" in e:
                out[str(e["id"])] = tuple(str(c) for c in e["causes"])
    return out


def kb_dir() -> Path:
    """The knowledge directory of the installed ascend_doctor (the editable worktree's)."""
    import importlib.util

    spec = importlib.util.find_spec("ascend_doctor.knowledge")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("ascend_doctor is not importable from this Python")
    return Path(list(spec.submodule_search_locations)[0])


def _walk(obj: Any) -> Iterable[dict[str, Any]]:
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from _walk(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk(v)


def traced_lines(answer: dict[str, Any]) -> tuple[set[int], str]:
    """Line numbers triage accounts for, and how: per-line provenance when the answer has it
    anywhere, else the lines its matches quote."""
    per_line = answer.get("error_lines")
    if isinstance(per_line, list):
        return {d["line"] for d in per_line if isinstance(d, dict) and isinstance(
            d.get("line"), int) and any(d.get(k) for k in PROVENANCE_KEYS)}, "source"
    with_prov = [d for d in _walk(answer)
                 if isinstance(d.get("line"), int) and any(k in d for k in PROVENANCE_KEYS)]
    if with_prov:
        return {d["line"] for d in with_prov if any(d.get(k) for k in PROVENANCE_KEYS)}, "source"
    quoted = {ln["line"] for m in answer.get("matches", []) for ln in m.get("lines", [])
              if isinstance(ln, dict) and isinstance(ln.get("line"), int)}
    return quoted, "matched"


def score_one(thread: Thread, causes: dict[str, tuple[str, ...]], cmd: list[str],
              sites: tuple[str, ...] = ()) -> Result:
    """One thread through triage; its kind of source on every outcome, a failed run too."""
    r = _triage_one(thread, causes, cmd, sites)
    r.kind = "page" if is_page(thread.url) else "thread"
    return r


def _triage_one(thread: Thread, causes: dict[str, tuple[str, ...]], cmd: list[str],
                sites: tuple[str, ...]) -> Result:
    name = thread.path.stem
    with tempfile.NamedTemporaryFile("w", suffix=".log", encoding="utf-8", delete=False) as fh:
        fh.write(thread.log + "\n")
        path = fh.name
    try:
        env = dict(os.environ, LANG="C.UTF-8", LC_ALL="C.UTF-8")
        site_args = [a for s in sites for a in ("--site", s)]
        proc = subprocess.run([*cmd, "triage", "--json", "--lang", "en", *site_args, path],
                              capture_output=True, text=True, timeout=900, env=env)
    finally:
        os.unlink(path)
    if proc.returncode not in (0, 1):
        return Result(name, thread.cause, "error", None, (), len(thread.error_lines), 0, "-",
                      detail=f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}")
    try:
        answer = json.loads(proc.stdout)
    except ValueError as exc:
        return Result(name, thread.cause, "error", None, (), len(thread.error_lines), 0, "-",
                      detail=f"not JSON: {exc}")
    lines, mode = traced_lines(answer)
    traced = sum(n in lines for n in thread.error_lines)
    note = answer.get("source_index") if isinstance(answer.get("source_index"), dict) else {}
    r = _verdict(thread, causes, answer, traced, mode, name)
    r.index = note
    return r


def _verdict(thread: Thread, causes: dict[str, tuple[str, ...]], answer: dict[str, Any],
             traced: int, mode: str, name: str) -> Result:
    if "confident" in answer:  # the verdict triage gives: no advice unless confident
        answers = answer.get("answers") or []
        if not answer["confident"] or not answers:
            return Result(name, thread.cause, "none", None, (), len(thread.error_lines),
                          traced, mode, detail=str(answer.get("not_confident_because") or ""))
        first = answers[0]
    else:
        matches = answer.get("matches") or []
        if not matches:
            return Result(name, thread.cause, "none", None, (), len(thread.error_lines),
                          traced, mode)
        first = matches[0]
    keys = tuple(first["causes"]) if isinstance(first.get("causes"), list) else \
        causes.get(first["id"], ())
    verdict = "right" if thread.cause in keys else "wrong"
    return Result(name, thread.cause, verdict, first["id"], keys, len(thread.error_lines),
                  traced, mode, detail="" if first["id"] in causes or first.get("causes") is not None
                  else "entry has no cause keys")


def kb_revision(repo: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def score(part: str, sample: int | None = None, root: Path | None = None,
          workers: int = 2, sites: tuple[str, ...] = ()) -> Table:
    threads = load_part(part, root)
    if sample is not None:
        threads = threads[:sample]
    kb = kb_dir()
    causes = entry_causes(kb, (root or HERE) / "ENTRY_CAUSES.toml")
    cmd = triage_command()
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    table = Table(part=part, when=when, kb=kb_revision(kb.parent), sites=tuple(sites))
    if sites and threads:  # the first call builds the index (cached per version), once
        first = [score_one(threads[0], causes, cmd, sites)]
        threads = threads[1:]
    else:
        first = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        table.results = first + list(pool.map(lambda t: score_one(t, causes, cmd, sites),
                                              threads))
    return table


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f} %" if b else "-"


def render(table: Table, detail: bool = False) -> str:
    d = table.as_dict()
    n = d["threads"]
    mode = {"source": "the per-line source of triage --json error_lines",
            "matched": "lines quoted by a match (triage gives no per-line source yet)"}
    rows = [
        f"triage on the thread corpus, part {d['part']}: {n} threads, {d['date']}, "
        f"repository {d['kb']}",
        f"  source index: {d['indexed']}"
        + (f"  (--site {' --site '.join(d['sites'])})" if d['sites'] else ""),
        f"  first entry right      {d['right']:4d}  {_pct(d['right'], n)}",
        f"  wrong advice           {d['wrong']:4d}  {_pct(d['wrong'], n)}",
        f"  no match               {d['no_match']:4d}  {_pct(d['no_match'], n)}",
    ]
    if d["errors"]:
        rows.append(f"  triage failed          {d['errors']:4d}  {_pct(d['errors'], n)}")
    names = {"thread": "issue threads", "page": "web pages (§2h)"}
    for kind, row in sorted(d["by_kind"].items(), key=lambda kv: kv[0] != "thread"):
        rows.append(f"    of which {names.get(kind, kind)}: {row['threads']}, right "
                    f"{row['right']} ({_pct(row['right'], row['threads'])}), wrong "
                    f"{row['wrong']} ({_pct(row['wrong'], row['threads'])}), no match "
                    f"{row['none']}")
    rows.append(f"  error lines traced     {d['traced_lines']:4d} / {d['error_lines']}  "
                f"{_pct(d['traced_lines'], d['error_lines'])}  "
                f"(counted by {', '.join(mode.get(m, m) for m in d['trace_mode']) or '-'})")
    if detail:
        rows.append("")
        for r in table.results:
            rows.append(f"  {r.verdict:6s} {r.name:40s} {r.cause:28s} {r.first or '-':12s} "
                        f"traced {r.traced}/{r.error_lines} {r.detail}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=PARTS, default=None)
    ap.add_argument("--blind", action="store_const", const="blind", dest="part")
    ap.add_argument("--tuning", action="store_const", const="tuning", dest="part")
    ap.add_argument("--sample", type=int, default=None, help="only the first N threads")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--detail", action="store_true", help="one row per thread (no log text)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--root", type=Path, default=None,
                    help="a corpus directory laid out like this one (tests)")
    ap.add_argument("--site", action="append", default=[], metavar="DIR",
                    help="a site-packages directory passed to every triage call (repeatable)")
    ap.add_argument("--ci-stack", action="store_true",
                    help="add the stack CI installs (ci_stack.py: the real vllm-ascend and "
                         "torch-npu wheels, the real vLLM CPU venv), prepared once")
    args = ap.parse_args(argv)
    sites = [str(Path(s).resolve()) for s in args.site]
    if args.ci_stack:
        if __package__ in (None, ""):
            from ci_stack import sites as ci_sites  # type: ignore[import-not-found]
        else:
            from .ci_stack import sites as ci_sites
        sites += [s for s in ci_sites() if s not in sites]
    for s in sites:
        if not Path(s).is_dir():
            print(f"score.py: --site {s}: not a directory", file=sys.stderr)
            return 2
    if args.detail and (args.part or "blind") == "blind" and args.root is None:
        print("score.py: per-thread rows of the blind part are not shown (RULE.md §7); "
              "--detail works with --tuning", file=sys.stderr)
        return 2
    table = score(args.part or "blind", args.sample, root=args.root, workers=args.workers,
                  sites=tuple(sites))
    if args.json:
        doc = table.as_dict()
        if args.detail:
            doc["results"] = [r.__dict__ for r in table.results]
        print(json.dumps(doc, indent=2))
    else:
        print(render(table, args.detail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
