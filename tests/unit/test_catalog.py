"""The message catalog (issue 14 item 6): gettext conventions, complete zh, shipped, free for en.

The .po is the source of truth and the committed .mo must be what compiling it gives; every
string the sources mark (T, N_, tr, tt, ntt, @check titles) has a zh translation keeping
its {placeholders}.
"""

from __future__ import annotations

import gettext
import io
import subprocess
import sys
from importlib import resources

import pytest

from ascend_doctor import catalog, i18n_tools
from ascend_doctor.i18n import Joined, T, join, ntt, tr, tt

PO = i18n_tools.LOCALE / "zh_CN" / "LC_MESSAGES" / "ascend-doctor.po"


def test_the_committed_mo_is_a_fresh_compile_of_the_po():
    entries = i18n_tools.parse_po(PO.read_text(encoding="utf-8"), str(PO))
    assert PO.with_suffix(".mo").read_bytes() == i18n_tools.compile_mo(entries)


def test_every_extracted_msgid_has_a_zh_translation_with_the_same_placeholders():
    found = i18n_tools.extract()
    assert len(found) > 300  # the report, the check titles, the nine checks' messages
    entries = i18n_tools.parse_po(PO.read_text(encoding="utf-8"))
    for msgid in found:
        e = entries.get(msgid)
        assert e is not None and e.msgstr and not e.fuzzy, f"untranslated: {msgid!r}"
        assert i18n_tools.placeholders(e.msgstr) == i18n_tools.placeholders(msgid), msgid
    assert i18n_tools.problems(found) == []


def test_every_check_title_is_extracted_without_touching_the_check():
    from ascend_doctor.registry import Registry
    found = i18n_tools.extract()
    titles = {s.title for s in Registry.discover().checks.values()}
    assert titles <= set(found), sorted(titles - set(found))


def test_the_extractor_reads_every_marker_and_only_literals():
    src = '''
from ascend_doctor.i18n import N_, T, tr, tt, ntt
@check("a.b", title="A title", category="libs")
def f(x):
    T("one {x}", x=x); N_("two"); tr("three", lang); tt(lang, "four {n}", n=1)
    ntt(lang, 2, "{n} file", "{n} files"); T(x); tr(x, lang); print("not marked")
'''
    got = [m for m, _ in i18n_tools.extract_source(src, "m.py")]
    assert sorted(got) == sorted(["A title", "one {x}", "two", "three", "four {n}",
                                  "{n} file", "{n} files"])


def test_po_round_trip_and_gnutranslations_read_the_compiled_bytes():
    text = ('msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
            '#: a.py:1\nmsgid "say \\"{x}\\"\\n"\nmsgstr "说“{x}”\\n"\n\n'
            '#, fuzzy\nmsgid "fuzzy one"\nmsgstr "模糊"\n\n'
            'msgid "long "\n"line"\nmsgstr ""\n"长行"\n\nmsgid "empty"\nmsgstr ""\n')
    entries = i18n_tools.parse_po(text)
    assert entries['say "{x}"\n'].msgstr == "说“{x}”\n"
    assert entries["long line"].msgstr == "长行"
    mo = i18n_tools.compile_mo(entries)
    assert mo == i18n_tools.compile_mo(i18n_tools.parse_po(text))  # deterministic
    t = gettext.GNUTranslations(io.BytesIO(mo))
    assert t.gettext('say "{x}"\n') == "说“{x}”\n"
    assert t.gettext("long line") == "长行"
    assert t.gettext("fuzzy one") == "fuzzy one"  # fuzzy entries are not compiled, as msgfmt
    assert t.gettext("empty") == "empty"


def test_a_broken_po_line_is_named():
    with pytest.raises(ValueError, match=r"x.po:2"):
        i18n_tools.parse_po('msgid "a"\nnonsense\n', "x.po")


def test_the_mo_ships_inside_the_package():
    mo = resources.files("ascend_doctor").joinpath(catalog.mo_path("zh"))
    assert mo.is_file()
    assert catalog.load("zh") is not None and catalog.load("en") is None
    assert catalog.load("xx") is None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the tomli backport (a dependency there)
        import tomli as tomllib
    from pathlib import Path
    pyproject = tomllib.loads((Path(i18n_tools.PKG).parent / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]["ascend_doctor"]
    assert "locale/*/LC_MESSAGES/*.mo" in data and "locale/*/LC_MESSAGES/*.po" in data


def test_translation_of_messages_lists_and_plurals():
    m = T("{n} conf file(s) read without loops or encoding errors", n=3)
    assert m == "3 conf file(s) read without loops or encoding errors"
    assert tr(m, "zh") == "已读取 3 个配置文件，无循环或编码错误"
    assert tr(m, "en") is m
    j = join("; ", [T("line {n}: {reason}", n=2, reason="bad"), "plain"])
    assert isinstance(j, Joined) and j == "line 2: bad; plain"
    assert tr(j, "zh") == "第 2 行：bad; plain"
    import pickle
    assert tr(pickle.loads(pickle.dumps(j)), "zh") == "第 2 行：bad; plain"
    assert ntt("en", 1, "{n} warning", "{n} warnings") == "1 warning"
    assert ntt("en", 2, "{n} warning", "{n} warnings") == "2 warnings"
    assert ntt("zh", 2, "{n} warning", "{n} warnings") == "2 项警告"
    assert tt("zh", "not in the catalog {x}", x=1) == "not in the catalog 1"


def test_english_never_loads_the_catalog():
    code = ("import sys\nfrom ascend_doctor.i18n import T, tr\n"
            "tr(T('{n} failed', n=1), 'en'); tr('NPU', None)\n"
            "assert 'ascend_doctor.catalog' not in sys.modules, 'catalog loaded'\n"
            "assert 'gettext' not in sys.modules, 'gettext imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_binding_descriptions_and_tooltips_are_extracted():
    src = ('from textual.binding import Binding\n'
           'B = [Binding("q", "quit", "Quit", id="quit", tooltip="Leave the app"),\n'
           '     Binding("x", "x", description="Ex", tooltip=name)]\n')
    assert [m for m, _ in i18n_tools.extract_source(src)] == ["Quit", "Leave the app", "Ex"]


def test_a_bilingual_text_translates_by_picking_and_survives_a_pickle():
    import copy
    import pickle

    from ascend_doctor.i18n import Texts
    title = Texts({"en": "NPU out of memory", "zh": "NPU 显存不足"})
    msg = T("{path}: matches {entry} ({title})", path="/var/log/x.log", entry="E1", title=title)
    assert msg == "/var/log/x.log: matches E1 (NPU out of memory)"  # English as it was
    assert tr(title, "zh") == "NPU 显存不足" and tr(title, "en") == "NPU out of memory"
    back = pickle.loads(pickle.dumps(title))
    assert isinstance(back, Texts) and tr(back, "zh") == "NPU 显存不足"
    assert tr(copy.deepcopy(title), "zh") == "NPU 显存不足"
    assert tr(Texts({"en": "only English"}), "zh") == "only English"


def test_english_fragments_are_messages_of_their_own():
    """A part built outside the template (the "skipped …" clause, "(and 3 more)") is a Msg,
    so the zh report translates it inside the message that carries it."""
    part = T("; skipped {n} of the wrong class/machine ({first})", n=2, first="/x/libacl.so")
    msg = T("{name} needed by {who}: {skipped}", name="libacl.so", who="a.so", skipped=part)
    assert msg == "libacl.so needed by a.so: ; skipped 2 of the wrong class/machine (/x/libacl.so)"
    assert "跳过了 2 个类别/架构不符的文件（/x/libacl.so）" in tr(part, "zh")
