"""Bundles from elsewhere are untrusted: any bytes load to a BundleData or raise BundleError,
and a bundle that loads always yields a report (a wrong-shaped answer inside is an error
finding, never a crash of the run)."""

from __future__ import annotations

import gzip
import io
import json
import random
import tarfile

from hypothesis import HealthCheck, example, given, settings, strategies as st

from ascend_doctor.bundle import BundleData, BundleHost
from ascend_doctor.demo import demo_bundle_bytes
from ascend_doctor.engine import RunConfig, run
from ascend_doctor.errors import BundleError
from ascend_doctor.model import Report
from ascend_doctor.registry import Registry
from tests.fuzz.harness import assert_total, byte_inputs, heavy, json_mutate, mutate

DEMO = demo_bundle_bytes()
DEMO_TAR = gzip.decompress(DEMO)


def _members(tar_bytes: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


MEMBERS = _members(DEMO_TAR)
MANIFEST, INDEX = json.loads(MEMBERS["manifest.json"]), json.loads(MEMBERS["index.json"])


def pack(members: dict[str, bytes], compress: bool = True) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0) if compress else raw.getvalue()


def _inner(r: random.Random) -> bytes:
    """The real tar, mutated below the gzip layer (reaches tar and JSON parsing)."""
    return gzip.compress(mutate(r, DEMO_TAR, [DEMO_TAR], max_ops=3), mtime=0)


def _json_members(r: random.Random) -> bytes:
    """Real members with manifest.json or index.json of the wrong shape."""
    members = dict(MEMBERS)
    which = r.choice(["manifest.json", "index.json", "both", "text"])
    if which in ("manifest.json", "both"):
        members["manifest.json"] = json.dumps(json_mutate(r, MANIFEST)).encode()
    if which in ("index.json", "both"):
        members["index.json"] = json.dumps(json_mutate(r, _small_index(r))).encode()
    if which == "text":
        name = r.choice(["manifest.json", "index.json"])
        members[name] = mutate(r, members[name], [members[name]], max_ops=2)
    return pack(members, compress=r.random() < 0.5)


def _small_index(r: random.Random) -> dict:
    """A few kinds of the real index, so mutations land on its entries, not only its keys."""
    kinds = r.sample(sorted(INDEX), r.randint(1, 4))
    return {k: INDEX[k] for k in kinds}


_R = st.randoms(use_true_random=True, note_method_calls=False)
inner_mutations = lambda: _R.map(_inner)  # noqa: E731
json_mutations = lambda: _R.map(_json_members)  # noqa: E731


BUNDLE_BYTES = st.one_of(byte_inputs([DEMO], max_ops=3), inner_mutations(), json_mutations(),
                         st.just(b""), st.just(pack({})), st.just(pack(MEMBERS, False)[:1024]))


@given(BUNDLE_BYTES)
@example(pack({**MEMBERS, "manifest.json": b"[1, 2]"}))  # found: AttributeError
@example(pack({**MEMBERS, "manifest.json": json.dumps({**MANIFEST, "format_version": "x"}).encode()}))
@example(pack({**MEMBERS, "index.json": b'{"read": {"/etc/x": 5}}'}))  # found: TypeError
def test_bundle_load_total(raw):
    out = assert_total(BundleData.load, raw, allowed=(BundleError,))
    assert isinstance(out, (BundleData, BundleError))
    if isinstance(out, BundleError):
        assert "<bundle>" in str(out)


def test_bundle_load_names_the_file(tmp_path):
    p = tmp_path / "cut.tar.gz"
    p.write_bytes(DEMO[: len(DEMO) // 2])
    err = assert_total(BundleData.load, str(p), allowed=(BundleError,))
    assert isinstance(err, BundleError) and "cut.tar.gz" in str(err) and "truncated" in str(err)


_REGISTRY = Registry.discover(plugins=False)


@settings(heavy(), suppress_health_check=[HealthCheck.too_slow])
@given(json_mutations())
@example(pack({**MEMBERS, "index.json": json.dumps({**INDEX, "info": {"": ["x"]}}).encode()}))
def test_loaded_bundles_always_give_a_report(raw):
    try:
        data = BundleData.load(raw)
    except BundleError:
        return
    report = run(BundleHost(data), registry=_REGISTRY, config=RunConfig(timeout=5.0))
    assert isinstance(report, Report)
    assert {r.check_id for r in report.results} == set(_REGISTRY.checks)
