"""Messages that a report can render in the reader's language.

A check builds its English message with :func:`T`, which returns a ``str`` (so every
consumer, JSON and the English report keep working unchanged) that also remembers the
template and the arguments. A renderer calls :func:`tr` with the reader's language: the
template is looked up in the message catalog and the arguments are formatted into the
translation. Constant strings (check titles, labels, headers) are marked with :func:`N_`
for extraction and translated with :func:`tr` too.

The catalog follows the gettext conventions (extract → .po → compiled .mo); this module only
defines the message type and the lookup, so that the core and the checks can mark strings
before the catalog exists.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

LANGS = ("en", "zh")


class Msg(str):
    """An English message that keeps its template and arguments for translation."""

    template: str
    args: Mapping[str, Any]

    def __new__(cls, template: str, /, **args: Any) -> "Msg":
        text = template.format(**args) if args else template
        self = super().__new__(cls, text)
        self.template = template
        self.args = args
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # pickles and copies keep the template
        return (_rebuild, (self.template, dict(self.args)))


def _rebuild(template: str, args: dict[str, Any]) -> Msg:
    return Msg(template, **args)


class Joined(Msg):
    """Parts (messages or plain strings) joined by ``sep``, each translated on its own: a
    list of reasons stays translatable without a template per combination."""

    sep: str
    parts: tuple[str, ...]

    def __new__(cls, sep: str, parts: Iterable[str]) -> "Joined":  # type: ignore[override]
        parts = tuple(parts)
        self = str.__new__(cls, sep.join(parts))
        self.template, self.args, self.sep, self.parts = "", {}, sep, parts
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Joined, (self.sep, self.parts))


class Texts(Msg):
    """A text that already exists in each language (a KB entry's ``{en = …, zh = …}``
    title): it renders as English and translates by picking, not by catalog lookup."""

    texts: Mapping[str, str]

    def __new__(cls, texts: Mapping[str, str]) -> "Texts":  # type: ignore[override]
        en = texts.get("en") or next(iter(texts.values()), "")
        self = str.__new__(cls, en)
        self.template, self.args, self.texts = "", {}, dict(texts)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Texts, (dict(self.texts),))


def join(sep: str, parts: Iterable[str]) -> Joined:
    """``sep.join(parts)`` that a report translates part by part."""
    return Joined(sep, parts)


def T(template: str, /, **args: Any) -> Msg:
    """An English message from ``template`` (``str.format`` syntax) and its arguments."""
    return Msg(template, **args)


def N_(text: str) -> str:
    """Mark a constant string for extraction; it is translated where it is rendered."""
    return text


Lookup = Callable[[str], "str | None"]
_lookups: dict[str, Lookup] = {}


def register_catalog(lang: str, lookup: Lookup) -> None:
    """Install the function that maps an English msgid to its ``lang`` translation."""
    _lookups[lang] = lookup


def _lookup(lang: str) -> Lookup | None:
    if lang not in _lookups and lang != "en":
        _load_default_catalog(lang)
    return _lookups.get(lang)


def _load_default_catalog(lang: str) -> None:
    """Load the compiled catalog shipped with the package, if there is one (filled in by
    the catalog module; absent catalogs leave English in place)."""
    try:
        from . import catalog  # noqa: PLC0415 (loaded only when a translation is asked for)
    except ImportError:
        return
    lookup = catalog.load(lang)
    if lookup is not None:
        _lookups[lang] = lookup


def tr(text: str, lang: str | None) -> str:
    """``text`` in ``lang``: a :class:`Msg` is translated by its template (its arguments
    translated too), a plain string by itself; what the catalog lacks stays English."""
    if not lang or lang == "en" or not text:
        return text
    lookup = _lookup(lang)
    if lookup is None:
        return text
    if isinstance(text, Texts):
        return text.texts.get(lang) or str.__str__(text)
    if isinstance(text, Joined):
        return text.sep.join(tr(p, lang) for p in text.parts)
    if isinstance(text, Msg):
        target = lookup(text.template)
        if target is None:
            return str.__str__(text)
        if not text.args:
            return target
        args = {k: (tr(v, lang) if isinstance(v, Msg) else v) for k, v in text.args.items()}
        try:
            return target.format(**args)
        except (KeyError, IndexError, ValueError):  # a broken translation never loses the message
            return str.__str__(text)
    target = lookup(text)
    return text if target is None else target


def tt(lang: str | None, template: str, /, **args: Any) -> str:
    """``T(template, **args)`` rendered in ``lang`` at once (for report and UI strings
    built where the language is known); extracted like ``T``."""
    return tr(Msg(template, **args), lang)


def ntt(lang: str | None, n: int, one: str, many: str, /, **args: Any) -> str:
    """``one`` or ``many`` (English plural by ``n``, which is passed as ``{n}``) in ``lang``;
    languages without plural forms translate both to the same text."""
    return tt(lang, one if n == 1 else many, n=n, **args)
