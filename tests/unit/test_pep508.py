"""ascend_doctor.pep508 (the fast reader of Requires-Dist lines) against packaging 26.4.

Whenever the fast path accepts a line, packaging must accept it too and give the same name,
extras, specifier, url, str(marker), str(req) and the same evaluate() result or exception,
in a set of environments; it must decline (None) everything else. Checked on every
Requires-Dist line installed in this venv and in the cached test / bench venvs, on the real
torch_npu / vllm_ascend / vllm wheels' METADATA, and on generated near-valid strings.
"""

from __future__ import annotations

import glob
import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from packaging.markers import default_environment as pk_default_environment
from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as PkRequirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name as pk_canonicalize_name

from ascend_doctor import pep508
from ascend_doctor.probes.packages import Package, Packages, parse_metadata, requirements_of

REPO = Path(__file__).resolve().parents[2]

ENVIRONMENTS = [
    (None, "metadata"),
    ({**pk_default_environment(), "extra": ""}, "metadata"),
    ({"python_version": "3.9", "python_full_version": "3.9.18"}, "metadata"),
    ({"python_version": "3.10", "python_full_version": "3.10.14"}, "metadata"),
    ({"python_version": "3.12", "python_full_version": "3.12.0rc1"}, "metadata"),
    ({"python_version": "3", "python_full_version": "3.13.1+"}, "metadata"),
    ({"platform_machine": "aarch64"}, "metadata"),
    ({"platform_machine": "x86_64", "sys_platform": "linux", "platform_system": "Linux"},
     "metadata"),
    ({"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt",
      "platform_machine": "AMD64"}, "metadata"),
    ({"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64",
      "platform_release": "23.1.0"}, "metadata"),
    ({"platform_release": "5.15.0-91-generic", "implementation_name": "pypy",
      "implementation_version": "7.3.13", "platform_python_implementation": "PyPy"},
     "metadata"),
    ({"extra": "test"}, "metadata"),
    ({"extra": "Foo_Bar"}, "metadata"),
    ({"extra": "cuda.12"}, "metadata"),
    ({"extra": None}, "metadata"),
    ({"extra": frozenset({"test", "Ray"})}, "metadata"),
    ({"extra": set()}, "metadata"),
    (None, "requirement"),
    (None, "lock_file"),
    ({"extra": "dev"}, "requirement"),
]


def outcome(marker, environment, context):
    try:
        return marker.evaluate(environment, context)
    except Exception as exc:  # the same type and words as packaging's
        return type(exc), str(exc)


def agrees(line: str) -> bool:
    """True when the fast path took ``line`` (and then equals packaging), False when it
    declined."""
    fast = pep508.parse(line)
    if fast is None:
        return False
    try:
        ref = PkRequirement(line)
    except InvalidRequirement as exc:
        raise AssertionError(f"fast path accepted {line!r}, packaging rejects it: {exc}")
    assert fast.name == ref.name, line
    assert fast.extras == ref.extras, line
    assert fast.url is None and ref.url is None, line
    assert isinstance(fast.specifier, SpecifierSet), line
    assert str(fast.specifier) == str(ref.specifier), line
    assert fast.specifier == ref.specifier, line
    assert fast.specifier.prereleases == ref.specifier.prereleases, line
    assert str(fast) == str(ref), line
    assert (fast.marker is None) == (ref.marker is None), line
    if ref.marker is not None:
        assert str(fast.marker) == str(ref.marker), line
        for environment, context in ENVIRONMENTS:
            assert outcome(fast.marker, environment, context) == \
                outcome(ref.marker, environment, context), (line, environment, context)
    return True


# -- real Requires-Dist lines ----------------------------------------------------------------

def _site_dirs() -> list[str]:
    pats = ("tests/.cache/venv-*/lib/python3*/site-packages",
            "bench/out/*/lib/python3*/site-packages")
    return sorted(d for p in pats for d in glob.glob(str(REPO / p)))


def real_lines() -> dict[str, list[str]]:
    """{where: Requires-Dist lines} for this venv, the cached venvs and the cached wheels."""
    out = {"this venv": [r for d in importlib.metadata.distributions() for r in d.requires or ()]}
    for site in _site_dirs():
        out[site] = [r for d in importlib.metadata.distributions(path=[site])
                     for r in d.requires or ()]
    for whl in sorted((REPO / "tests/.cache/wheels").glob("*.whl")):
        with zipfile.ZipFile(whl) as z:
            for n in z.namelist():
                if n.endswith(".dist-info/METADATA") and n.count("/") == 1:
                    out[whl.name] = list(parse_metadata(z.read(n).decode("utf-8")).requires)
    return out


def test_every_real_requires_dist_line():
    lines = real_lines()
    took = {where: sum(agrees(line) for line in ls) for where, ls in lines.items()}
    total = sum(len(ls) for ls in lines.values())
    assert total > 50, lines  # the venv alone has dozens
    # The fast path must carry the common case, or it saves nothing.
    assert sum(took.values()) >= 0.9 * total, {w: (took[w], len(lines[w])) for w in lines}


def test_serving_stack_wheels_take_the_fast_path():
    for where, ls in real_lines().items():
        if where.startswith(("torch_npu-", "vllm_ascend-")):
            assert ls and all(pep508.parse(line) is not None for line in ls), where


# -- hand-written cases ----------------------------------------------------------------------

ACCEPTED = [
    "torch==2.5.1",
    "torch (==2.5.1)",
    "torch(>=2.1,<3)",
    "torch ( >= 2.1 , < 3 )",
    "numpy>=1.21,!=1.24.0,<2",
    "Torch_NPU[Test, Dev.Tools]==2.10.0.post4; extra == 'Foo_Bar'",
    "a[x]",
    "pytest; extra == \"test\"",
    "pytest ;extra=='TEST'",
    "triton==3.1.0; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
    "nvidia-cublas-cu12==12.4.5.8; platform_system == \"Linux\" and platform_machine == "
    "\"x86_64\" and python_version < \"3.13\"",
    "foo; (python_version >= '3.9' or os_name == 'nt') and sys_platform != 'win32'",
    "foo; ((python_version >= '3.9'))",
    "foo; (python_version >= '3.9') and ((os_name == 'nt' or os_name == 'posix'))",
    "foo; python_version>='3.9'and os_name=='nt'or(sys_platform=='linux')",
    "foo; 'linux' in sys_platform",
    "foo; 'win' not  in sys_platform",
    "foo; '3.9' <= python_version",
    "foo; 'Foo_Bar' == extra",
    "foo; 'foo' in extra",
    "foo; python_full_version ~= '3.9.1'",
    "foo; python_version ~= '3'",
    "foo; platform_machine ~= 'x86'",
    "foo; platform_machine < 'x86'",
    "foo; python_version in '3.9 3.10'",
    "foo; python_version == '3.*'",
    "foo; implementation_version >= '7.3' and platform_release > '5'",
    "foo; extra != 'a' and extra == ''",
    "foo ==1.0.post1.dev2+local",
    "foo == 2.*",
    "foo ~=1.4.5a4",
    "foo >=v1.0, <1!3",
    "  foo  ",
    "foo;python_version<'3'   ",
]

DECLINED = [
    "foo @ https://example.com/foo.whl",
    "foo===1.0",
    "foo; python_version === '3.9'",
    "foo\t>=1",
    "foo; os.name == 'nt'",
    "foo; python_implementation == 'CPython'",
    "foo; 'a' in extras",
    "foo; unknown == 'x'",
    "foo; python_version == python_full_version",
    "foo; 'a' == 'b'",
    "foo; os_name == 'a\\\\b'",
    "foo; os_name == \"it's\"",
    "foo; os_name == 'caf\u00e9'",
    "foo[]",
    "foo[a,]",
    "foo>=1,",
    "foo ()",
    "foo; ",
    "foo>=1.0.*",
    "foo>=1.0+local",
    "foo bar",
    "foo; python_version < '3' and",
    "foo; (python_version < '3'",
    "foo; " + "(" * 150 + "os_name == 'nt'" + ")" * 150,
]


@pytest.mark.parametrize("line", ACCEPTED)
def test_accepted(line):
    assert agrees(line), f"the fast path declined {line!r}"


@pytest.mark.parametrize("line", DECLINED)
def test_declined(line):
    assert pep508.parse(line) is None


def test_undefined_comparison_is_packaging_s_exception():
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName

    with pytest.raises(UndefinedComparison):
        pep508.parse("foo; os_name ~= 'nt'").marker.evaluate()
    with pytest.raises(UndefinedEnvironmentName):
        pep508.parse("foo; extra == 'x'").marker.evaluate(context="requirement")


def test_evaluates_every_item_as_packaging_does():
    # no short cut: the undefined comparison after a false "and" still raises
    assert outcome(pep508.parse("foo; os_name == 'x' and os_name ~= 'y'").marker, None,
                   "metadata")[0].__name__ == "UndefinedComparison"


# -- generated strings -----------------------------------------------------------------------
# Mostly well-formed pieces with a near-miss now and then, so that a fair share of the strings
# takes the fast path (where it must agree) and the rest probes where it must decline.


def mostly(good: list, bad: list, weight: int = 1):
    """One of ``good``, or (one draw in 15 * ``weight`` + 1) one of ``bad``."""
    top = 15 * weight
    return st.builds(lambda roll, g, b: b if roll == top else g, st.integers(0, top),
                     st.sampled_from(good), st.sampled_from(bad))


CLOSE = mostly([")"], ["", "))"])
WS = mostly(["", " ", " ", "  "], ["\t", "   "], 3)
NAMES = mostly(["torch", "torch-npu", "Torch_NPU", "vllm.ascend", "a", "A1", "numpy", "in",
                "and", "a..b", "1"], ["foo-", "_foo", "foo_", "x y", "caf\u00e9", "-"], 2)
EXTRA_NAMES = mostly(["test", "Foo_Bar", "cuda.12", "a", "ray", "A--b"], ["", "dev-", "x y"])
VERSIONS = mostly(["1", "1.0", "2.5.1", "1.0.post1.dev2+local", "1.0.post1.dev2", "2.*",
                   "1.0.*", "v1.2", "1!2.0", "1.0rc1", "1.0a1", "1.0+cpu", "0.25.0", "3.10",
                   "1.0.dev0", "2.10.0.post4", "1.0-1", "1.0_rc1", "01.02", "1.0.POST1"],
                  ["abc", "", "1.*.0", "1.0)", "1;0", "1.0+", "1.0 1", "*", "1,0"], 2)
SPEC_OPS = mostly(["==", "!=", "<=", ">=", "<", ">", "~="], ["===", "=", "<>", "=>", ""])
CLAUSE = st.builds(lambda a, op, b, v, c: a + op + b + v + c, WS, SPEC_OPS, WS, VERSIONS, WS)
SPECS = st.builds(lambda cs, trail: ",".join(cs) + trail, st.lists(CLAUSE, max_size=3),
                  mostly([""], [","]))
SPECIFIER = st.one_of(st.just(""), SPECS, st.builds(
    lambda a, s, b, close: a + "(" + s + close + b, WS, SPECS, WS, CLOSE))
EXTRAS = st.one_of(st.just(""), st.just(""), st.builds(
    lambda a, names, b: "[" + a + ", ".join(names) + b + "]", WS,
    st.lists(EXTRA_NAMES, max_size=3), WS),
    st.lists(EXTRA_NAMES, min_size=1, max_size=3).map(lambda ns: "[" + ",".join(ns) + "]"))
VARS = mostly(["python_version", "python_full_version", "os_name", "sys_platform",
               "platform_release", "platform_system", "platform_version", "platform_machine",
               "platform_python_implementation", "implementation_name",
               "implementation_version", "extra"],
              ["os.name", "python_implementation", "extras", "dependency_groups", "foo",
               "sys.platform", "platform.machine", "python_versionx", "Extra"])
VALUES = mostly(["3.8", "3.10", "3.12", "3", "3.*", "3.9.0", "3.13.1+local", "3.13.1+", "linux",
                 "win32", "Linux", "Windows", "x86_64", "aarch64", "posix", "nt", "cpython",
                 "CPython", "test", "Foo_Bar", "foo-bar", "cuda.12", "", "a b", "5.15",
                 "7.3.13", "lin", "1.0+local", "1.0)", "1;0", "and", "(x)", "3.9.*",
                 "3.9.0rc1", "5.15.0-91-generic", "#1 SMP", "x86", "win", "py", "3.1"],
                ["a'b", 'a"b', "a\\b", "caf\u00e9", "a\tb"], 3)
QUOTES = mostly([('"', '"'), ("'", "'")], [("", ""), ('"', "'"), ("'", ""), ("", "'")], 4)
# and values taken from the environments compared in, whole or cut short, so that string
# operators ("in", "<=") meet equal and contained strings, not only unrelated ones
ENV_VALUES = sorted({v for env, _ in ENVIRONMENTS for v in (env or {}).values()
                     if isinstance(v, str) and v})
VALUE = st.one_of(st.builds(lambda v, q: q[0] + v + q[1], VALUES, QUOTES), st.builds(
    lambda v, n, q: q[0] + v[:n] + q[1], st.sampled_from(ENV_VALUES), st.integers(1, 12), QUOTES))
MARKER_OPS = mostly(["==", "!=", "<", "<=", ">", ">=", "~=", "in", "not in"],
                    ["===", "not  in", "notin", "=", "<>", "is", "not\tin"], 2)
# variable op value, value op variable, or now and then any two operands
SIDES = mostly(["var-val", "var-val", "val-var"], ["any"])
ITEM = st.builds(
    lambda sides, var, val, any1, any2, a, op, b: (
        var + a + op + b + val if sides == "var-val" else
        val + a + op + b + var if sides == "val-var" else any1 + a + op + b + any2),
    SIDES, VARS, VALUE, st.one_of(VARS, VALUE), st.one_of(VARS, VALUE), WS, MARKER_OPS, WS)
BOOLS = mostly(["and", "or"], ["AND", "&&", "or not", ""])
MARKER = st.recursive(ITEM, lambda inner: st.one_of(
    st.builds(lambda x, a, op, b, y: x + a + op + b + y, inner, WS, BOOLS, WS, inner),
    st.builds(lambda a, x, b, close: "(" + a + x + b + close, WS, inner, WS, CLOSE)),
    max_leaves=6)
TAIL = st.one_of(st.just(""), st.builds(lambda a, m, b: ";" + a + m + b, WS, MARKER, WS),
                 st.builds(lambda a, m, b: ";" + a + m + b, WS, MARKER, WS),
                 st.just(" @ https://example.com/a.whl"),
                 st.builds(lambda m: " @ https://example.com/a.whl ; " + m, MARKER))
REQUIREMENT = st.builds(lambda a, name, b, extras, spec, tail: a + name + b + extras + spec
                        + tail, WS, NAMES, WS, EXTRAS, SPECIFIER, TAIL)


@settings(max_examples=max(500, settings().max_examples))
@given(REQUIREMENT)
@example("torch==2.5.1; extra == 'Foo_Bar' and python_version in '3.9 3.10'")
def test_generated_requirements(line):
    agrees(line)


@settings(max_examples=max(500, settings().max_examples))
@given(MARKER)
def test_generated_markers(marker):
    agrees("foo>=1.0; " + marker)


@given(st.text(max_size=60))
def test_any_text(text):
    agrees(text)
    assert pep508.canonicalize_name(text) == pk_canonicalize_name(text)


def test_only_under_the_packaging_release_it_mirrors(monkeypatch):
    assert pep508.ENABLED, ("packaging is not the release pep508 mirrors: run this file against "
                            "it, fix what differs, then update pep508.VERIFIED_WITH")
    assert pep508._same_rules("26.4.1") and not pep508._same_rules("25.0")
    assert not pep508._same_rules("27.0") and not pep508._same_rules("26.4rc1")
    monkeypatch.setattr(pep508, "ENABLED", False)
    assert pep508.parse("torch==2.5.1") is None
    pkgs = Packages("3.11.7", "", "test", {"x": Package("x", "1", ("torch==2.5.1", "!!"))})
    assert [str(r) for _, r in requirements_of(pkgs, ("x",))] == ["torch==2.5.1"]


# -- the helpers checks/versions.py uses instead of packaging.markers / packaging.utils -------

def test_default_environment_is_packaging_s():
    env = pep508.default_environment()
    assert env == pk_default_environment()
    env["python_version"] = "changed"  # a fresh copy each time, as packaging's
    assert pep508.default_environment() == pk_default_environment()


@pytest.mark.parametrize("name", ["Django", "oslo.concurrency", "torch_npu", "A--B__c..D",
                                  "-x-", "vllm-ascend"])
def test_canonicalize_name(name):
    assert pep508.canonicalize_name(name) == pk_canonicalize_name(name)


# -- requirements_of: fast where sure, packaging otherwise, malformed lines skipped ----------

def test_requirements_of_falls_back_to_packaging():
    lines = ("torch==2.5.1", "foo @ https://example.com/foo.whl ; os_name == 'nt'",
             "bar===1.0", "not a requirement !!", "baz; os.name == 'posix'", "numpy>=1,<2")
    pkgs = Packages("3.11.7", "", "test", {"x": Package("x", "1", lines)})
    got = [req for _, req in requirements_of(pkgs, ("x", "absent"))]
    want = []
    for line in lines:
        try:
            want.append(PkRequirement(line))
        except InvalidRequirement:
            pass
    assert [str(r) for r in got] == [str(r) for r in want]
    assert [type(r).__module__ for r in got] == [
        "ascend_doctor.pep508", "packaging.requirements", "packaging.requirements",
        "packaging.requirements", "ascend_doctor.pep508"]
    assert got[1].url == "https://example.com/foo.whl"


def test_pip_match_fix_reads_fast_requirements():
    from ascend_doctor.fixes.versions import pins_from

    lines = ("torch==2.5.1", "torch-npu (==2.5.1.post1)", "torchvision>=0.20; extra == 'x'",
             "numpy<2")
    pkgs = Packages("3.11.7", "", "test", {"vllm-ascend": Package("vllm-ascend", "0.9", lines)})
    assert pins_from(pkgs) == ({"torch": "torch==2.5.1", "torch-npu": "torch-npu==2.5.1.post1"},
                               [])


def test_demo_run_imports_no_slow_packaging_module():
    code = (
        "import contextlib, io, sys\n"
        "from ascend_doctor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(args=['demo', '--json'], standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('packaging.'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    slow = {"packaging.markers", "packaging.requirements", "packaging.utils", "packaging.tags"}
    assert "packaging.specifiers" in out and not slow & set(out), out
