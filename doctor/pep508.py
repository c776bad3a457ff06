"""PEP 508 requirement strings, read without packaging.requirements / markers / utils.

They pull in packaging.tags through packaging.utils (logging, subprocess, sysconfig,
traceback…): 11–16 ms, the largest import of a demo run. ``parse`` reads the well-formed
subset Requires-Dist lines nearly always use and returns None for anything else (a URL,
``===``, a tab, an unknown or dotted variable, a quote or backslash inside a value…), so the
caller falls back to packaging's Requirement and malformed lines stay packaging's decision.
Within the subset the objects equal packaging 26.4's field by field: name, extras, specifier
(a real SpecifierSet), url, str(), and a marker whose str() and evaluate() follow
packaging.markers — checked against packaging on every real Requires-Dist line and on
generated ones by tests/unit/test_pep508.py.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from packaging import __version__ as _packaging_version
from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet

# The rules mirrored here are packaging 26.4's; string comparisons, extra handling and str()
# have changed between packaging releases, so under any other release every line goes to
# packaging itself (correct, only slower) until the differential test has been rerun there.
VERIFIED_WITH = (26, 4)


def _same_rules(version: str) -> bool:
    try:
        return tuple(int(p) for p in version.split(".")[:2]) == VERIFIED_WITH
    except ValueError:
        return False


ENABLED = _same_rules(_packaging_version)

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
# name [extras] then the specifiers, bare or in legacy parentheses, then "; marker".
# Only spaces count as whitespace here: a tab or any other character declines.
_REQUIREMENT = re.compile(
    rf" *(?P<name>{_NAME}) *"
    rf"(?:\[ *(?P<extras>{_NAME}(?: *, *{_NAME})*) *\] *)?"
    r"(?:\( *(?P<paren>[^()\[\];@]+?) *\) *|(?P<bare>[^()\[\];@]*?) *)"
    r"(?:;(?P<marker>.*))?\Z")
# One comma-separated specifier; no "===" (the version must start with a letter or digit).
_CLAUSE = re.compile(r" *(?:~=|==|!=|<=|>=|<|>) *[A-Za-z0-9][A-Za-z0-9.*+!_-]* *")
_EXTRA_SEP = re.compile(r" *, *")
# Marker tokens. Words are read whole, so "insys_platform" or "android" is one unknown word.
_TOKEN = re.compile(r"""[ ]*(?:
    (?P<paren>[()])
  | "(?P<dq>[^"'\\]*)" | '(?P<sq>[^"'\\]*)'
  | (?P<op>~=|==|!=|<=|>=|<|>|not\ +in\b|in\b)
  | (?P<word>[A-Za-z0-9_]+)
)""", re.VERBOSE)
# PEP 508's marker variables, as written there (no dotted or legacy aliases).
VARIABLES = frozenset({
    "python_version", "python_full_version", "os_name", "sys_platform", "platform_release",
    "platform_system", "platform_version", "platform_machine",
    "platform_python_implementation", "implementation_name", "implementation_version",
    "extra"})
_VERSION_KEYS = frozenset({"implementation_version", "platform_release",
                           "python_full_version", "python_version"})
_MAX_DEPTH = 100  # packaging refuses more than 200 nested parentheses; decline well before
_SEPARATORS = re.compile(r"[-_.]+")


def canonicalize_name(name: str) -> str:
    """PEP 503 normalisation, as packaging.utils.canonicalize_name (without validate)."""
    return _SEPARATORS.sub("-", name).lower()


_DEFAULT_ENV: dict[str, str] | None = None


def default_environment() -> dict[str, str]:
    """packaging.markers.default_environment() for this interpreter (a fresh copy)."""
    global _DEFAULT_ENV
    if _DEFAULT_ENV is None:
        iv = sys.implementation.version
        iver = f"{iv.major}.{iv.minor}.{iv.micro}"
        if iv.releaselevel != "final":
            iver += iv.releaselevel[0] + str(iv.serial)
        _DEFAULT_ENV = {
            "implementation_name": sys.implementation.name,
            "implementation_version": iver,
            "os_name": os.name,
            "platform_machine": platform.machine(),
            "platform_release": platform.release(),
            "platform_system": platform.system(),
            "platform_version": platform.version(),
            "python_full_version": platform.python_version(),
            "platform_python_implementation": platform.python_implementation(),
            "python_version": ".".join(platform.python_version_tuple()[:2]),
            "sys_platform": sys.platform,
        }
    return dict(_DEFAULT_ENV)


class _Decline(Exception):
    """Outside the subset this reader is sure of: packaging decides."""


def _undefined_comparison(message: str) -> Exception:
    # packaging's own class (imported only on this rare path), so callers catch one type
    from packaging.markers import UndefinedComparison
    return UndefinedComparison(message)


def _lookup(environment: Mapping, key: str):
    try:
        return environment[key]
    except KeyError:
        from packaging.markers import UndefinedEnvironmentName
        raise UndefinedEnvironmentName(key) from None


# An item is (lhs, op, rhs); an operand is ("var", name) or ("val", text). A marker is a list
# of items, nested lists (parentheses) and "and"/"or", the shape of packaging's MarkerList.
def _operand(tokens: list, i: int) -> tuple[tuple[str, str], int]:
    if i < len(tokens):
        kind, text = tokens[i]
        if kind == "val" or (kind == "word" and text in VARIABLES):
            return ("val" if kind == "val" else "var", text), i + 1
    raise _Decline


def _atom(tokens: list, i: int, depth: int):
    if i < len(tokens) and tokens[i] == ("paren", "("):
        if depth >= _MAX_DEPTH:
            raise _Decline
        inner, i = _marker(tokens, i + 1, depth + 1)
        if i < len(tokens) and tokens[i] == ("paren", ")"):
            return inner, i + 1
        raise _Decline
    lhs, i = _operand(tokens, i)
    if i >= len(tokens) or tokens[i][0] != "op":
        raise _Decline
    op = tokens[i][1]
    rhs, i = _operand(tokens, i + 1)
    if (lhs[0] == "var") == (rhs[0] == "var"):  # two variables or two literals: odd, decline
        raise _Decline
    # packaging normalises the literal compared with "extra" when it parses (PEP 685)
    if lhs == ("var", "extra"):
        rhs = ("val", canonicalize_name(rhs[1]))
    elif rhs == ("var", "extra"):
        lhs = ("val", canonicalize_name(lhs[1]))
    return (lhs, op, rhs), i


def _marker(tokens: list, i: int, depth: int):
    atom, i = _atom(tokens, i, depth)
    out = [atom]
    while i < len(tokens) and tokens[i][0] == "word" and tokens[i][1] in ("and", "or"):
        out.append(tokens[i][1])
        atom, i = _atom(tokens, i + 1, depth)
        out.append(atom)
    return out, i


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos, end = [], 0, len(text.rstrip(" "))
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _Decline
        kind = m.lastgroup
        if kind in ("dq", "sq"):
            out.append(("val", m[kind]))
        elif kind == "op":
            out.append(("op", "not in" if m[kind].startswith("not") else m[kind]))
        else:
            out.append((kind, m[kind]))
        pos = m.end()
    return out


def _format(marker, first: bool = True) -> str:
    """packaging.markers._format_marker: parentheses only where a nested group needs them."""
    if isinstance(marker, tuple):
        (lkind, lhs), op, (rkind, rhs) = marker
        lhs = lhs if lkind == "var" else f'"{lhs}"'  # values never hold a quote: see _TOKEN
        rhs = rhs if rkind == "var" else f'"{rhs}"'
        return f"{lhs} {op} {rhs}"
    if isinstance(marker, str):
        return marker
    if len(marker) == 1 and isinstance(marker[0], (list, tuple)):
        return _format(marker[0], first)
    inner = " ".join(_format(m, False) for m in marker)
    return inner if first else f"({inner})"


_OPERATORS = {
    "in": lambda lhs, rhs: lhs in rhs,
    "not in": lambda lhs, rhs: lhs not in rhs,
    "<": lambda lhs, rhs: False,
    "<=": lambda lhs, rhs: lhs == rhs,
    "==": lambda lhs, rhs: lhs == rhs,
    "!=": lambda lhs, rhs: lhs != rhs,
    ">=": lambda lhs, rhs: lhs == rhs,
    ">": lambda lhs, rhs: False,
}


def _eval_op(lhs, op: str, rhs, key: str) -> bool:
    # packaging.markers._eval_op: a version variable compares as a PEP 440 specifier when
    # "op rhs" is one; otherwise (and for every other variable) as strings
    if key in _VERSION_KEYS:
        try:
            spec = Specifier(f"{op}{rhs}")
        except InvalidSpecifier:
            pass
        else:
            return spec.contains(lhs, prereleases=True)
    oper = _OPERATORS.get(op)
    if oper is None:
        raise _undefined_comparison(f"Undefined <Op({op!r})> on {lhs!r} and {rhs!r}.")
    return oper(lhs, rhs)


def _eval_extra_set(extras: AbstractSet, op: str, literal: str) -> bool:
    if not extras:
        extras = {""}
    if op == "==":
        return literal in extras
    if op == "!=":
        return literal not in extras
    raise _undefined_comparison(f"Undefined <Op({op!r})> on {extras!r} and {literal!r}.")


def _evaluate(markers: list, env: Mapping) -> bool:
    """packaging.markers._evaluate_markers: every item is evaluated (no short cut), so a
    lookup or comparison error is raised even where the result is already known."""
    groups: list[list[bool]] = [[]]
    for marker in markers:
        if isinstance(marker, list):
            groups[-1].append(_evaluate(marker, env))
        elif isinstance(marker, tuple):
            (lkind, ltext), op, (_, rtext) = marker
            if lkind == "var":
                key = ltext
                lhs, rhs = _lookup(env, key), rtext
            else:
                key = rtext
                lhs, rhs = ltext, _lookup(env, key)
                if key == "extra" and isinstance(rhs, AbstractSet):
                    groups[-1].append(_eval_extra_set(rhs, op, ltext))
                    continue
            if not isinstance(lhs, str):
                if key != "extra":
                    raise _undefined_comparison(
                        f"Set-valued marker {key!r} can only be used with the membership "
                        f'form (e.g. "<name>" in {key}); it cannot appear on the left-hand '
                        f"side of {op!r}.")
                if not isinstance(lhs, AbstractSet):
                    raise _undefined_comparison(f"Marker 'extra' must be a string, not {lhs!r}.")
                groups[-1].append(_eval_extra_set(lhs, op, rtext))
                continue
            if key == "extra" and not isinstance(rhs, str):
                raise _undefined_comparison(f"Marker 'extra' must be a string, not {rhs!r}.")
            groups[-1].append(_eval_op(lhs, op, rhs, key))
        elif marker == "or":
            groups.append([])
    return any(all(item) for item in groups)


def _prepare_extra(extra):
    if not extra:
        return ""
    if isinstance(extra, str):
        return canonicalize_name(extra)
    return frozenset(canonicalize_name(name) for name in extra)


class Marker:
    """The marker of a requirement: str() and evaluate() as packaging.markers.Marker's."""

    __slots__ = ("_markers",)

    def __init__(self, markers: list) -> None:
        self._markers = markers

    def __str__(self) -> str:
        return _format(self._markers)

    def __repr__(self) -> str:
        return f"<Marker({str(self)!r})>"

    def __eq__(self, other: object) -> bool:
        return str(self) == str(other) if isinstance(other, Marker) else NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def evaluate(self, environment: Mapping | None = None, context: str = "metadata") -> bool:
        """Against this interpreter's environment updated with ``environment``; ``extra``
        is "" unless given (context "metadata"), and is normalised (PEP 685)."""
        env: dict = default_environment()
        if context == "lock_file":
            env.update(extras=frozenset(), dependency_groups=frozenset())
        elif context == "metadata":
            env["extra"] = ""
        if environment is not None:
            env.update(environment)
            if "extra" in env:
                env["extra"] = _prepare_extra(env["extra"])
        if env["python_full_version"].endswith("+"):  # a non-tagged build, as packaging
            env["python_full_version"] += "local"
        return _evaluate(self._markers, env)


class Requirement:
    """A parsed requirement with packaging.requirements.Requirement's fields and str()."""

    __slots__ = ("name", "url", "extras", "specifier", "marker")

    def __init__(self, name: str, extras: set[str], specifier: SpecifierSet,
                 marker: Marker | None) -> None:
        self.name = name
        self.url: str | None = None
        self.extras = extras
        self.specifier = specifier
        self.marker = marker

    def __str__(self) -> str:
        parts = [self.name]
        if self.extras:
            parts.append(f"[{','.join(sorted(self.extras))}]")
        if self.specifier:
            parts.append(str(self.specifier))
        if self.marker:
            parts.append(f"; {self.marker}")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"<Requirement({str(self)!r})>"


def parse(text: str) -> Requirement | None:
    """The requirement ``text`` states, or None when it is outside the subset read here
    (then ask packaging.requirements.Requirement, which may also reject it)."""
    if not (ENABLED and text.isascii() and text.isprintable()):
        return None
    m = _REQUIREMENT.match(text)
    if m is None:
        return None
    spec = m["paren"] if m["paren"] is not None else m["bare"]
    if spec:
        if not all(_CLAUSE.fullmatch(c) for c in spec.split(",")):
            return None
        try:
            specifier = SpecifierSet(spec)
        except InvalidSpecifier:
            return None
    else:
        specifier = SpecifierSet()
    marker = None
    if m["marker"] is not None:
        try:
            tokens = _tokens(m["marker"])
            markers, i = _marker(tokens, 0, 0)
        except _Decline:
            return None
        if i != len(tokens):
            return None
        marker = Marker(markers)
    extras = set(_EXTRA_SEP.split(m["extras"])) if m["extras"] else set()
    return Requirement(m["name"], extras, specifier, marker)
