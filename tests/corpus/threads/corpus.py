"""The thread corpus (RULE.md): real failure reports from public issue threads and web pages
(§2h), one TOML file each, split into a tuning and a blind part by a hash of the thread's URL.

Plain functions shared by the scorer (score.py) and tests/unit/test_blind_corpus.py.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
PARTS = ("blind", "tuning")
MAX_LOG_LINES = 80

_URL = re.compile(r"^https://github\.com/(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)"
                  r"/(?P<kind>issues|pull)/(?P<num>[0-9]+)$")


class CorpusError(ValueError):
    """A thread file that breaks the corpus format; names the file and the reason."""


def _is_github(url: str) -> bool:
    host = urlsplit(url.strip()).netloc.lower()
    return host in ("github.com", "www.github.com")


# Query parameters that track a visit and do not identify a page (RULE.md §2h).
_TRACKING = {"spm", "share_token", "share_source", "from", "source", "ref", "fbclid", "gclid"}
# A page's article id: digits (6+) or hex with a digit (8+), the last path segment
# without an .html/.htm/.shtml suffix.
_PAGE_ID = re.compile(r"^(?:[0-9]{6,}|(?=[0-9a-f]*[0-9])[0-9a-f]{8,})$", re.IGNORECASE)


def _canonical_page(url: str) -> str:
    """A web page's canonical URL (RULE.md §2h): https, lower-case host, no fragment, no
    tracking query parameters (other parameters kept in order), no trailing slash."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or " " in url.strip():
        raise CorpusError(f"not a GitHub issue or pull request URL, nor a web page URL: {url!r}")
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if k.lower() not in _TRACKING and not k.lower().startswith("utm_")]
    path = parts.path.rstrip("/")
    return urlunsplit(("https", parts.netloc.lower(), path, urlencode(query), ""))


def canonical_url(url: str) -> str:
    """The URL form the split hashes: for GitHub (RULE.md §3) no fragment, query or trailing
    slash, and only issue or pull request URLs; for any other page RULE.md §2h."""
    if not _is_github(url):
        return _canonical_page(url)
    url = url.strip().split("#", 1)[0].split("?", 1)[0].rstrip("/")
    if not _URL.match(url):
        raise CorpusError(f"not a GitHub issue or pull request URL: {url!r}")
    return url


def is_page(url: str) -> bool:
    """True for a web page (RULE.md §2h), False for a GitHub thread."""
    return not _is_github(canonical_url(url))


def site_of(url: str) -> str:
    """The `repo` field of a thread: `owner/repo` for GitHub, the host without `www.` for a page."""
    url = canonical_url(url)
    m = _URL.match(url)
    if m:
        return f"{m['owner']}/{m['repo']}"
    host = urlsplit(url).netloc
    return host[4:] if host.startswith("www.") else host


def _page_id(url: str) -> str | None:
    """The page's article id (last path segment, see _PAGE_ID), or None."""
    segs = [s for s in urlsplit(url).path.split("/") if s]
    if not segs:
        return None
    last = re.sub(r"\.s?html?$", "", segs[-1], flags=re.IGNORECASE)
    return last if _PAGE_ID.match(last) else None


def file_stem(url: str) -> str:
    """The file name (without .toml) a thread must have: `<repo>-<N>` for GitHub,
    `<site with dots as _>-<article id or sha8>` for a page (RULE.md §2h, §6)."""
    url = canonical_url(url)
    m = _URL.match(url)
    if m:
        return f"{m['repo']}-{m['num']}"
    pid = _page_id(url) or hashlib.sha256(url.encode()).hexdigest()[:8]
    return f"{site_of(url).replace('.', '_')}-{pid}"


def part_of(url: str) -> str:
    """'blind' when the first byte of sha256(canonical URL) is below 0x80, else 'tuning'."""
    return "blind" if hashlib.sha256(canonical_url(url).encode()).digest()[0] < 0x80 else "tuning"


def citation_forms(url: str) -> list[str]:
    """The strings that cite a thread, for a literal case-insensitive search.
    GitHub: its URL (issues and pull forms), `owner/repo#N`, `repo#N`, `repo #N` and
    `<repo>/issues/N`. Page: its canonical URL without scheme and `www.`, and, when the
    path ends in an article id, the last two path segments (`details/123456789`)."""
    url = canonical_url(url)
    m = _URL.match(url)
    if m is None:
        bare = url.split("://", 1)[1]
        forms = [bare[4:] if bare.startswith("www.") else bare]
        pid = _page_id(url)
        if pid:
            segs = [s for s in urlsplit(url).path.split("/") if s]
            if len(segs) >= 2:
                forms.append(f"{segs[-2]}/{pid}")
        return forms
    owner, repo, num = m["owner"], m["repo"], m["num"]
    base = f"github.com/{owner}/{repo}"
    return [f"{base}/issues/{num}", f"{base}/pull/{num}", f"{owner}/{repo}#{num}",
            f"{repo}#{num}", f"{repo} #{num}", f"{repo}/issues/{num}", f"{repo}/pull/{num}"]


def citation_regex(url: str) -> re.Pattern[str]:
    """One regex for citation_forms, refusing a longer number (`#12` must not hit `#123`;
    for a page, `details/123` must not hit `details/1234` nor a longer hex id)."""
    alts = "|".join(re.escape(f) for f in citation_forms(url))
    tail = "(?![0-9A-Za-z_-])" if is_page(url) else "(?![0-9])"
    return re.compile(rf"(?:{alts}){tail}", re.IGNORECASE)


def cause_keys(causes_md: Path | None = None) -> set[str]:
    """The keys of CAUSES.md (first column of its tables)."""
    text = (causes_md or HERE / "CAUSES.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([a-z0-9][a-z0-9-]*)` \|", text, re.M))


@dataclass(frozen=True)
class Thread:
    """One thread file: where it came from, the pasted log, the established cause."""

    path: Path
    part: str
    url: str
    repo: str
    cause: str
    diagnosis: str
    log: str
    error_lines: tuple[int, ...]

    @property
    def log_lines(self) -> list[str]:
        return self.log.splitlines()


def load_thread(path: Path, keys: set[str] | None = None) -> Thread:
    """Parse and validate one thread file; CorpusError names the file and what is wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CorpusError(f"{path}: {exc}") from None
    missing = [k for k in ("url", "repo", "cause", "diagnosis", "log", "error_lines")
               if k not in data]
    if missing:
        raise CorpusError(f"{path}: missing {', '.join(missing)}")
    try:
        url = canonical_url(str(data["url"]))
    except CorpusError as exc:
        raise CorpusError(f"{path}: {exc}") from None
    if data["repo"] != site_of(url):
        raise CorpusError(f"{path}: repo {data['repo']!r} is not the URL's ({site_of(url)!r})")
    log = str(data["log"]).strip("\n")
    n = len(log.splitlines())
    if not 1 <= n <= MAX_LOG_LINES:
        raise CorpusError(f"{path}: log has {n} lines (1..{MAX_LOG_LINES})")
    errs = tuple(int(x) for x in data["error_lines"])
    if not errs or any(not 1 <= x <= n for x in errs) or len(set(errs)) != len(errs):
        raise CorpusError(f"{path}: error_lines must be distinct line numbers within 1..{n}")
    if keys is not None and data["cause"] not in keys:
        raise CorpusError(f"{path}: cause {data['cause']!r} is not a key of CAUSES.md")
    return Thread(path=path, part=path.parent.name, url=url, repo=str(data["repo"]),
                  cause=str(data["cause"]), diagnosis=str(data["diagnosis"]), log=log,
                  error_lines=errs)


def thread_files(part: str, root: Path | None = None) -> list[Path]:
    """The thread files of one part, sorted by name."""
    if part not in PARTS:
        raise CorpusError(f"unknown part {part!r} (one of {', '.join(PARTS)})")
    return sorted(((root or HERE) / part).glob("*.toml"))


def load_part(part: str, root: Path | None = None) -> list[Thread]:
    keys = cause_keys((root or HERE) / "CAUSES.md")
    return [load_thread(p, keys) for p in thread_files(part, root)]


# Files the blind-citation rule does not look at: the blind part itself and the scorer
# (RULE.md §7); build and VCS directories hold no authored text.
SCAN_EXEMPT = ("tests/corpus/threads/blind/", "tests/corpus/threads/score.py")
_SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache",
              ".hypothesis", "node_modules", ".cache", "build", "dist"}


def repo_files(repo: Path) -> list[str]:
    """Paths (relative, '/'-separated) of the repository's authored files: what git tracks
    plus untracked files it does not ignore; a plain walk when git is not there."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, timeout=60, check=True)
        return sorted({p for p in out.stdout.decode("utf-8", "replace").split("\0") if p})
    except (OSError, subprocess.SubprocessError):
        found = []
        for p in repo.rglob("*"):
            rel = p.relative_to(repo)
            if p.is_file() and not _SKIP_DIRS.intersection(rel.parts):
                found.append(rel.as_posix())
        return sorted(found)


def blind_citations(repo: Path, urls: list[str], files: list[str] | None = None
                    ) -> list[tuple[str, str]]:
    """(file, url) for every file outside SCAN_EXEMPT that cites one of ``urls`` in any
    form of citation_forms."""
    if not urls:
        return []
    regexes = [(u, citation_regex(u)) for u in urls]
    hits = []
    for rel in files if files is not None else repo_files(repo):
        if rel.startswith(SCAN_EXEMPT):
            continue
        try:
            text = (repo / rel).read_bytes()[:4_000_000].decode("utf-8", "replace")
        except OSError:
            continue
        hits += [(rel, u) for u, rx in regexes if rx.search(text)]
    return hits
