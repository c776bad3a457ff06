"""The speed work (issue 16) changes no result: the KB cache, the bundle glob's prefix
search and the cached type hints give the very findings, statuses and messages of the
plain paths, on the demo scenario and on its exported bundle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing

import pytest

from ascend_doctor.bundle.replay import _glob_keys, _glob_match
from ascend_doctor.demo import demo_bundle_data
from ascend_doctor.facts import requirements
from ascend_doctor.registry import Registry


def _stable(doc):
    """The report without what changes from run to run (timings, the start time)."""
    if isinstance(doc, dict):
        return {k: _stable(v) for k, v in doc.items() if k not in ("duration_s", "started_at")}
    if isinstance(doc, list):
        return [_stable(v) for v in doc]
    return doc


def _cli(args: list[str], env: dict[str, str], ok: tuple[int, ...]) -> dict:
    r = subprocess.run([sys.executable, "-m", "ascend_doctor.cli", *args], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode in ok, r.stderr
    return _stable(json.loads(r.stdout))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """demo --json and check --bundle --json: KB cache missed (written), hit, and off."""
    tmp = tmp_path_factory.mktemp("speed")
    (tmp / "xdg").mkdir(mode=0o700)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "xdg"), "NO_COLOR": "1", "CI": "true"}
    env.pop("ASCEND_DOCTOR_CACHE", None)
    bundle = str(tmp / "demo.tar.gz")
    subprocess.run([sys.executable, "-m", "ascend_doctor.cli", "demo", "--export", bundle],
                   env=env, check=True, capture_output=True, timeout=120)
    out = {}
    for mode, extra in (("miss", {}), ("hit", {}), ("off", {"ASCEND_DOCTOR_CACHE": "0"})):
        e = {**env, **extra}
        out[mode] = (_cli(["demo", "--json"], e, (0,)),
                     _cli(["check", "--bundle", bundle, "--json"], e, (0, 1)))
        if mode == "miss":
            assert [p.name for p in (tmp / "xdg" / "ascend-doctor").iterdir()], "no cache written"
    return out


def test_demo_and_bundle_reports_identical_with_and_without_the_kb_cache(runs):
    for i, what in enumerate(("demo --json", "check --bundle --json")):
        off, miss, hit = runs["off"][i], runs["miss"][i], runs["hit"][i]
        assert miss == off, what
        assert hit == off, what
        # a real report: every check ran, KB titles and problems are there
        assert len(off["checks"]) >= 50 and off["summary"]["fail"] > 0
        assert off["problems"] and any(c["findings"][0].get("kb") for c in off["checks"])


def _patterns(paths: list[str]) -> list[str]:
    """Globs a probe would ask, built from the recorded paths: one component starred, a
    digit class, a ``?``, the literal path, a pattern with no match."""
    out = {"/nonexistent/*", "/*", "/proc/*/status", "/usr/local/Ascend/*/lib64/*.so*",
           "/etc/ld.so.conf.d/*.conf", "/dev/davinci[0-9]*", "[", "/etc/[a-", "/*/*"}
    for p in paths[::3]:
        parts = p.split("/")
        out.add(p)
        for i in range(1, len(parts)):
            star = parts[:i] + ["*"] + parts[i + 1:]
            out.add("/".join(star))
            if parts[i]:
                out.add("/".join(parts[:i] + [parts[i][:-1] + "?"] + parts[i + 1:]))
                out.add("/".join(parts[:i] + [parts[i][:1] + "*"] + parts[i + 1:]))
        out.add("/".join(parts[:-1]) + "/[0-9a-z]*")
    return sorted(out)


def test_glob_prefix_search_answers_as_matching_every_path():
    data = demo_bundle_data()
    paths = sorted({k for kind in ("read", "stat", "lstat", "listdir")
                    for k in data.index.get(kind, {})})
    assert len(paths) > 100
    patterns = _patterns(paths)
    assert len(patterns) > 500
    matched = 0
    for pat in patterns:
        want = {k for k in paths if _glob_match(k, pat)}
        assert _glob_keys(paths, pat) == want, pat
        matched += bool(want)
    assert matched > len(patterns) // 2  # the patterns really hit recorded paths


def test_cached_requirements_are_the_type_hints():
    reg = Registry.discover(plugins=False)
    funcs = [s.func for s in reg.checks.values()] + [s.func for s in reg.providers.values()]
    for f in funcs:
        hints = typing.get_type_hints(f)
        hints.pop("return", None)
        first, again = requirements(f), requirements(f)
        assert first is again  # computed once
        assert list(first) == list(hints)
