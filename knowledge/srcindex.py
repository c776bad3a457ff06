"""A source index of the installed serving stack: the ``raise X(…)`` and
``logger.error/warning/critical/exception(…)`` sites of vllm, vllm_ascend and torch_npu, as
message templates with their file, function and guarding condition.

Built on the inspected machine from the installed packages' own sources (``ast``, never a
regex over the text), so a log line produced by those versions traces to the code that
printed it even when no knowledge entry knows the message. The index is cached per package
and version in the invoking user's cache (doctor/usercache.py: refused when the directory or
file is not the user's); nothing of it ships with the doctor. Without the installed packages
(a bundle, a pasted log) there is no index, and answers say so.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

PACKAGES = ("vllm", "vllm_ascend", "torch_npu")
FORMAT = 1
MAX_FILE = 2 << 20  # bytes of one source file read
MAX_FILES = 6000  # per package: far above vllm's ~2 000
MIN_LITERAL = 12  # a template with less fixed text than this matches too much to trace by
_LOG_METHODS = {"error", "warning", "warn", "critical", "exception", "fatal", "error_once",
                "warning_once"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_STALE = re.compile(r"srcindex-[\w.+-]+\.json")
HOLE = "\x00"  # a placeholder inside a template (never in a source string literal we keep)


@dataclass(frozen=True)
class Site:
    """One raise or log call: the template, where it is and under which condition."""

    package: str
    version: str
    file: str  # relative to the site directory
    line: int
    function: str  # qualified: Class.method
    kind: str  # "raise ValueError" | "logger.error"
    template: str  # literal text with HOLE for each placeholder
    guard: str = ""  # the innermost enclosing `if` test, as source

    def shown(self) -> str:
        """The template as people read it: placeholders as ``{…}``."""
        return self.template.replace(HOLE, "{…}")

    def to_dict(self) -> dict[str, object]:
        return {"package": self.package, "version": self.version, "file": self.file,
                "line": self.line, "function": self.function, "kind": self.kind,
                "template": self.shown(), "guard": self.guard}


# ---- templates from expressions ----------------------------------------------------------

def template_of(node: ast.AST | None) -> str | None:
    """The message a string expression builds, placeholders as HOLE; None when the
    expression is not built from string literals (a variable, a call)."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace(HOLE, "")
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.append(v.value)
            else:
                out.append(HOLE)
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template_of(node.left), template_of(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else HOLE) + (right if right is not None else HOLE)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = template_of(node.left)
        return _printf(left) if left is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "format":
        base = template_of(node.func.value)
        return _braces(base) if base is not None else None
    return None


_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa%]")
_BRACES = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


def _printf(s: str) -> str:
    return _PRINTF.sub(lambda m: "%" if m.group() == "%%" else HOLE, s)


def _braces(s: str) -> str:
    return _BRACES.sub(lambda m: {"{{": "{", "}}": "}"}.get(m.group(), HOLE), s)


def _logger_call(node: ast.Call) -> str | None:
    """``logger.error(...)``-like calls: the method name, else None."""
    f = node.func
    if not isinstance(f, ast.Attribute) or f.attr not in _LOG_METHODS:
        return None
    base = f.value
    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    return f.attr if "log" in name.lower() else None


def _exc_name(node: ast.AST) -> str:
    f = node.func if isinstance(node, ast.Call) else node
    if isinstance(f, ast.Attribute):
        return f.attr
    return getattr(f, "id", "?")


class _Walker(ast.NodeVisitor):
    def __init__(self, package: str, version: str, rel: str) -> None:
        self.package, self.version, self.rel = package, version, rel
        self.scope: list[str] = []
        self.guards: list[str] = []
        self.sites: list[Site] = []

    def _add(self, kind: str, tpl: str | None, line: int) -> None:
        if tpl is None or len(tpl.replace(HOLE, "").strip()) < MIN_LITERAL:
            return
        self.sites.append(Site(self.package, self.version, self.rel, line,
                               ".".join(self.scope) or "<module>", kind, tpl[:2000],
                               self.guards[-1][:300] if self.guards else ""))

    def _scoped(self, node: ast.AST, name: str) -> None:
        self.scope.append(name)
        guards, self.guards = self.guards, []
        self.generic_visit(node)
        self.guards = guards
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node, node.name)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        try:
            test = ast.unparse(node.test)
        except Exception:  # pragma: no cover - unparse of a valid tree
            test = "?"
        self.guards.append(test)
        for n in node.body:
            self.visit(n)
        self.guards[-1] = f"not ({test})"
        for n in node.orelse:
            self.visit(n)
        self.guards.pop()

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            self._add(f"raise {_exc_name(exc)}", template_of(exc.args[0]), node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        method = _logger_call(node)
        if method and node.args:
            tpl = template_of(node.args[0])
            if tpl is not None and len(node.args) > 1:  # logging's own %-formatting
                tpl = _printf(tpl)
            self._add(f"logger.{method}", tpl, node.lineno)
        self.generic_visit(node)


def sites_of_source(source: str | bytes, package: str, version: str, rel: str) -> list[Site]:
    """The raise and log sites of one module's source (a syntax error: none)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    w = _Walker(package, version, rel)
    w.visit(tree)
    return w.sites


# ---- the index -------------------------------------------------------------------------

class SourceIndex:
    """Templates of the installed stack, searchable by a log line."""

    def __init__(self, sites: Sequence[Site], packages: dict[str, str]) -> None:
        self.sites = list(sites)
        self.packages = dict(packages)  # package -> version indexed
        self._rx: dict[int, "re.Pattern[str]"] = {}
        self.by_word: dict[str, list[int]] = {}
        counts: dict[str, int] = {}
        words = []
        for s in self.sites:
            ws = set(_WORD.findall(s.template.replace(HOLE, " ")))
            words.append(ws)
            for w in ws:
                counts[w] = counts.get(w, 0) + 1
        for i, ws in enumerate(words):
            if ws:  # the rarest word of the template is its key
                self.by_word.setdefault(min(ws, key=lambda w: (counts[w], -len(w), w)),
                                        []).append(i)

    def _regex(self, i: int) -> "re.Pattern[str]":
        rx = self._rx.get(i)
        if rx is None:
            parts = self.sites[i].template.split(HOLE)
            body = "(.*?)".join(re.escape(p) for p in parts)
            rx = self._rx[i] = re.compile(body, re.DOTALL)
        return rx

    def trace(self, line: str) -> "tuple[Site, float] | None":
        """The site whose template explains most of ``line``, with the share of the line's
        text its fixed parts cover (0–1); None when no template fits."""
        best: tuple[Site, float] | None = None
        best_len = 0
        text = line.strip()
        for w in set(_WORD.findall(text)):
            for i in self.by_word.get(w, ()):
                m = self._regex(i).search(text)
                if not m:
                    continue
                fixed = len(self.sites[i].template.replace(HOLE, ""))
                if fixed > best_len:
                    best_len = fixed
                    best = (self.sites[i], min(fixed / max(len(text), 1), 1.0))
        return best

    def to_json(self) -> bytes:
        return json.dumps({"format": FORMAT, "packages": self.packages,
                           "sites": [[s.package, s.version, s.file, s.line, s.function, s.kind,
                                      s.template, s.guard] for s in self.sites]},
                          ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> "SourceIndex | None":
        try:
            doc = json.loads(raw)
            if doc.get("format") != FORMAT:
                return None
            return cls([Site(*row) for row in doc["sites"]], doc["packages"])
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def build_package(package: str, version: str, files: Iterable[tuple[str, bytes]]) -> list[Site]:
    """Sites of one package from (path relative to the site dir, source bytes)."""
    out: list[Site] = []
    for rel, raw in files:
        out.extend(sites_of_source(raw, package, version, rel))
    return out


def load_or_build(package: str, version: str, location: str,
                  files: Callable[[], Iterator[tuple[str, bytes]]]) -> list[Site]:
    """The sites of ``package`` ``version`` from the user cache, or built from ``files``
    (then cached). The key includes the location: two venvs with the same version built
    from different trees are two entries."""
    import hashlib

    from ascend_doctor.usercache import enabled, read_private, write_private

    key = hashlib.sha256(f"{FORMAT}\0{package}\0{version}\0{location}".encode()).hexdigest()[:16]
    safe = re.sub(r"[^\w.+-]", "_", version)
    name = f"srcindex-{package}-{safe}-{key}.json"
    if enabled():
        raw = read_private(name, limit=64 << 20)
        if raw is not None:
            cached = SourceIndex.from_json(raw)
            if cached is not None:
                return cached.sites
    sites = build_package(package, version, files())
    if enabled():
        write_private(name, SourceIndex(sites, {package: version}).to_json())
    return sites
