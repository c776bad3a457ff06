"""The schema of a knowledge file, as a function: a list of problems (empty = valid).

Kept out of the test so that `ascend-doctor kb lint` and CI run the same rules on the
shipped files and on a contributor's new file.
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import Any, Iterable, Mapping, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ascend_doctor.i18n import T

from . import LANGS, LIST_KEYS, VERSION_KEYS, _canon_spec

ID_RX = re.compile(r"^ASC-[A-Z]+-\d{3}$")
REQUIRED = ("id", "title", "cause", "steps", "sources")
KNOWN = {"id", "title", "cause", "steps", "signatures", "aliases", "checks", "fix",
         "applies_to", "advice", "sources", "severity", "message", "description", "generic",
         # optional fields from ascend-fd's schema (anchors §10.6), accepted for the future
         "links", "explains", "category", "since", "deprecated", "cause_above", "examples",
         # real log lines that look like the failure but are not it (issue 15)
         "near_misses",
         # the root-cause keys (tests/corpus/threads/CAUSES.md) the entry's first step fixes
         "causes",
         # the package whose defect the entry answers, from a traceback's frames (owner.py)
         "owner",
         # the packages a traceback's frames must show for the entry to apply (decide.py)
         "raised_in",
         # without such a frame (a bare line) the signature alone does not decide the cause
         "needs_frames"}
SEVERITIES = {"none", "low", "medium", "high", "critical"}
# a source a reader can open: a public URL, or a named public document / man page
SOURCE_PREFIXES = ("https://", "doc:", "man:")
# what makes a command unsafe to paste: a placeholder, an elision, a prompt, smart quotes
PLACEHOLDER = re.compile(r"<[A-Za-z][\w .:/|-]*>")
SMART_QUOTES = re.compile("[\u2018\u2019\u201c\u201d]")
# recipes whose other --param keys are vLLM flags (fixes/service.py launch_flags)
FREE_PARAM_RECIPES = {"service.launch-flags"}
# advice that depends on the value in use must not name a literal (never "lower" to 0.9 from 0.6)
VALUE_DEPENDENT_PARAMS = {"gpu-memory-utilization", "gpu_memory_utilization"}
# in an entry triage shows (it has signatures) the value in use is unknown: a fixed number for
# these flags may raise what should be lowered (--max-model-len 32768 for a user at 8192)
SIZE_FLAGS = {"max-num-seqs", "max-model-len", "max-num-batched-tokens",
              *VALUE_DEPENDENT_PARAMS}


def command_problems(cmd: str, where: str,
                     fix_params: Mapping[str, Sequence[str]] | None = None,
                     triaged: bool = False) -> list[str]:
    """Why ``cmd`` cannot be pasted as is: a placeholder or elision, a shell prompt, smart or
    unbalanced quotes, a trailing backslash; an ``ascend-doctor fix`` with an unknown recipe
    or parameter, or a literal value for a parameter that depends on the value in use."""
    out = []
    if re.search(r"/(?:PID|NPU|CHIP|NODE|USER|VERSION)\b", cmd):
        out.append(T("{where}: an upper-case placeholder in a path is not paste-safe", where=where))
    if PLACEHOLDER.search(cmd):
        out.append(T("{where}: placeholder {ph} is not paste-safe", where=where,
                      ph=repr(PLACEHOLDER.search(cmd).group(0))))
    if "..." in cmd or "\u2026" in cmd:
        out.append(T("{where}: an elision ('...') is not paste-safe", where=where))
    if SMART_QUOTES.search(cmd):
        out.append(T("{where}: smart quotes are not paste-safe", where=where))
    if re.match(r"\s*[$#>] ", cmd):
        out.append(T("{where}: starts with a shell prompt", where=where))
    if cmd.rstrip().endswith("\\"):
        out.append(T("{where}: ends with a line continuation", where=where))
    try:
        words = shlex.split(cmd)
    except ValueError as exc:
        return out + [T("{where}: does not split as a shell command ({reason})", where=where,
                         reason=str(exc))]
    if words and words[0].startswith("-"):
        # a launch flag (--enforce-eager) is not a command: say where it goes, in the text
        out.append(T("{where}: starts with the option {word}, not a program: a launch flag "
                     "belongs in the step's text, saying where it goes", where=where,
                     word=words[0]))
    for i, w in enumerate(words):
        if w == "--param" and i + 1 < len(words) or w.startswith("--param="):
            kv = w.split("=", 1)[1] if w.startswith("--param=") else words[i + 1]
            key = kv.split("=", 1)[0]
            if key in VALUE_DEPENDENT_PARAMS or triaged and key.replace("_", "-") in SIZE_FLAGS:
                out.append(T("{where}: --param {key}= names a fixed value; say how to derive it "
                             "from the value in use instead", where=where, key=key))
        flag = w[2:].split("=", 1)[0].replace("_", "-") if w.startswith("--") else ""
        if triaged and flag in SIZE_FLAGS and ("=" in w or i + 1 < len(words)
                                                and re.fullmatch(r"[\d.]+", words[i + 1])):
            out.append(T("{where}: {flag} with a fixed number in an entry triage shows; say how "
                         "to derive it from the value in use instead", where=where,
                         flag=w.split("=")[0]))
    if words[:2] == ["ascend-doctor", "fix"]:  # the recipe reads --param KEY=VALUE only
        for i, w in enumerate(words):
            kv = words[i + 1] if w == "--param" and i + 1 < len(words) else (
                w.split("=", 1)[1] if w.startswith("--param=") else None)
            if w == "--param" and i + 1 == len(words):
                out.append(T("{where}: --param without KEY=VALUE", where=where))
            elif kv is not None and not re.fullmatch(r"[\w.-]+=\S.*", kv):
                out.append(T("{where}: --param {kv} is not KEY=VALUE", where=where, kv=repr(kv)))
    if fix_params is not None and words[:2] == ["ascend-doctor", "fix"]:
        recipe = words[2] if len(words) > 2 else ""
        if recipe not in fix_params:
            out.append(T("{where}: unknown fix recipe {recipe}", where=where, recipe=repr(recipe)))
        elif recipe not in FREE_PARAM_RECIPES:
            for i, w in enumerate(words):
                if w == "--param" and i + 1 < len(words):
                    key = words[i + 1].split("=", 1)[0]
                    if key not in fix_params[recipe]:
                        out.append(T("{where}: {recipe} has no parameter {key} (it takes {takes})",
                                     where=where, recipe=recipe, key=repr(key),
                                     takes=", ".join(fix_params[recipe]) or T("none")))
    return out


def signature_words(rx: str) -> set[str]:
    """The literal words (4+ characters, lower case) a signature spells out, without group
    names and escapes: what a near-miss line shares with it."""
    rx = re.sub(r"\(\?P<\w+>", "(", rx)
    rx = re.sub(r"\\[A-Za-z]", " ", rx)
    return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_]{3,}", rx)}


def near_miss(rx: str, lines: Iterable[str]) -> str | None:
    """A line that shares a word with the signature ``rx`` but is not matched by it: the
    proof from a real log that the signature is not just its most common word."""
    try:
        c = re.compile(rx, re.IGNORECASE | re.MULTILINE)
    except (re.error, TypeError):
        return None
    words = signature_words(rx)
    return next((ln for ln in lines if any(w in ln.lower() for w in words)
                 and not c.search(ln)), None)


def _bilingual(value: Any, where: str, prose: bool = False) -> list[str]:
    if not isinstance(value, Mapping):
        return [T("{where}: must be a table {{en = …, zh = …}}", where=where)]
    out = []
    for lang in LANGS:
        text = value.get(lang)
        if not isinstance(text, str) or not text.strip():
            out.append(T("{where}: missing the {lang} text", where=where, lang=lang))
    if prose and "zh" in value and isinstance(value["zh"], str) and value["zh"].strip() and not re.search(
            r"[\u4e00-\u9fff]", value["zh"]):
        out.append(T("{where}: the zh text has no Chinese characters", where=where))
    return out


# settings that answer different failures: an entry about one must not set the other
EXCLUSIVE_ENV = (("HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT"),)
_CONNECT_PHASE = re.compile(r"\bEI0006\b|connect(?:ion|ing)? (?:phase|timeout)|socket timeout while",
                            re.IGNORECASE)
_EXEC_PHASE = re.compile(r"\bEI0002\b|notify wait|watchdog|collective operation timeout|"
                         r"exec(?:ution)? timeout", re.IGNORECASE)
_BF16_NEEDED = re.compile(r"(?:need|require)s? (?:bf16|bfloat16)|(?:bf16|bfloat16)[- ]only|"
                          r"only (?:bf16|bfloat16)", re.IGNORECASE)
_FP16_STEP = re.compile(r"--dtype[= ](?:float16|half|fp16)\b", re.IGNORECASE)
_LOWER_TO = re.compile(r"\b(?:lower|reduce|decrease)\b[^.;:]*?\b(?:to|below)\s+(\d+(?:\.\d+)?)\b",
                       re.IGNORECASE)
# the driver's own libraries: no set_env.sh brings them (a container must mount the driver)
_DRIVER_LIB = re.compile(r"\blib(?:c_sec|dcmi|ascend_hal|drvdsmi_host|ascend_dmi)\b|\bDCMI\b")
_TOOLKIT_LIB = re.compile(r"\blib(?:ascendcl|hccl|opapi|ge_runner|graph|runtime|atb|nnopbase)\b")
_SOURCES_SET_ENV = re.compile(r"(?:^|[;&|]\s*|\s)(?:source|\.)\s+\S*set_env\.sh")
_DRIVER_ONLY = {"driver-lib-not-found", "driver-not-active", "npu-smi-failure"}
# the expandable allocator fixes fragmentation, never a card asked for more than it has
_ALLOC_FIX = re.compile(r"PYTORCH_NPU_ALLOC_CONF|expandable_segments")
_FRAGMENT = re.compile(r"fragment", re.IGNORECASE)  # a step that states its condition
_SETS_VAR = "(?:export\\s+|^|\\s){var}="


def _sets(cmd: str, var: str) -> bool:
    return re.search(_SETS_VAR.format(var=re.escape(var)), cmd) is not None


def contradictions(d: Mapping[str, Any]) -> list[str]:
    """Steps that contradict the entry's own cause (kb lint):

    * a step sets an environment variable the cause names as *not* the one
      ("… not HCCL_EXEC_TIMEOUT"), or, for an entry about the connect phase of HCCL
      (EI0006, connect timeout) and not its execution, sets HCCL_EXEC_TIMEOUT (and the
      reverse for the execution phase);
    * a step forces ``--dtype float16`` while the cause says the weights need bfloat16
      (outside version/chip-conditional advice);
    * a step lowers a value to a literal number without a ``when_value`` condition that
      the value found is above it (never "lower" to a higher number);
    * a signature capturing a ``code`` matches a documented runtime code the entry does not
      list in its aliases (507013 is not 507014);
    * a step sources set_env.sh while the cause is the driver's own libraries (libc_sec.so,
      DCMI, libascend_hal.so: a container without the driver mounted), which it never brings;
    * a step of an NPU OOM entry sets the expandable allocator (PYTORCH_NPU_ALLOC_CONF)
      without saying it is for fragmentation, while the entry's causes do not name
      fragmentation (an OOM at capacity needs less asked of the card, not the allocator).
    """
    eid = d.get("id", "?")
    p: list[str] = []
    cause = " ".join(str(v) for v in (d.get("cause") or {}).values()) \
        if isinstance(d.get("cause"), Mapping) else ""
    title = " ".join(str(v) for v in (d.get("title") or {}).values()) \
        if isinstance(d.get("title"), Mapping) else ""
    about = " ".join([title, cause, *[str(a) for a in d.get("aliases", [])],
                      *[str(x) for x in d.get("signatures", [])]])
    steps = [s for s in d.get("steps", []) if isinstance(s, Mapping)]
    for i, st in enumerate(steps, 1):
        cmd = str(st.get("cmd") or "")
        text = " ".join(str(st.get(k) or "") for k in ("en", "cmd"))
        for var in re.findall(r"\b[A-Z][A-Z0-9_]{3,}\b", cause):
            if re.search(r"\bnot (?:`)?" + re.escape(var) + r"\b", cause) and _sets(cmd, var):
                p.append(T("{entry}.steps[{i}]: sets {var}, which the cause says is not the one",
                           entry=eid, i=i, var=var))
        for connect_var, exec_var in EXCLUSIVE_ENV:
            connect, execute = _CONNECT_PHASE.search(about), _EXEC_PHASE.search(about)
            if connect and not execute and _sets(cmd, exec_var):
                p.append(T("{entry}.steps[{i}]: the cause is the connect phase but the step sets "
                           "{var}", entry=eid, i=i, var=exec_var))
            if execute and not connect and _sets(cmd, connect_var):
                p.append(T("{entry}.steps[{i}]: the cause is the execution phase but the step "
                           "sets {var}", entry=eid, i=i, var=connect_var))
        if _BF16_NEEDED.search(cause) and _FP16_STEP.search(text):
            p.append(T("{entry}.steps[{i}]: forces float16 while the cause says bfloat16 is "
                       "needed", entry=eid, i=i))
        m = _LOWER_TO.search(str(st.get("en") or ""))
        if m and not (isinstance(st.get("when_value"), str) and ">" in st["when_value"]):
            p.append(T("{entry}.steps[{i}]: lowers to {value} whatever the value found; add "
                       "when_value = \"<group> > {value}\" or say it relative to the value",
                       entry=eid, i=i, value=m.group(1)))
    causes = {str(c) for c in d.get("causes", [])} if isinstance(d.get("causes"), list) else set()
    driver_only = (bool(causes) and "driver-lib-not-found" in causes and causes <= _DRIVER_ONLY) \
        or (not causes and _DRIVER_LIB.search(about) is not None
            and _TOOLKIT_LIB.search(about) is None)
    for i, st in enumerate(steps, 1):
        cmd = str(st.get("cmd") or "")
        if driver_only and _SOURCES_SET_ENV.search(cmd):
            p.append(T("{entry}.steps[{i}]: sources set_env.sh, but the cause is the driver's "
                       "libraries, which no set_env.sh brings (mount or install the driver)",
                       entry=eid, i=i))
        if "npu-oom" in causes and "allocator-fragmentation" not in causes \
                and _ALLOC_FIX.search(cmd) and not _FRAGMENT.search(str(st.get("en") or "")):
            p.append(T("{entry}.steps[{i}]: sets the expandable allocator, the fix for "
                       "fragmentation, which the entry's causes do not name",
                       entry=eid, i=i))
    aliases = {str(a) for a in d.get("aliases", [])}
    from .codes import all_codes
    acl = [c for t, c in all_codes() if t == "acl"]
    for rx in d.get("signatures", []):
        if "?P<code>" not in str(rx):
            continue
        try:
            c = re.compile(rx, re.IGNORECASE)
        except re.error:
            continue
        for code in acl:
            if code in aliases:
                continue
            for form in (f"error code is {code}", f"error code:{code}", f"error code: {code}"):
                m = c.search(form)
                if m and m.groupdict().get("code") == code:
                    p.append(T("{entry}: signature {rx} takes code {code}, which is not among "
                               "its aliases", entry=eid, rx=repr(rx), code=code))
                    break
    return p


def validate_entry(d: Mapping[str, Any], *, check_ids: Iterable[str] | None = None,
                   fix_ids: Iterable[str] | None = None,
                   seed_names: Iterable[str] = (),
                   fix_params: Mapping[str, Sequence[str]] | None = None,
                   corpus: Sequence[str] | None = None,
                   negatives: Sequence[str] = (),
                   cause_keys: Iterable[str] | None = None) -> list[str]:
    """Problems of one entry; ``check_ids``/``fix_ids``/``fix_params`` None = do not check
    references. Every signature must match one of the entry's ``examples`` or, when given,
    a line of ``corpus`` (real logs), so a regex that can never match is caught, and none
    may match a line of ``negatives`` (benign lines of real logs). Every signature also needs
    a negative: a line of the entry's ``near_misses`` (real lines that look like the failure
    and must not match), else a real line of ``corpus``/``negatives`` that shares a word
    with it without matching (``near_miss``)."""
    eid = d.get("id", "?")
    p = [T("{entry}: missing field {field}", entry=eid, field=repr(k))
         for k in REQUIRED if k not in d]
    p += [T("{entry}: unknown field {field}", entry=eid, field=repr(k))
          for k in d if k not in KNOWN]
    if "id" in d and not ID_RX.match(str(d["id"])):
        p.append(T("{entry}: id is not of the form ASC-<DOMAIN>-NNN", entry=eid))
    for k in ("title", "cause"):
        if k in d:
            p += _bilingual(d[k], f"{eid}.{k}", prose=True)
    for k in ("message", "description"):
        if k in d:
            p += _bilingual(d[k], f"{eid}.{k}")
    steps = d.get("steps", [])
    if not isinstance(steps, list) or not steps:
        p.append(T("{entry}.steps: needs at least one step", entry=eid))
    else:
        for i, s in enumerate(steps, 1):
            p += _bilingual(s, f"{eid}.steps[{i}]")
            if isinstance(s, Mapping) and "cmd" in s and not (
                    isinstance(s["cmd"], str) and s["cmd"].strip()):
                p.append(T("{entry}.steps[{i}].cmd: empty command", entry=eid, i=i))
            elif isinstance(s, Mapping) and isinstance(s.get("cmd"), str):
                p += command_problems(s["cmd"], f"{eid}.steps[{i}].cmd", fix_params,
                                      triaged=bool(d.get("signatures")))
    examples = d.get("examples", [])
    if not isinstance(examples, list) or not all(isinstance(x, str) for x in examples):
        p.append(T("{entry}.examples: must be a list of log lines", entry=eid))
        examples = []
    from . import _normalized
    texts = [_normalized(x) for x in [*examples, *(corpus or ())]]
    compiled_ok = []
    for rx in d.get("signatures", []):
        try:
            compiled_ok.append(re.compile(rx, re.IGNORECASE | re.MULTILINE))
        except (re.error, TypeError):
            pass
    for i, x in enumerate(examples, 1):
        if compiled_ok and not any(c.search(_normalized(x)) for c in compiled_ok):
            p.append(T("{entry}.examples[{i}]: matches none of the entry's signatures",
                       entry=eid, i=i))
    near = d.get("near_misses", [])
    if not isinstance(near, list) or not all(isinstance(x, str) and x.strip() for x in near):
        p.append(T("{entry}.near_misses: must be a list of log lines", entry=eid))
        near = []
    for i, x in enumerate(near, 1):
        hit = next((c.pattern for c in compiled_ok if c.search(_normalized(x))), None)
        if hit is not None:
            p.append(T("{entry}.near_misses[{i}]: matches the entry's signature {rx}",
                       entry=eid, i=i, rx=repr(hit)))
    # where a signature's negative may come from: the entry's own near misses, else a real
    # line (triage corpus, benign corpus) that shares a word with it and is not matched
    real = [_normalized(x) for x in [*(corpus or ()), *negatives]]
    for i, rx in enumerate(d.get("signatures", []), 1):
        try:
            c = re.compile(rx, re.IGNORECASE | re.MULTILINE)
        except (re.error, TypeError) as exc:
            p.append(T("{entry}.signatures[{i}]: does not compile ({reason})", entry=eid, i=i,
                       reason=exc))
            continue
        if not any(c.search(t) for t in texts):
            p.append(T("{entry}.signatures[{i}]: matches no example and no corpus line ({rx})",
                       entry=eid, i=i, rx=repr(rx)) if corpus else
                     T("{entry}.signatures[{i}]: matches no example ({rx})", entry=eid, i=i,
                       rx=repr(rx)))
        if not near and near_miss(rx, real) is None:
            p.append(T("{entry}.signatures[{i}]: no negative example: no real log line shares "
                       "a word with {rx} without matching it; add one to near_misses",
                       entry=eid, i=i, rx=repr(rx)))
        from ascend_doctor.probes.logs import required_literal
        lit = required_literal(rx)
        if lit is None or (len(lit) < 4 and lit.isascii()):
            p.append(T("{entry}.signatures[{i}]: needs a literal of 4 characters every match "
                       "contains (outside alternations and optional parts), else every line of "
                       "every log is tested against it ({rx})", entry=eid, i=i, rx=repr(rx)))
        bad = next((t for t in negatives if c.search(_normalized(t))), None)
        if bad is not None:
            p.append(T("{entry}.signatures[{i}]: matches a benign line ({line})", entry=eid, i=i,
                       line=repr(bad[:80])))
    for a in d.get("aliases", []):
        if not isinstance(a, str) or not a.strip():
            p.append(T("{entry}.aliases: empty alias", entry=eid))
    if check_ids is not None:
        known = set(check_ids)
        p += [T("{entry}.checks: unknown check id {check}", entry=eid, check=repr(c))
              for c in d.get("checks", [])
              if c not in known]
    if fix_ids is not None and d.get("fix") is not None and d["fix"] not in set(fix_ids):
        p.append(T("{entry}.fix: unknown fix recipe {recipe}", entry=eid, recipe=repr(d["fix"])))
    if d.get("severity", "medium") not in SEVERITIES:
        p.append(T("{entry}.severity: {value} not in {known}", entry=eid,
                   value=repr(d.get("severity")), known=sorted(SEVERITIES)))
    p += _versions(d.get("applies_to", {}), f"{eid}.applies_to")
    for i, a in enumerate(d.get("advice", []), 1):
        p += _bilingual(a, f"{eid}.advice[{i}]")
        if isinstance(a, Mapping):
            p += _versions(a.get("when", {}), f"{eid}.advice[{i}].when")
    p += contradictions(d)
    causes = d.get("causes", [])
    if not isinstance(causes, list) or not all(isinstance(c, str) for c in causes):
        p.append(T("{entry}.causes: must be a list of cause keys", entry=eid))
    elif cause_keys is not None:
        p += [T("{entry}.causes: unknown cause key {key} (CAUSES.md)", entry=eid, key=repr(c))
              for c in causes if c not in cause_keys]
    if not isinstance(d.get("generic", False), bool):
        p.append(T("{entry}.generic: must be true or false", entry=eid))
    p += _owner_problems(d)
    raised = d.get("raised_in", [])
    from .owner import PACKAGES
    if not isinstance(raised, list) or not raised and "raised_in" in d or not all(
            isinstance(x, str) and x in PACKAGES for x in raised):
        p.append(T("{entry}.raised_in: must be a non-empty list of {known}", entry=eid,
                   known=", ".join(PACKAGES)))
    if not isinstance(d.get("needs_frames", False), bool):
        p.append(T("{entry}.needs_frames: must be true or false", entry=eid))
    elif d.get("needs_frames") and not raised:
        p.append(T("{entry}.needs_frames: needs raised_in (the packages whose frames decide)",
                   entry=eid))
    sources = d.get("sources", [])
    if not isinstance(sources, list) or not sources:
        p.append(T("{entry}.sources: needs at least one source", entry=eid))
    for s in sources if isinstance(sources, list) else []:
        if not isinstance(s, str) or not s.startswith(SOURCE_PREFIXES):
            p.append(T("{entry}.sources: {source} is not a public source (start with one of "
                       "{prefixes})", entry=eid, source=repr(s), prefixes=SOURCE_PREFIXES))
    if isinstance(sources, list) and sources and not any(
            isinstance(s, str) and s.startswith("https://") for s in sources):
        p.append(T("{entry}.sources: needs a public URL (https://)", entry=eid))
    return p


def _owner_problems(d: Mapping[str, Any]) -> list[str]:
    """An ``owner`` entry is reached through a traceback's frames (knowledge/owner.py): the
    owner must be one the frames can name, its causes must name that owner's defect (what
    its steps fix), and it has no signature of its own (a regex would bypass the rule-outs)."""
    if "owner" not in d:
        return []
    from .owner import DEFECT_CAUSE, OWNERS

    eid = d.get("id", "?")
    owner = d["owner"]
    if owner not in OWNERS:
        return [T("{entry}.owner: {value} is none of {known}", entry=eid, value=repr(owner),
                  known=", ".join(OWNERS))]
    p = []
    causes = d.get("causes", [])
    if not isinstance(causes, list) or DEFECT_CAUSE[owner] not in causes:
        p.append(T("{entry}.causes: an entry owned by {owner} must name {key}", entry=eid,
                   owner=owner, key=DEFECT_CAUSE[owner]))
    if d.get("signatures"):
        p.append(T("{entry}.signatures: an owner entry is reached through the traceback's "
                   "frames, not a signature", entry=eid))
    return p


def _versions(table: Any, where: str) -> list[str]:
    if not isinstance(table, Mapping):
        return [T("{where}: must be a table", where=where)]
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    out = []
    for k, v in table.items():
        if k in LIST_KEYS:
            if not isinstance(v, (list, str)):
                out.append(T("{where}.{key}: must be a list of names", where=where, key=k))
            continue
        if k not in VERSION_KEYS:
            out.append(T("{where}: unknown component {key} (known: {known})", where=where,
                         key=repr(k), known=VERSION_KEYS + LIST_KEYS))
            continue
        try:
            SpecifierSet(_canon_spec(str(v)))
        except InvalidSpecifier:
            out.append(T("{where}.{key}: {value} is not a version specifier", where=where, key=k,
                         value=repr(v)))
    return out


def validate_file(name: str, raw: bytes, **refs: Any) -> list[str]:
    """Problems of one knowledge file (TOML syntax, then each entry, then duplicate ids)."""
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [T("{file}: not valid TOML ({reason})", file=name, reason=exc)]
    entries = doc.get("entry", [])
    if not isinstance(entries, list):
        return [T("{file}: [[entry]] must be an array of tables", file=name)]
    out: list[str] = []
    seen: set[str] = set()
    for d in entries:
        out += [T("{file}: {problem}", file=name, problem=m) for m in validate_entry(d, **refs)]
        if d.get("id") in seen:
            out.append(T("{file}: duplicate id {id}", file=name, id=d.get("id")))
        seen.add(d.get("id"))
    return out


def signature_key(d: Mapping[str, Any]) -> frozenset[str]:
    """An entry's signatures as a set, whitespace-normalised: equal keys = one cause twice."""
    return frozenset(" ".join(str(s).split()) for s in d.get("signatures", []) or ())


def _compiled(d: Mapping[str, Any]) -> list["re.Pattern[str]"]:
    out = []
    for rx in d.get("signatures", []) or ():
        try:
            out.append(re.compile(str(rx), re.IGNORECASE | re.MULTILINE))
        except re.error:
            pass  # validate_entry reports it
    return out


def same_cause(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """Why two entries are one cause written twice, or None. Precisely: they share an
    identical signature regex (whitespace-normalised), or neither is ``generic`` and an
    example of each matches a signature of the other (each explains the other's line).
    A generic entry (EZ9999, ACL call failed) may overlap a specific one: ranking lets the
    specific one win."""
    shared = signature_key(a) & signature_key(b)
    if shared:
        return f"the signature {sorted(shared)[0]!r}"
    if a.get("generic") or b.get("generic"):
        return None
    from . import _normalized

    def crossing(x: Mapping[str, Any], y: Mapping[str, Any]) -> str | None:
        rxs = _compiled(y)
        return next((e for e in x.get("examples", []) or () if isinstance(e, str)
                     and any(c.search(_normalized(e)) for c in rxs)), None)
    ab, ba = crossing(a, b), crossing(b, a)
    if ab is not None and ba is not None:
        return f"examples that match each other's signatures ({ab[:60]!r} / {ba[:60]!r})"
    return None


def cross_problems(files: Iterable[tuple[str, bytes]],
                   known_ids: Iterable[str] = ()) -> list[str]:
    """Problems across files: a duplicate id, or two entries with one cause (``same_cause``:
    merge them, with the test that tells the cases apart in the steps)."""
    seen_entries: list[tuple[str, Mapping[str, Any]]] = []
    by_key: dict[frozenset[str], str] = {}
    ids: dict[str, str] = {}
    refs: list[tuple[str, str, str]] = []  # (file, entry, id named in its texts)
    out = []
    for name, raw in files:
        try:
            doc = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue  # validate_file reports it
        for d in doc.get("entry", []) if isinstance(doc.get("entry"), list) else []:
            if not isinstance(d, Mapping):
                continue
            eid = str(d.get("id"))
            if eid in ids and ids[eid] != name:
                out.append(f"{name}: id {eid} is also in {ids[eid]}")
            ids.setdefault(eid, name)
            key = signature_key(d)
            if key and key in by_key:
                out.append(f"{name}: {eid} has the same signatures as {by_key[key]}")
            by_key.setdefault(key, eid)
            for other_id, other in seen_entries:
                why = same_cause(other, d) if key != signature_key(other) else None
                if why:
                    out.append(f"{name}: {eid} and {other_id} share one cause: {why}; merge "
                               "them (keep the other id as an alias)")
            seen_entries.append((eid, d))
            texts = [d.get(k) for k in ("cause", "message")] + list(d.get("steps", []) or []) + \
                list(d.get("advice", []) or [])
            for t in texts:
                for v in (t.values() if isinstance(t, Mapping) else ()):
                    refs += [(name, eid, r) for r in re.findall(r"ASC-[A-Z]+-\d{3}", str(v))]
    out += [f"{name}: {eid} names {r}, which is no entry (merged or renamed?)"
            for name, eid, r in refs if r not in ids and r not in set(known_ids)]
    return out
