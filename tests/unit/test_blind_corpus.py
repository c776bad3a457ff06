"""The thread corpus (tests/corpus/threads, issue 32 item 4): the hash split is applied, no
file outside the blind part and the scorer cites a blind thread, and the scorer runs the real
`ascend-doctor triage` and produces numbers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpus.threads import corpus
from tests.corpus.threads.corpus import (CorpusError, blind_citations, canonical_url,
                                         cause_keys, load_thread, part_of, tomllib)

REPO = Path(__file__).resolve().parents[2]
THREADS = REPO / "tests" / "corpus" / "threads"
SCORER = THREADS / "score.py"
REALVLLM_LOG = REPO / "tests" / "corpus" / "realvllm" / "block-size-16-engine-init-failed.log"


def all_threads() -> list[corpus.Thread]:
    keys = cause_keys()
    return [load_thread(p, keys) for part in corpus.PARTS for p in corpus.thread_files(part)]


def test_every_thread_file_is_valid_and_sits_in_the_part_its_hash_says() -> None:
    seen: dict[str, Path] = {}
    for t in all_threads():
        assert t.part == part_of(t.url), f"{t.path} belongs in {part_of(t.url)}/"
        assert t.path.stem == corpus.file_stem(t.url), f"{t.path} should be {corpus.file_stem(t.url)}.toml"
        assert t.url not in seen, f"{t.url} twice: {seen.get(t.url)} and {t.path}"
        seen[t.url] = t.path


def test_split_rule_is_the_written_one() -> None:
    # sha256 first byte < 0x80 -> blind (RULE.md section 3); these two URLs fall on either side
    import hashlib

    for url in ("https://github.com/vllm-project/vllm/issues/1",
                "https://github.com/vllm-project/vllm/issues/2",
                "https://github.com/Ascend/pytorch/issues/3"):
        first = hashlib.sha256(url.encode()).digest()[0]
        assert part_of(url) == ("blind" if first < 0x80 else "tuning")
    assert part_of("https://github.com/a/b/issues/7/") == part_of("https://github.com/a/b/issues/7#x")
    with pytest.raises(CorpusError):
        canonical_url("https://github.com/a/b/blob/main/README.md")
    with pytest.raises(CorpusError):
        canonical_url("not a url")


def test_page_urls_are_canonicalised_split_and_named_by_the_written_rule() -> None:
    """RULE.md section 2h: web pages hash like GitHub threads after dropping the scheme's
    difference, the fragment, tracking parameters and a trailing slash; page-identifying
    query parameters stay."""
    import hashlib

    url = "https://blog.csdn.net/someone/article/details/135792468"
    for variant in ("http://blog.csdn.net/someone/article/details/135792468/",
                    "https://BLOG.CSDN.NET/someone/article/details/135792468#t3",
                    "https://blog.csdn.net/someone/article/details/135792468"
                    "?spm=1001.2014.3001.5502&utm_source=x",
                    "https://blog.csdn.net/someone/article/details/135792468?share_token=abc"):
        assert canonical_url(variant) == url
    topic = "https://www.hiascend.com/forum/thread.php?tid=0299142&utm_medium=feed&page=2"
    assert canonical_url(topic) == "https://www.hiascend.com/forum/thread.php?tid=0299142&page=2"
    for u in (url, topic, "https://zhuanlan.zhihu.com/p/678912345"):
        first = hashlib.sha256(canonical_url(u).encode()).digest()[0]
        assert part_of(u) == ("blind" if first < 0x80 else "tuning")
    assert corpus.file_stem(url) == "blog_csdn_net-135792468"
    assert corpus.file_stem("https://www.cnblogs.com/a/p/17012345.html") == "cnblogs_com-17012345"
    slug = "https://stackoverflow.com/questions/how-to-fix-npu"
    assert corpus.file_stem(slug) == "stackoverflow_com-" + hashlib.sha256(slug.encode()).hexdigest()[:8]
    assert corpus.site_of("https://www.cnblogs.com/a/p/17012345.html") == "cnblogs.com"
    assert corpus.site_of("https://github.com/vllm-project/vllm/issues/9") == "vllm-project/vllm"
    assert corpus.is_page(url) and not corpus.is_page("https://github.com/a/b/issues/1")


def test_page_citation_forms_find_the_page_and_refuse_longer_ids(tmp_path: Path) -> None:
    url = "https://blog.csdn.net/someone/article/details/135792468"
    assert corpus.citation_forms(url) == ["blog.csdn.net/someone/article/details/135792468",
                                          "details/135792468"]
    rx = corpus.citation_regex(url)
    assert rx.search("see https://blog.csdn.net/someone/article/details/135792468?spm=1")
    assert rx.search("CSDN details/135792468 again")
    assert not rx.search("details/1357924689 is another article")
    assert not rx.search("details/13579246 is another article")
    www = "https://www.cnblogs.com/a/p/17012345.html"
    assert corpus.citation_forms(www) == ["cnblogs.com/a/p/17012345.html", "p/17012345"]
    slug = "https://stackoverflow.com/questions/how-to-fix-npu"
    assert corpus.citation_forms(slug) == ["stackoverflow.com/questions/how-to-fix-npu"]
    assert not corpus.citation_regex(slug).search("stackoverflow.com/questions/how-to-fix-npu-2")
    (tmp_path / "knowledge").mkdir()
    (tmp_path / "knowledge/a.toml").write_text(f'sources = ["{www}"]', encoding="utf-8")
    (tmp_path / "docs.md").write_text("unrelated cnblogs.com/a/p/170123456.html", encoding="utf-8")
    hits = blind_citations(tmp_path, [www], files=["knowledge/a.toml", "docs.md"])
    assert hits == [("knowledge/a.toml", www)]


def test_a_page_file_with_the_wrong_site_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "blog_csdn_net-135792468.toml"
    f.write_text('url = "https://blog.csdn.net/someone/article/details/135792468"\n'
                 'repo = "csdn.net"\ncause = "npu-oom"\ndiagnosis = "x"\n'
                 "error_lines = [1]\nlog = '''\nRuntimeError: NPU out of memory.\n'''\n",
                 encoding="utf-8")
    with pytest.raises(CorpusError, match="blog.csdn.net"):
        load_thread(f, cause_keys())
    f.write_text(f.read_text().replace('"csdn.net"', '"blog.csdn.net"'), encoding="utf-8")
    assert load_thread(f, cause_keys()).repo == "blog.csdn.net"


def test_no_file_outside_the_blind_part_cites_a_blind_thread() -> None:
    blind = [t.url for t in all_threads() if t.part == "blind"]
    hits = blind_citations(REPO, blind)
    assert not hits, "blind threads cited (move nothing; remove the citation): " + ", ".join(
        f"{f} cites {u}" for f, u in hits[:20])


def test_the_citation_scan_finds_every_form(tmp_path: Path) -> None:
    url = "https://github.com/vllm-project/vllm-ascend/issues/4242"
    (tmp_path / "knowledge").mkdir()
    (tmp_path / "tests/corpus/threads/blind").mkdir(parents=True)
    forms = {"knowledge/a.toml": f'sources = ["{url}"]',
             "docs.md": "see vllm-project/vllm-ascend#4242 for the log",
             "notes.md": "vllm-ascend #4242 again",
             "pull.md": "https://github.com/vllm-project/vllm-ascend/pull/4242",
             "longer.md": "vllm-ascend#42421 is another thread",
             "tests/corpus/threads/blind/vllm-ascend-4242.toml": f'url = "{url}"',
             "tests/corpus/threads/score.py": f"# {url}"}
    for rel, text in forms.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    hits = {f for f, _ in blind_citations(tmp_path, [url], files=sorted(forms))}
    assert hits == {"knowledge/a.toml", "docs.md", "notes.md", "pull.md"}


def test_threads_cited_before_the_corpus_are_not_blind() -> None:
    # RULE.md section 4: a thread the KB or the triage corpus cites is never scored blind
    cited = (REPO / "knowledge").glob("*.toml")
    texts = [p.read_text("utf-8") for p in cited]
    texts.append((REPO / "tests/corpus/triage/INDEX.md").read_text("utf-8"))
    blob = "\n".join(texts)
    for t in all_threads():
        if t.part == "blind":
            assert not corpus.citation_regex(t.url).search(blob), t.path


def test_entry_cause_table_names_real_entries_and_keys() -> None:
    keys = cause_keys()
    table = tomllib.loads((THREADS / "ENTRY_CAUSES.toml").read_text("utf-8"))
    ids = set()
    for f in (REPO / "knowledge").glob("*.toml"):
        data = tomllib.loads(f.read_text("utf-8"))
        for e in data.get("entry", []):
            ids.add(e["id"])
            assert set(e.get("causes", [])) <= keys, f"{e['id']}: unknown cause keys"
    assert set(table) <= ids, sorted(set(table) - ids)
    for entry_id, causes in table.items():
        assert set(causes) <= keys, f"{entry_id}: {sorted(set(causes) - keys)} not in CAUSES.md"


def test_a_thread_file_that_breaks_the_format_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "vllm-1.toml"
    bad.write_text('url = "https://github.com/vllm-project/vllm/issues/1"\n'
                   'repo = "vllm-project/vllm"\ncause = "no-such-key"\ndiagnosis = "x"\n'
                   "error_lines = [3]\nlog = '''\nonly one line\n'''\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="error_lines"):
        load_thread(bad, cause_keys())
    bad.write_text(bad.read_text().replace("[3]", "[1]"), encoding="utf-8")
    with pytest.raises(CorpusError, match="no-such-key"):
        load_thread(bad, cause_keys())


def _sample_root(tmp_path: Path) -> Path:
    """A corpus root with one real failure: the real vLLM 0.32 server's own start-up log."""
    root = tmp_path / "corpus"
    for part in corpus.PARTS:
        (root / part).mkdir(parents=True)
    shutil.copy(THREADS / "CAUSES.md", root / "CAUSES.md")
    shutil.copy(THREADS / "ENTRY_CAUSES.toml", root / "ENTRY_CAUSES.toml")
    lines = REALVLLM_LOG.read_text("utf-8").splitlines()[-80:]
    errs = [i for i, ln in enumerate(lines, 1) if "Error:" in ln or "ERROR" in ln][-3:]
    assert errs, "the captured start-up failure has error lines"
    url = "https://github.com/example/fixture/issues/1"
    (root / part_of(url) / "fixture-1.toml").write_text(
        f'url = "{url}"\nrepo = "example/fixture"\ncause = "block-size-invalid"\n'
        f'diagnosis = "block size the CPU backend refuses"\nerror_lines = {errs}\n'
        "log = '''\n" + "\n".join(lines) + "\n'''\n", encoding="utf-8")
    return root


def test_scorer_runs_triage_and_reports_numbers(tmp_path: Path) -> None:
    root = _sample_root(tmp_path)
    part = next(p for p in corpus.PARTS if any((root / p).iterdir()))
    out = subprocess.run([sys.executable, str(SCORER), "--part", part, "--root", str(root),
                          "--json", "--detail"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["threads"] == 1 and doc["part"] == part
    assert doc["right"] + doc["wrong"] + doc["no_match"] + doc["errors"] == 1
    assert doc["errors"] == 0, doc["results"]
    assert doc["error_lines"] >= 1 and 0 <= doc["traced_lines"] <= doc["error_lines"]
    assert doc["trace_mode"] and doc["date"].endswith("UTC")
    (kind, row), = doc["by_kind"].items()
    assert kind in ("thread", "page") and row["threads"] == 1
    assert row["right"] + row["wrong"] + row["none"] + row["error"] == 1
    text = subprocess.run([sys.executable, str(SCORER), "--part", part, "--root", str(root)],
                          capture_output=True, text=True, timeout=300)
    assert text.returncode == 0 and "1 threads" in text.stdout and "error lines traced" in text.stdout
    assert "of which " in text.stdout


def test_scorer_runs_on_a_sample_of_the_tuning_part() -> None:
    if not corpus.thread_files("tuning"):
        pytest.skip("the tuning part is empty")
    out = subprocess.run([sys.executable, str(SCORER), "--tuning", "--sample", "3", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["threads"] == min(3, len(corpus.thread_files("tuning")))
    assert doc["right"] + doc["wrong"] + doc["no_match"] + doc["errors"] == doc["threads"]


def test_scorer_does_not_list_blind_threads() -> None:
    out = subprocess.run([sys.executable, str(SCORER), "--blind", "--detail"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and not out.stdout and "RULE.md" in out.stderr


def test_scorer_counts_traced_lines_by_their_source_and_scores_the_verdict(tmp_path: Path) -> None:
    from tests.corpus.threads import score

    answer = {"confident": False, "not_confident_because": "weak",
              "answers": [{"id": "ASC-LOG-001", "causes": []}],
              "matches": [{"id": "ASC-LOG-001", "lines": [{"line": 1, "text": "x"}]}],
              "error_lines": [{"line": 1, "source": "code-table", "traced_to": [{}]},
                              {"line": 2, "source": None, "traced_to": []}]}
    assert score.traced_lines(answer) == ({1}, "source")
    # an older triage without error_lines: the lines its matches quote
    old = {k: v for k, v in answer.items() if k != "error_lines"}
    assert score.traced_lines(old) == ({1}, "matched")
    # "no confident match" is no advice: scored none, whatever the first candidate says
    thread = corpus.Thread(tmp_path / "t.toml", "tuning", "https://github.com/a/b/issues/1",
                           "a/b", "npu-oom", "d", "x\ny", (1, 2))
    fake = tmp_path / "fake-doctor"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + json.dumps(answer) + "\nEOF\n")
    fake.chmod(0o755)
    r = score.score_one(thread, {}, [str(fake)])
    assert (r.verdict, r.traced, r.mode, r.detail) == ("none", 1, "source", "weak")
    confident = {**answer, "confident": True,
                 "answers": [{"id": "ASC-LOG-004", "causes": ["npu-oom"]}]}
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + json.dumps(confident) + "\nEOF\n")
    assert score.score_one(thread, {}, [str(fake)]).verdict == "right"


def test_scorer_passes_site_directories_to_triage_and_names_the_stack(tmp_path: Path) -> None:
    """--site DIR reaches every triage call: the source-index layer counts, and the table
    header says which packages and versions were indexed."""
    import os

    root = _sample_root(tmp_path)
    part = next(p for p in corpus.PARTS if any((root / p).iterdir()))
    site = tmp_path / "site"
    (site / "vllm" / "v1").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm" / "v1" / "utils.py").write_text(
        "def wait_for_engine_startup(failed):\n"
        "    raise RuntimeError('Engine core initialization failed. See root cause above. '\n"
        "                       f'Failed core proc(s): {failed}')\n")
    (site / "vllm-0.0.1.dist-info").mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    base = [sys.executable, str(SCORER), "--part", part, "--root", str(root), "--json"]
    bare = json.loads(subprocess.run(base, capture_output=True, text=True, timeout=300,
                                     env=env, check=True).stdout)
    out = subprocess.run([*base, "--site", str(site)], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["sites"] == [str(site.resolve())] and doc["indexed"] == "vllm 0.0.1"
    assert bare["indexed"] == "none (no --site)"
    text = subprocess.run([*base[:-1], "--site", str(site)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert "source index: vllm 0.0.1" in text.stdout, text.stdout
    missing = subprocess.run([*base, "--site", str(tmp_path / "nope")], capture_output=True,
                             text=True, timeout=60, env=env)
    assert missing.returncode == 2 and "not a directory" in missing.stderr
