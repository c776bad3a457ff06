"""Finding check plugins without importing importlib.metadata (doctor/registry.py
``_may_declare_plugins``): a real plugin on the path is still found and loaded; a path that
declares none costs no importlib.metadata import and gives the same empty answer."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from ascend_doctor.registry import ENTRY_POINT_GROUP, _may_declare_plugins

PLUGIN = textwrap.dedent('''
    from ascend_doctor.model import Category, Finding
    from ascend_doctor.registry import check

    @check("thirdparty.hello", title="a third-party check", category=Category.HOST)
    def hello():
        yield Finding.passed("plugin ran")
''')


def _site(tmp_path, entry_points: str | None, plugin: bool = True) -> str:
    site = tmp_path / "site"
    site.mkdir()
    if plugin:
        (site / "thirdparty_checks.py").write_text(PLUGIN)
    dist = site / "thirdparty_checks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-checks\nVersion: 1.0\n")
    if entry_points is not None:
        (dist / "entry_points.txt").write_text(entry_points)
    (site / "old_style.egg-info").write_text("Metadata-Version: 1.0\nName: old-style\n")  # a file
    return str(site)


def _run(code: str, site: str) -> str:
    env = {**os.environ, "PYTHONPATH": site}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True, timeout=60).stdout


SCRIPT = ("import sys; from ascend_doctor.registry import Registry, list_plugins; "
          "reg = Registry.discover(); reg.load_plugins(); "
          "print([(p.name, p.loaded, p.error) for p in reg.plugins]); "
          "print(reg.checks.get('thirdparty.hello') and reg.checks['thirdparty.hello'].origin); "
          "print('importlib.metadata' in sys.modules)")


def test_a_declared_plugin_is_found_and_loaded(tmp_path):
    site = _site(tmp_path, f"[console_scripts]\nx = y:z\n\n[{ENTRY_POINT_GROUP}]\n"
                           "hello = thirdparty_checks\n")
    plugins, origin, imported = _run(SCRIPT, site).splitlines()
    assert plugins == "[('hello', True, None)]"
    assert origin == "hello" and imported == "True"


def test_no_declared_plugin_means_no_importlib_metadata(tmp_path):
    site = _site(tmp_path, "[console_scripts]\nthirdparty = thirdparty_checks:main\n")
    plugins, origin, imported = _run(SCRIPT, site).splitlines()
    assert plugins == "[]" and origin == "None" and imported == "False"


def test_the_quick_answer_agrees_with_importlib_metadata_here():
    from importlib.metadata import entry_points

    if not _may_declare_plugins():
        assert list(entry_points(group=ENTRY_POINT_GROUP)) == []


def test_a_zip_on_the_path_defers_to_importlib_metadata(tmp_path, monkeypatch):
    z = tmp_path / "bundle.zip"
    z.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip archive
    monkeypatch.setattr(sys, "path", [str(z)])
    assert _may_declare_plugins() is True
    monkeypatch.setattr(sys, "path", [str(tmp_path / "absent")])
    assert _may_declare_plugins() is False
