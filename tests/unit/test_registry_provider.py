"""The registry's provider lookup: each fact type a provider returns is the one its
annotation names."""

from __future__ import annotations

import pytest

from ascend_doctor.registry import Registry

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
