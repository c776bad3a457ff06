"""A source index of the installed serving stack: the ``raise X(…)`` and
``logger.error/warning/critical/exception(…)`` sites of vllm, vllm_ascend, torch_npu and the
libraries their failures come through (torch, transformers, huggingface_hub), as message
templates with their file, function and guarding condition; and the message strings of their
native libraries (``.rodata`` of the package's ``.so`` files: printf/fmt format strings and the
literal pieces ``TORCH_CHECK`` joins), as templates with the library file.

Templates follow the message through the code: f-strings, ``%``-format (also logging's own
arguments), ``.format``, concatenation, a message first assigned to a name (``msg = f"…";
raise ValueError(msg)``, module and class constants), an exception class whose ``__init__``
passes a fixed message to ``super().__init__``; a multi-line message is matched line by line,
and a line cut short by a paste matches the template's beginning.

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

PACKAGES = ("vllm", "vllm_ascend", "torch_npu", "torch", "transformers", "huggingface_hub")
FORMAT = 5
MAX_FILE = 2 << 20  # bytes of one source file read
MAX_FILES = 6000  # per package: far above vllm's ~2 000
MIN_LITERAL = 12  # a template with less fixed text than this matches too much to trace by
MIN_NATIVE = 20  # a native string: shorter ones are too common ("out of memory")
MIN_PREFIX = 24  # a line cut short matches a template's beginning of at least this much text
MAX_NATIVE = 60000  # strings kept from one library's .rodata
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
    # "raise ValueError" | "logger.error" | "assert" | "error response" | "errs.append" |
    # "warnings.warn" | "native"
    kind: str
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

def template_of(node: ast.AST | None,
                names: "Callable[[str], str | None] | None" = None) -> str | None:
    """The message a string expression builds, placeholders as HOLE; None when the
    expression is not built from string literals (a variable, a call). ``names`` resolves a
    name to the template last assigned to it (a local ``msg``, a module constant)."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace(HOLE, "")
    if isinstance(node, ast.Name) and names is not None:
        return names(node.id)
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.append(v.value)
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) \
                    and v.conversion == -1 and v.format_spec is None and names is not None:
                # a message built before and extended at the raise: f"{msg} To allow …"
                known = names(v.value.id)
                out.append(known if known is not None else HOLE)
            else:
                out.append(HOLE)
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template_of(node.left, names), template_of(node.right, names)
        if left is None and right is None:
            return None
        return (left if left is not None else HOLE) + (right if right is not None else HOLE)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = template_of(node.left, names)
        return _printf(left) if left is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "format":
        base = template_of(node.func.value, names)
        return _braces(base) if base is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("strip", "rstrip", "lstrip") and not node.args:
        return template_of(node.func.value, names)
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
        # name -> template assigned, one dict per scope (module, class, function)
        self.names: list[dict[str, str]] = [{}]
        self.classes: list[str] = []

    def _lookup(self, name: str) -> str | None:
        for d in reversed(self.names):
            if name in d:
                return d[name]
        return None

    def _tpl(self, node: ast.AST | None) -> str | None:
        return template_of(node, self._lookup)

    def _add(self, kind: str, tpl: str | None, line: int) -> None:
        if tpl is None or len(tpl.replace(HOLE, "").strip()) < MIN_LITERAL:
            return
        self.sites.append(Site(self.package, self.version, self.rel, line,
                               ".".join(self.scope) or "<module>", kind, tpl[:2000],
                               self.guards[-1][:300] if self.guards else ""))

    def _scoped(self, node: ast.AST, name: str) -> None:
        self.scope.append(name)
        self.names.append({})
        guards, self.guards = self.guards, []
        self.generic_visit(node)
        self.guards = guards
        self.names.pop()
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self._scoped(node, node.name)
        self.classes.pop()

    def _assign(self, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name) and value is not None:
            tpl = self._tpl(value)
            if tpl is not None:
                self.names[-1][target.id] = tpl
            else:
                self.names[-1].pop(target.id, None)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if len(node.targets) == 1:
            self._assign(node.targets[0], node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        self._assign(node.target, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            old = self._lookup(node.target.id)
            add = self._tpl(node.value)
            if old is not None:
                self.names[-1][node.target.id] = old + (add if add is not None else HOLE)

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
        if isinstance(exc, ast.Call):
            arg = exc.args[0] if exc.args else next(
                (k.value for k in exc.keywords if k.arg in ("msg", "message", "detail")), None)
            if arg is not None:
                self._add(f"raise {_exc_name(exc)}", self._tpl(arg), node.lineno)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        # ``assert cond, "message"``: printed as "AssertionError: message"
        if node.msg is not None:
            self._add("assert", self._tpl(node.msg), node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        method = _logger_call(node)
        if method and node.args:
            tpl = self._tpl(node.args[0])
            if tpl is not None and len(node.args) > 1:  # logging's own %-formatting
                tpl = _printf(tpl)
            self._add(f"logger.{method}", tpl, node.lineno)
        elif node.args and _error_response(node):
            # a server's error answer to its client (vLLM's ``create_error_response(msg)``):
            # the client prints it ("Error code: 400 - {'message': …}")
            self._add("error response", self._tpl(node.args[0]), node.lineno)
        elif node.args and _collected(node):
            # an error message gathered into a list and raised or logged later
            # (``error_msgs.append(f"While copying the parameter named …")``), or a warning
            self._add(_collected(node), self._tpl(node.args[0]), node.lineno)
        elif node.args and self.classes and self.scope and self.scope[-1] == "__init__" \
                and _is_super_init(node):
            # an exception class's own message: ``super().__init__(MESSAGE, …)``
            self._add(f"raise {self.classes[-1]}", self._tpl(node.args[0]), node.lineno)
        self.generic_visit(node)


def _collected(node: ast.Call) -> str:
    """``errors.append(…)`` on a list named for errors or messages, ``warnings.warn(…)``:
    the kind of site, else ""."""
    f = node.func
    if not isinstance(f, ast.Attribute):
        return ""
    base = f.value.attr if isinstance(f.value, ast.Attribute) else getattr(f.value, "id", "")
    if f.attr == "append" and re.search(r"err|msg|message|problem|reason", base, re.I):
        return f"{base}.append"
    if f.attr == "warn" and base == "warnings":
        return "warnings.warn"
    return ""


def _error_response(node: ast.Call) -> bool:
    """``self.create_error_response(…)``-like calls: a function named for an error response."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    return name.endswith("error_response")


def _is_super_init(node: ast.Call) -> bool:
    f = node.func
    if not isinstance(f, ast.Attribute) or f.attr != "__init__":
        return False
    base = f.value
    return (isinstance(base, ast.Call) and getattr(base.func, "id", "") == "super") \
        or (isinstance(base, ast.Name) and base.id.endswith(("Error", "Exception")))


def sites_of_source(source: str | bytes, package: str, version: str, rel: str) -> list[Site]:
    """The raise and log sites of one module's source (a syntax error: none)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    w = _Walker(package, version, rel)
    # module constants first: a function may use one assigned further down the file
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            w._assign(stmt.targets[0], stmt.value)
    w.visit(tree)
    return w.sites


# ---- native libraries ------------------------------------------------------------------

_NATIVE = re.compile(rb"[\x20-\x7e]{%d,500}" % MIN_NATIVE)
_NATIVE_FMT = re.compile(r"%(?:\d+\$)?[-#0 +']*(?:\*|\d+)?(?:\.(?:\*|\d+))?"
                         r"(?:hh|h|ll|l|L|q|j|z|Z|t)?[diouxXeEfFgGaAcspn%]|\{[^{}]{0,20}\}")
_LETTERS = re.compile(r"[A-Za-z]{3,}")


def native_strings(rodata: bytes, package: str, version: str, rel: str) -> list[Site]:
    """Message-like strings of a native library's read-only data: printf/fmt placeholders as
    HOLE. Only text with at least three words of letters and MIN_NATIVE characters is kept
    (symbol names, paths and tables are not messages)."""
    out: list[Site] = []
    seen: set[str] = set()
    for m in _NATIVE.finditer(rodata):
        text = m.group().decode("ascii")
        if " " not in text.strip() or len(_LETTERS.findall(text)) < 3 or text in seen:
            continue
        seen.add(text)
        tpl = _NATIVE_FMT.sub(lambda f: "%" if f.group() == "%%" else HOLE, text)
        if len(tpl.replace(HOLE, "").strip()) < MIN_NATIVE:
            continue
        out.append(Site(package, version, rel, 0, "", "native", tpl))
        if len(out) >= MAX_NATIVE:
            break
    return out


# ---- the index -------------------------------------------------------------------------

# what a logger or a launcher puts before the message: vLLM's "(EngineCore_DP0 pid=4) ERROR
# 11-20 03:06:02 [core.py:711] ", its older "ERROR 06-20 23:20:13 engine.py:400] ",
# torchrun's "[rank0]: ", a Python logging "2025-01-01 10:00:00,123 - name - ERROR - "
_LOG_PREFIX = re.compile(
    r"^(?:\[rank\d+\]:\s*)?(?:\([\w.-]+ pid=\d+\)\s*)?"
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|FATAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"\[?[\w.-]+\.py:\d+\]\s*|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.\d]*\s+-\s+[\w.]+\s+-\s+"
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+-\s+)?")
NATIVE_SHARE = 0.5  # a native string explains a line only when it is most of the message


def _head_fits(parts: Sequence[str], text: str) -> int | None:
    """A paste cut short: the longest beginning of the template (whole parts up to a hole,
    at least MIN_PREFIX of fixed text) that ``text`` holds, the line ending after it."""
    for k in range(len(parts) - 1, 0, -1):
        head = parts[:k]
        if len("".join(head)) < MIN_PREFIX:
            return None
        fixed = _fits(head, text)
        if fixed is not None:
            return fixed
    return None


def _fits(parts: Sequence[str], text: str) -> int | None:
    """The fixed text of a template's parts when they occur in ``text`` in order (a hole
    between them takes anything), else None. Leftmost matching decides existence, in linear
    time: no regex, so no backtracking on a template of many holes."""
    pos = 0
    for p in parts:
        if not p:
            continue
        at = text.find(p, pos)
        if at < 0:
            return None
        pos = at + len(p)
    return sum(len(p) for p in parts)


class SourceIndex:
    """Templates of the installed stack, searchable by a log line.

    Each template is cut into the lines of the message it prints (a log line holds one); each
    piece with enough fixed text is keyed by its rarest word. A line is explained by the piece
    whose fixed text it holds most of: the whole piece, or (a paste cut short) the piece's
    beginning up to where the line ends."""

    def __init__(self, sites: Sequence[Site], packages: dict[str, str]) -> None:
        self.sites = list(sites)
        self.packages = dict(packages)  # package -> version indexed
        self._split: dict[int, list[str]] = {}
        self.pieces: list[tuple[int, str]] = []  # (site, one line of its template)
        self.by_word: dict[str, list[int]] = {}
        counts: dict[str, int] = {}
        words = []
        for i, s in enumerate(self.sites):
            least = MIN_NATIVE if s.kind == "native" else MIN_LITERAL
            for piece in s.template.split("\n"):
                if len(piece.replace(HOLE, "").strip()) < least:
                    continue
                self.pieces.append((i, piece))
                ws = set(_WORD.findall(piece.replace(HOLE, " ")))
                words.append(ws)
                for w in ws:
                    counts[w] = counts.get(w, 0) + 1
        rank = lambda w: (counts[w], -len(w), w)  # noqa: E731
        for j, ws in enumerate(words):
            if not ws:
                continue
            # keyed by the rarest word of the piece, and by the rarest of its first words (a
            # paste cut short keeps the beginning only)
            keys = {min(ws, key=rank)}
            first = next((p for p in self.pieces[j][1].split(HOLE) if _WORD.search(p)), "")
            head = set(_WORD.findall(first)) & ws
            if head:
                keys.add(min(head, key=rank))
            for k in keys:
                self.by_word.setdefault(k, []).append(j)

    def _parts(self, j: int) -> list[str]:
        parts = self._split.get(j)
        if parts is None:
            parts = self._split[j] = [p for p in self.pieces[j][1].strip().split(HOLE)]
        return parts

    def trace(self, line: str) -> "tuple[Site, float] | None":
        """The site whose template explains most of ``line``, with the share of the line's
        text its fixed parts cover (0–1); None when no template fits. A Python site wins over
        a native string of the same length (it names a function)."""
        best: tuple[Site, float] | None = None
        best_key = (0, 0)
        text = _LOG_PREFIX.sub("", line.strip(), count=1)
        seen: set[int] = set()
        for w in set(_WORD.findall(text)):
            for j in self.by_word.get(w, ()):
                if j in seen:
                    continue
                seen.add(j)
                site = self.sites[self.pieces[j][0]]
                parts = self._parts(j)
                fixed = _fits(parts, text)
                if fixed is None and len(parts) > 1:
                    fixed = _head_fits(parts, text)
                if fixed is None:
                    continue
                if site.kind == "native" and fixed < NATIVE_SHARE * len(text):
                    continue  # a common phrase of a library inside a longer message
                key = (fixed, 0 if site.kind == "native" else 1)
                if key > best_key:
                    best_key = key
                    best = (site, min(fixed / max(len(text), 1), 1.0))
        return best

    def to_json(self) -> bytes:
        return json.dumps({"format": FORMAT, "packages": self.packages,
                           "sites": [[s.package, s.version, s.file, s.line, s.function, s.kind,
                                      s.template, s.guard] for s in self.sites]},
                          ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> "SourceIndex | None":
        sites = sites_from_json(raw)
        if sites is None:
            return None
        return cls(sites, json.loads(raw)["packages"])


def sites_from_json(raw: bytes) -> "list[Site] | None":
    """The sites of a cached index (None: another format, or not an index), without building
    its word keys (index_local joins the packages' sites into one index and keys that once)."""
    try:
        doc = json.loads(raw)
        if doc.get("format") != FORMAT:
            return None
        return [Site(*row) for row in doc["sites"]]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def build_package(package: str, version: str, files: Iterable[tuple[str, bytes]]) -> list[Site]:
    """Sites of one package from (path relative to the site dir, source bytes)."""
    out: list[Site] = []
    for rel, raw in files:
        out.extend(sites_of_source(raw, package, version, rel))
    return out


def load_or_build(package: str, version: str, location: str,
                  files: Callable[[], Iterator[tuple[str, bytes]]],
                  natives: "Callable[[], Iterator[tuple[str, bytes]]] | None" = None
                  ) -> list[Site]:
    """The sites of ``package`` ``version`` from the user cache, or built from ``files``
    (then cached); ``natives`` gives (library path, its .rodata) for the native strings. The
    key includes the location: two venvs with the same version built from different trees
    are two entries."""
    import hashlib

    from ascend_doctor.usercache import enabled, read_private, write_private

    key = hashlib.sha256(f"{FORMAT}\0{package}\0{version}\0{location}\0{natives is not None}"
                         .encode()).hexdigest()[:16]
    safe = re.sub(r"[^\w.+-]", "_", version)
    name = f"srcindex-{package}-{safe}-{key}.json"
    if enabled():
        raw = read_private(name, limit=256 << 20)
        if raw is not None:
            cached = sites_from_json(raw)
            if cached is not None:
                return cached
    sites = build_package(package, version, files())
    for rel, rodata in natives() if natives is not None else ():
        sites.extend(native_strings(rodata, package, version, rel))
    if enabled():
        write_private(name, SourceIndex(sites, {package: version}).to_json())
    return sites
