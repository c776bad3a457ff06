"""Knowledge base behaviour: version-aware advice, aliases, search, triage matching."""

from __future__ import annotations

import io

from ascend_doctor.knowledge import Entry, KnowledgeBase, condition_holds, load, parse_file

SEED_TRACEBACK = """\
INFO 01-12 10:00:01 [__init__.py:39] Available plugins for group vllm.platform_plugins:
Traceback (most recent call last):
  File "/usr/local/lib/python3.11/site-packages/torch_npu/__init__.py", line 12, in <module>
    import torch_npu._C
ImportError: libascendcl.so: cannot open shared object file: No such file or directory
"""


def test_advice_follows_the_versions_found():
    e = load().get("ASC-UPS-021")
    old = e.advice_for({"vllm_ascend": "0.7.3"})
    assert len(old) == 1 and "32 applies" in old[0]
    mid = e.advice_for({"vllm_ascend": "0.9.1"})
    assert len(mid) == 1 and "no-enable-prefix-caching" in mid[0]
    new = e.advice_for({"vllm_ascend": "0.23.0"}, "zh")
    assert len(new) == 1 and "不会生效" in new[0]
    assert e.advice_for({}) == []  # unknown version: no advice claims to hold
    conds = [c for c, _ in e.advice_table()]
    assert conds == ["vllm_ascend <0.9.1", "vllm_ascend >=0.9.1,<0.11",
                     "vllm_ascend >=0.23, model in deepseek_v4/DeepSeek-V4", "vllm_ascend >=0.11"]
    ds = e.advice_for({"vllm_ascend": "0.23.0", "model": "deepseek-ai/DeepSeek-V4"})
    assert len(ds) == 2 and "32 holds for this model" in ds[0]


def test_conditions_understand_cann_spellings():
    assert condition_holds({"cann": ">=8.0.RC1"}, {"cann": "8.0.RC2"})
    assert not condition_holds({"cann": ">=8.0.RC1"}, {"cann": "7.0.RC1"})
    assert condition_holds({"cann": "<8.1"}, {"cann": "8.0.0"})
    assert not condition_holds({"cann": ">=8.0"}, {"cann": None})
    e = Entry("ASC-X-001", {"en": "t"}, {"en": "c"}, (),
              applies_to={"vllm_ascend": ">=0.9", "chip": ["910B"]})
    assert e.applies({"vllm_ascend": "0.11.0", "chip": "Ascend910B3"}) is True
    assert e.applies({"vllm_ascend": "0.7.3", "chip": "910B"}) is False
    assert e.applies({"vllm_ascend": "0.11.0"}) is None


def test_lookup_by_alias_and_case():
    kb = load()
    assert kb.get("207018").id == "ASC-ACL-002"
    assert kb.get("asc-acl-002").id == "ASC-ACL-002"
    # a code shared by several entries: get() gives the first in id order, lookup() all
    shared = [e.id for e in kb.lookup("EZ9999")]
    assert "ASC-UPS-017" in shared and shared == sorted(shared) and len(shared) >= 2
    assert kb.get("EZ9999").id == shared[0]
    assert kb.get("ACL_ERROR_NOT_ENOUGH_MEMORY").id == "ASC-ACL-001"
    assert kb.get("no-such-thing") is None


def test_search_ranks_id_and_title_hits_first():
    kb = load()
    hits = kb.search("207018")
    assert hits[0].id == "ASC-ACL-002"
    zh = kb.search("显存", "zh")
    assert zh and all("显存" in (e.text("title", "zh") + e.text("cause", "zh")
                                 + "".join(s.get("zh", "") for s in e.steps)) for e in zh)
    top = kb.search("hccl timeout")[0].text("title", "en").lower()
    assert "hccl" in top and "timeout" in top, "a title hit ranks before cause-only hits"


def test_triage_on_the_seed_error_line_returns_the_env_entry_first():
    matches = load().match_lines(io.StringIO(SEED_TRACEBACK))
    assert matches, "nothing matched the seed's error line"
    top = matches[0]
    # another domain (libs) may add an equally specific entry; it must then be a LIB one
    assert top.entry.id == "ASC-ENV-001" or top.entry.id.startswith("ASC-LIB-")
    env = next(m for m in matches if m.entry.id == "ASC-ENV-001")
    assert env.lines == ((5, "ImportError: libascendcl.so: cannot open shared object file: "
                             "No such file or directory"),)
    assert env.groups["lib"] == "libascendcl.so"
    assert env.entry.render_message(env.groups).startswith("libascendcl.so was not found")


def test_triage_fills_named_groups_and_counts_lines():
    log = ["RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 0; 60.97 GiB total "
           "capacity; 58.92 GiB already allocated; 58.92 GiB current active; 1.66 GiB free; "
           "58.95 GiB reserved in total by PyTorch)",
           "E30006 something", "[ERROR] ... error code is 207018", "error code is 207018"]
    ms = load().match_lines(log)
    by_id = {m.entry.id: m for m in ms}
    oom = by_id["ASC-UPS-013"]
    assert oom.groups == {"want": "3.47 GiB", "npu": "0", "free": "1.66 GiB"}
    assert "剩余 1.66 GiB" in oom.entry.render_message(oom.groups, "zh")
    assert [n for n, _ in by_id["ASC-ACL-002"].lines] == [3, 4]
    order = [m.entry.id for m in ms]
    assert order.index("ASC-ACL-002") < order.index("ASC-UPS-013")  # two lines beat one
    assert len(ms[0].lines) == max(len(m.lines) for m in ms)  # the top entry explains most lines


def test_missing_group_stays_visible_in_message():
    (e,) = parse_file("x.toml", '''
[[entry]]
id = "ASC-X-001"
title = { en = "t", zh = "标" }
cause = { en = "c", zh = "因" }
steps = [ { en = "s", zh = "步" } ]
message = { en = "{lib} and {other}", zh = "{lib}" }
sources = ["doc:x"]
'''.encode())
    assert e.render_message({"lib": "libx.so"}) == "libx.so and {other}"


def test_demo_findings_carry_bilingual_entries():
    from ascend_doctor.cli import demo_host
    from ascend_doctor.engine import RunConfig, run
    from ascend_doctor.options import RunOptions

    kb = load()
    report = run(demo_host(), RunOptions(), config=RunConfig(context="demo"))
    ids = {k for _, f in report.findings() for k in f.kb}
    assert ids >= {"ASC-LIB-002", "ASC-VER-001"}
    for i in ids:
        e = kb.get(i)
        assert e is not None, i
        for lang in ("en", "zh"):
            assert e.title.get(lang) and e.cause.get(lang)
            assert all(s.get(lang) for s in e.steps)


def test_kb_rejects_duplicates():
    e = Entry("ASC-X-001", {"en": "t"}, {"en": "c"}, ())
    try:
        KnowledgeBase([e, e])
    except ValueError as exc:
        assert "duplicate" in str(exc)
    else:
        raise AssertionError("duplicate ids accepted")
