"""The shipped message catalogs: ``locale/<locale>/LC_MESSAGES/ascend-doctor.mo``, read with
the standard library's :class:`gettext.GNUTranslations`.

Loaded only when a language other than English is asked for (:func:`ascend_doctor.i18n.tr`
never calls this for ``en``), once per language. The ``.po`` next to each ``.mo`` is the
source of truth; ``python -m ascend_doctor.i18n_tools compile`` rebuilds the ``.mo``.
"""

from __future__ import annotations

import functools
import gettext
from importlib import resources
from typing import Callable

DOMAIN = "ascend-doctor"
# the doctor's language codes -> gettext locale directories
LOCALES = {"zh": "zh_CN"}


def mo_path(lang: str) -> str:
    """Where the compiled catalog of ``lang`` lives inside the package (relative)."""
    return f"locale/{LOCALES.get(lang, lang)}/LC_MESSAGES/{DOMAIN}.mo"


@functools.lru_cache(maxsize=None)
def load(lang: str) -> Callable[[str], "str | None"] | None:
    """A lookup English msgid -> translation for ``lang`` (None for a msgid the catalog
    lacks), or None when no catalog ships for ``lang``."""
    if lang == "en":
        return None
    res = resources.files("ascend_doctor").joinpath(mo_path(lang))
    try:
        with res.open("rb") as fh:
            trans = gettext.GNUTranslations(fh)
    except (FileNotFoundError, OSError):
        return None

    def lookup(msgid: str) -> str | None:
        text = trans.gettext(msgid)
        return text if text is not msgid and text else None

    return lookup
