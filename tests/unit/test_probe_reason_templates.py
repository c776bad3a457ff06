"""Issue 14 item 6: the reasons a probe gives for a skip or an error, and why a fleet bundle
is refused, are message templates: the English stays byte-identical, and a catalog renders
them (arguments included) in the reader's language. A stand-in catalog ("xx", every
template wrapped in « ») shows the translation path without depending on the zh .po."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from ascend_doctor import i18n
from ascend_doctor.bundle.format import BundleData
from ascend_doctor.bundle.read import load_into
from ascend_doctor.engine import run_check
from ascend_doctor.errors import BundleError, ParseError, SourceMissing
from ascend_doctor.facts import FactStore
from ascend_doctor.fleet import bundle_paths, fleet_registry, load_node
from ascend_doctor.i18n import Msg, tr
from ascend_doctor.model import Category, Finding
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.ascendfiles import gather_active_toolkit
from ascend_doctor.probes.cann import parse_toolkit_install_info
from ascend_doctor.probes.faults import parse_proc_stat
from ascend_doctor.probes.service import DavinciNodes, gather_davinci_nodes
from ascend_doctor.registry import CheckSpec, Registry


def needs_nodes(nodes: DavinciNodes) -> Finding:
    """A check that cannot run without the NPU device nodes."""
    return Finding.passed("unreachable")


@pytest.fixture
def xx():
    """A catalog for the test language "xx" that knows every msgid: «template»."""
    i18n.register_catalog("xx", lambda s: f"«{s}»")
    yield "xx"
    i18n._lookups.pop("xx", None)


def _link_bundle(path: Path) -> Path:
    """A bundle whose blobs/x is a symlink to /etc/shadow (the reader must refuse it)."""
    with tarfile.open(path, "w:gz") as tar:
        manifest = json.dumps({"format": "ascend-doctor-bundle", "format_version": 1}).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        link = tarfile.TarInfo("blobs/x")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tar.addfile(link)
    return path


def test_a_missing_source_reason_is_a_template_with_the_same_english(sysroot, xx):
    sysroot.mkdir("/dev")
    with pytest.raises(SourceMissing) as e:
        gather_davinci_nodes(sysroot.host())
    assert e.value.reason == "no NPU device nodes" and isinstance(e.value.reason, Msg)
    assert tr(e.value.reason, xx) == "«no NPU device nodes»"
    with pytest.raises(SourceMissing) as e:
        gather_active_toolkit(sysroot.host())
    assert str(e.value) == ("/usr/local/Ascend/ascend-toolkit/latest: no CANN toolkit link "
                            "(ascend-toolkit/latest or cann)")
    assert tr(e.value.reason, xx) == "«no CANN toolkit link (ascend-toolkit/latest or cann)»"


def test_a_parse_error_keeps_its_arguments_through_translation(xx):
    with pytest.raises(ParseError) as e:
        parse_proc_stat("12x (python) S 1 2 3")
    assert e.value.reason == "pid field '12x' is not a number"
    assert tr(e.value.reason, xx) == "«pid field '12x' is not a number»"
    with pytest.raises(ParseError) as e:
        parse_toolkit_install_info("package_name=Ascend-cann-toolkit\narch=x86_64\n", "install.info")
    assert e.value.reason == "no version= line" and tr(e.value.reason, xx) == "«no version= line»"


def test_the_engine_skip_translates_the_probe_reason(sysroot, xx):
    """The skip finding a check gets when its source is missing: both the frame and the
    probe's reason are translated (no English reason inside a translated frame)."""
    sysroot.mkdir("/dev")
    reg = Registry.discover()
    spec = CheckSpec("t.nodes", "needs NPU nodes", needs_nodes, Category.NPU)
    store = FactStore(sysroot.host(), RunOptions(), reg)
    (f,) = run_check(spec, store)
    assert f.status.value == "skip", f.message
    assert f.message == "missing source: /dev/davinci* (no NPU device nodes)"
    assert tr(f.message, xx) == "«missing source: «/dev/davinci*» («no NPU device nodes»)»"


def test_a_refused_bundle_reason_translates_nested(tmp_path, xx):
    evil = _link_bundle(tmp_path / "node-66.tar.gz")
    with pytest.raises(BundleError) as e:
        load_into(BundleData(), str(evil))
    msg = e.value.args[0]
    assert msg == f"{evil} is refused: member 'blobs/x' is a link (to '/etc/shadow')"
    assert tr(msg, xx) == f"«{{name}} is refused: {{reason}}»".format(
        name=evil, reason="«member 'blobs/x' is a link (to '/etc/shadow')»")


def test_fleet_keeps_the_refusal_translatable_and_english_identical(tmp_path, xx):
    evil = _link_bundle(tmp_path / "node-66.tar.gz")
    node = load_node(str(evil), fleet_registry())
    assert node.error == f"{evil} is refused: member 'blobs/x' is a link (to '/etc/shadow')"
    assert isinstance(node.error, Msg) and tr(node.error, xx).startswith("«")
    json.dumps(node.to_json())  # still a plain JSON string


def test_a_missing_bundle_path_names_it_in_a_template(tmp_path, xx):
    gone = tmp_path / "nope.tar.gz"
    with pytest.raises(ValueError) as e:
        bundle_paths([str(gone)])
    assert str(e.value) == f"{gone}: no such bundle file or directory"
    assert tr(e.value.args[0], xx) == f"«{gone}: no such bundle file or directory»"
