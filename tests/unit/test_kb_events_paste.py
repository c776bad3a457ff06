"""Tracebacks as people paste them into issues and blogs (knowledge/events.py): without the
"Traceback (most recent call last):" line, with the indentation stripped, and with the error
named once before its traceback. The frames must still say whose code raised."""

from __future__ import annotations

from ascend_doctor import knowledge
from ascend_doctor.knowledge import events
from ascend_doctor.knowledge.decide import decide

SITE = "/usr/local/python3.11.13/lib/python3.11/site-packages"


def _lines(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.strip("\n").splitlines(), 1))


HEADLESS = f"""
INFO 06-20 23:20:11 [model_runner_v1.py:2011] Loading model weights took 12.3 GiB
  File "{SITE}/vllm_ascend/worker/model_runner_v1.py", line 2033, in load_model
    self.model = get_model(vllm_config=self.vllm_config)
  File "{SITE}/vllm_ascend/attention/attention_v1.py", line 310, in build
    dtype = common_attn_metadata.query_start_loc.dtype
AttributeError: 'NoneType' object has no attribute 'dtype'
"""


def test_frames_then_an_exception_are_a_traceback_without_its_header():
    (ev,) = [e for e in events.events(_lines(HEADLESS)) if e.kind == "traceback"]
    assert ev.cause.n == 6 and [ln.n for ln in ev.lines] == [2, 3, 4, 5, 6]
    v = decide(knowledge.load(), _lines(HEADLESS))
    # an unexpected exception in vllm-ascend's own frame: the plugin's defect, read from the
    # frames
    assert "vllm-ascend-bug" in v.answers[0].causes, [(a.key, a.causes) for a in v.answers]


def test_frames_without_an_exception_after_them_start_nothing():
    log = f"""
  File "{SITE}/vllm/engine/llm_engine.py", line 10, in step
    outputs = self.model_executor.execute_model()
INFO 06-20 23:20:13 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s
ERROR 06-20 23:20:14 [core.py:588] EngineCore failed to start.
"""
    evs = events.events(_lines(log))
    assert [(e.kind, e.cause.n) for e in evs] == [("death", 4)]


# a blog's paste: the error first as a summary (wrapped), then the traceback with its
# indentation gone and the path shortened; vLLM imports a module of its own
NAMED_FIRST = """
ImportError: cannot import name 'ResponsesOutputConfig'
from 'vllm.entrypoints.responses.protocol'
File ".../vllm/entrypoints/openai/api_server.py", line 206, in build_app
register_responses_api_routers(app)
File ".../vllm/entrypoints/responses/serving.py", line 18, in <module>
from vllm.entrypoints.responses.protocol import (
ImportError: cannot import name 'ResponsesOutputConfig'
"""


def test_an_error_named_before_its_traceback_is_read_with_its_frames():
    evs = events.events(_lines(NAMED_FIRST))
    (ev,) = [e for e in evs if e.kind == "traceback"]
    assert ev.cause.n == 7 and ev.lines[0].n == 1 and {3, 5}.issubset(ln.n for ln in ev.lines)
    v = decide(knowledge.load(), _lines(NAMED_FIRST))
    # only vLLM's frames: no vllm-ascend importing a vLLM it does not match
    assert v.decisive is not None and v.decisive.n == 7
    assert not any(a.key == "ASC-START-026" and a.how == "signature" for a in v.answers)
    assert not (v.confident and "vllm-vllm-ascend-mismatch" in v.answers[0].causes)
