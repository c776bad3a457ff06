"""``check --only X`` imports only the modules X needs (doctor/registry.py ``_SourceIndex``),
and what it imports is enough: every fact the check needs, directly or through providers,
has the same provider as in the full registry."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ascend_doctor.facts import requirements
from ascend_doctor.registry import Registry

FULL = Registry.discover(plugins=False)


def _closure(reg: Registry, func) -> set[type]:
    need, todo = set(), [func]
    while todo:
        for tp, _opt in requirements(todo.pop()).values():
            if tp in need:
                continue
            need.add(tp)
            spec = reg.providers.get(tp)
            if spec is not None:
                todo.append(spec.func)
    return need


@pytest.mark.parametrize("check_id", sorted(FULL.checks))
def test_only_one_check_loads_what_it_needs(check_id):
    lazy = Registry.discover(plugins=False, only=[check_id])
    assert [s.id for s in lazy.select([check_id])] == [s.id for s in FULL.select([check_id])]
    for tp in _closure(FULL, FULL.checks[check_id].func):
        full_spec = FULL.providers.get(tp)
        lazy_spec = lazy.providers.get(tp)
        assert (lazy_spec and lazy_spec.func) is (full_spec and full_spec.func), (check_id, tp)


@pytest.mark.parametrize("words", [["libs"], ["ldconf"], ["service"], ["logs.signatures"]])
def test_tags_and_prefixes_select_as_the_full_registry_does(words):
    lazy = Registry.discover(plugins=False, only=words)
    assert [s.id for s in lazy.select(words)] == [s.id for s in FULL.select(words)]
    assert len(lazy.checks) < len(FULL.checks)


def test_unknown_word_falls_back_to_the_full_registry_and_its_error():
    lazy = Registry.discover(plugins=False, only=["no.such-check"])
    assert set(lazy.checks) == set(FULL.checks)


def test_only_ldconf_does_not_import_the_other_checks():
    code = ("import sys; from ascend_doctor.registry import Registry; "
            "Registry.discover(plugins=False, only=['ldconf']); "
            "print(sorted(m for m in sys.modules if m.startswith(('ascend_doctor.checks.', 'ascend_doctor.probes.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "ascend_doctor.checks.ldconf" in out
    for other in ("ascend_doctor.checks.msprof", "ascend_doctor.checks.dns", "ascend_doctor.checks.block_tables", "ascend_doctor.probes.msprof",
                  "ascend_doctor.probes.dns"):
        assert f"'{other}'" not in out, out


def test_the_source_index_reads_every_check_and_provider():
    """The index (read with regular expressions) knows exactly the checks the imports give."""
    from ascend_doctor.registry import _SourceIndex

    idx = _SourceIndex.build()
    assert idx is not None
    assert sorted(c[0] for c in idx.checks) == sorted(FULL.checks)
    for cid, tags, cat, mod in idx.checks:
        spec = FULL.checks[cid]
        assert (tags, cat, mod) == (spec.tags, spec.category.value, spec.module), cid
    for tp, spec in FULL.providers.items():
        assert spec.func.__module__ in idx.providers.get(tp.__name__, ()), tp


def test_provider_fact_types_are_what_get_type_hints_gives():
    """registry._return_type looks plain names up instead of evaluating every annotation:
    for every built-in provider it must give get_type_hints' answer."""
    import typing

    from ascend_doctor import registry

    reg = registry.Registry.discover(plugins=False)
    assert len(reg.providers) >= 30
    for fact, spec in reg.providers.items():
        assert typing.get_type_hints(spec.func)["return"] is fact


def test_provider_return_annotations_outside_the_fast_path():
    from ascend_doctor import registry

    def a() -> "Registry | None":  # not a plain name: get_type_hints evaluates it
        ...

    def b() -> int:  # not a string
        ...

    def c():  # none at all
        ...

    def d() -> "NotDefinedAnywhere":  # noqa: F821  a plain name that is not in the globals
        ...

    assert registry.provider(a).__ascend_doctor_provider__.fact == (Registry | None)
    assert registry.provider(b).__ascend_doctor_provider__.fact is int
    with pytest.raises(TypeError, match="needs a return annotation"):
        registry.provider(c)
    with pytest.raises(NameError):
        registry.provider(d)
