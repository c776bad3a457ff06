"""`ascend-doctor triage --json` through the real entry point on logs written from the
message templates of vLLM, vllm-ascend, torch_npu and the loader: a package's defect read
from the traceback's frames, entries that need a package's frames, ranking ties decided by
what a signature spells out, and the wordings of start-up failures across releases."""

from __future__ import annotations

import json

import pytest

SITE = "/usr/local/python3.11/lib/python3.11/site-packages"
W = "(VllmWorker TP0 pid=3127) ERROR 06-02 14:22:51 [multiproc_executor.py:596] "
E = "(EngineCore_DP0 pid=2980) ERROR 06-02 14:22:51 [core.py:708] "


def _triage(cli, log: str) -> dict:
    r = cli("triage", "-", "--json", "--lang", "en", input=log)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def _worker_tb(exc: str, *frames: tuple[str, int, str, str]) -> str:
    out = [f"{W}WorkerProc hit an exception.", f"{W}Traceback (most recent call last):"]
    for path, line, func, src in frames:
        out += [f'{W}  File "{path}", line {line}, in {func}', f"{W}    {src}"]
    out.append(f"{W}{exc}")
    return "\n".join(out) + "\n"


def test_an_index_error_inside_vllm_ascend_is_its_defect(cli):
    log = ("INFO 06-02 14:20:03 [__init__.py:235] Platform plugin ascend is activated\n"
           + _worker_tb("IndexError: index 4096 is out of bounds for dimension 0 with size 4096",
                        (f"{SITE}/vllm/v1/executor/multiproc_executor.py", 591, "worker_busy_loop",
                         "output = func(*args, **kwargs)"),
                        (f"{SITE}/vllm_ascend/worker/worker_v1.py", 212, "execute_model",
                         "output = self.model_runner.execute_model(scheduler_output)"),
                        (f"{SITE}/vllm_ascend/worker/model_runner_v1.py", 1311, "_prepare_inputs",
                         "self.input_ids[:total] = self.input_ids_cpu[token_indices]")))
    doc = _triage(cli, log)
    first = doc["answers"][0]
    assert doc["confident"] and first["id"] == "ASC-BUG-001", doc["answers"][:2]
    assert first["how"] == "owner" and first["causes"] == ["vllm-ascend-bug"]
    assert first["owner"] == {"package": "vllm_ascend", "exception": "IndexError",
                              "file": f"{SITE}/vllm_ascend/worker/model_runner_v1.py",
                              "line": 1311, "function": "_prepare_inputs"}
    assert "_prepare_inputs (model_runner_v1.py:1311)" in first["title"]
    assert any("pip show vllm-ascend" in s for s in first["steps"])
    assert "IndexError in a frame of vllm_ascend" in first["origin"]


def test_an_attribute_error_where_vllm_calls_the_plugin_checks_the_pair_first(cli):
    log = _worker_tb("AttributeError: 'NPUModelRunner' object has no attribute 'cascade_attn_enabled'",
                     (f"{SITE}/vllm/v1/worker/gpu_worker.py", 301, "compile_or_warm_up_model",
                      "self.model_runner.capture_model()"),
                     (f"{SITE}/vllm_ascend/worker/model_runner_v1.py", 2260, "capture_model",
                      "if self.cascade_attn_enabled:"))
    doc = _triage(cli, log)
    first = doc["answers"][0]
    assert first["id"] == "ASC-BUG-004" and doc["confident"]
    assert "vllm-vllm-ascend-mismatch" in first["causes"]
    assert "check --only versions" in first["steps"][0]


def test_vllm_importing_its_own_missing_module_is_a_vllm_defect(cli):
    log = ("Traceback (most recent call last):\n"
           '  File "/usr/local/bin/vllm", line 5, in <module>\n'
           "    from vllm.entrypoints.cli.main import main\n"
           f'  File "{SITE}/vllm/entrypoints/cli/main.py", line 9, in <module>\n'
           "    import vllm.entrypoints.cli.benchmark.main\n"
           f'  File "{SITE}/vllm/entrypoints/cli/benchmark/latency.py", line 4, in <module>\n'
           "    from vllm.benchmarks.latency import add_cli_args, main\n"
           "ModuleNotFoundError: No module named 'vllm.benchmarks.latency'\n")
    doc = _triage(cli, log)
    assert doc["answers"][0]["id"] == "ASC-BUG-002" and doc["confident"]


def test_a_version_mismatch_stays_the_mismatch_entrys_answer(cli):
    log = ("Traceback (most recent call last):\n"
           f'  File "{SITE}/vllm_ascend/worker/model_runner_v1.py", line 40, in <module>\n'
           "    from vllm.v1.worker.gpu_input_batch import CachedRequestState\n"
           "ImportError: cannot import name 'CachedRequestState' from 'vllm.v1.worker.gpu_input_batch' "
           f"({SITE}/vllm/v1/worker/gpu_input_batch.py)\n")
    doc = _triage(cli, log)
    assert not any(a["id"].startswith("ASC-BUG") for a in doc["answers"]), doc["answers"]


@pytest.mark.parametrize("exc", [
    "NotImplementedError: Currently, vLLM Ascend doesn't support W4A4_DYNAMIC for moe.",
    "RuntimeError: The size of tensor a (128) must match the size of tensor b (64) at non-singleton dimension 1",
])
def test_expected_exceptions_and_user_input_are_no_defect(cli, exc):
    log = _worker_tb(exc, (f"{SITE}/vllm_ascend/quantization/w4a4_dynamic.py", 188, "get_quant_method",
                           "raise NotImplementedError(msg)"))
    doc = _triage(cli, log)
    assert not any(a["id"].startswith("ASC-BUG") for a in doc["answers"]), doc["answers"]


def test_a_cuda_assertion_from_a_script_is_not_vllms_platform_choice(cli):
    script = ("Traceback (most recent call last):\n"
              '  File "/home/ma-user/work/infer.py", line 12, in <module>\n'
              "    x = torch.zeros(4).cuda()\n"
              f'  File "{SITE}/torch/cuda/__init__.py", line 310, in _lazy_init\n'
              '    raise AssertionError("Torch not compiled with CUDA enabled")\n'
              "AssertionError: Torch not compiled with CUDA enabled\n")
    doc = _triage(cli, script)
    assert not doc["confident"]
    served = script.replace("/home/ma-user/work/infer.py", f"{SITE}/vllm/platforms/cuda.py")
    doc = _triage(cli, served)
    assert doc["confident"] and doc["answers"][0]["id"] == "ASC-CFG-009"


def test_the_entry_that_names_the_library_wins_a_tie(cli):
    log = ("Traceback (most recent call last):\n"
           f'  File "{SITE}/vllm_ascend/ops/layernorm.py", line 21, in <module>\n'
           "    import torch_npu\n"
           "OSError: libatb.so: cannot open shared object file: No such file or directory\n")
    doc = _triage(cli, log)
    assert doc["answers"][0]["id"] == "ASC-UPS-002" and doc["confident"]


def test_an_invalid_quantization_choice_is_the_method_not_supported(cli):
    log = ("usage: vllm serve [model_tag] [options]\n"
           "vllm serve: error: argument --quantization/-q: invalid choice: 'ascend' (choose from "
           "'aqlm', 'awq', 'deepspeedfp', 'tpu_int8', 'fp8', 'fbgemm_fp8', 'marlin', 'gguf', 'gptq', "
           "'compressed-tensors', 'bitsandbytes', 'experts_int8', 'ipex', 'quark', None)\n")
    doc = _triage(cli, log)
    first = doc["answers"][0]
    assert first["id"] == "ASC-START-017" and doc["confident"]
    assert any("(ascend)" in s and "vllm-ascend did not register it" in s for s in first["steps"])


def test_a_namespace_package_without_version_is_a_shadowing_directory(cli):
    log = ("Traceback (most recent call last):\n"
           '  File "/workspace/vllm-ascend/vllm_ascend/utils.py", line 94, in vllm_version_is\n'
           "    return vllm.__version__ == version\n"
           "AttributeError: module 'vllm' has no attribute '__version__'\n")
    doc = _triage(cli, log)
    assert doc["answers"][0]["id"] == "ASC-ENV-009" and doc["confident"]


def test_an_oom_while_loading_weights_advises_more_cards_not_a_lower_share(cli):
    log = (f"{E}RuntimeError: NPU out of memory. Tried to allocate 1.50 GiB (NPU 0; 29.50 GiB total "
           "capacity; 28.91 GiB already allocated;\n")
    doc = _triage(cli, log)
    first = doc["answers"][0]
    assert first["id"] == "ASC-LOG-004" and "model-too-large" in first["causes"]
    assert any("--tensor-parallel-size" in s and "weights load" in s for s in first["steps"])


@pytest.mark.parametrize("line,entry", [
    # torch's dispatcher under torch_npu: the backend reads 'NPU' or 'PrivateUse1' by release
    ("NotImplementedError: Could not run 'aten::_upsample_bicubic2d_aa.out' with arguments from the "
     "'NPU' backend. This could be because the operator doesn't exist for this backend, or was "
     "omitted during the selective/custom build process (if using custom build).", "ASC-UPS-029"),
    ("NotImplementedError: Could not run 'aten::linalg_eigh' with arguments from the "
     "'AutogradPrivateUse1' backend.", "ASC-UPS-029"),
    # an extension library's device registry: npu:N, or xla:N under torch_npu 1.x
    ("RuntimeError: deform_conv_forward_impl: implementation for device npu:3 not found.", "ASC-UPS-030"),
    ("RuntimeError: roi_align_forward_impl: implementation for device xla:0 not found.", "ASC-UPS-030"),
    ("EZ3003: No supported Ops kernel and engine are found for [Unique2], optype [Unique].",
     "ASC-UPS-031"),
    # the registry's wordings of an architecture neither vLLM nor Transformers can run
    ("ValueError: Model architectures ['Glm4MoeLiteForCausalLM'] are not supported for now. "
     "Supported architectures: dict_keys(['AquilaModel', 'LlamaForCausalLM'])", "ASC-START-019"),
    ("ValueError: Cannot find model module. 'Glm4MoeLiteForCausalLM' is not a registered model in "
     "the Transformers library (only relevant if the model is meant to be in Transformers) and "
     "'AutoModel' is not present in the model config's 'auto_map' (relevant if the model is custom).",
     "ASC-START-019"),
    ("ValueError: The Transformers implementation of 'Glm4MoeLiteForCausalLM' is not compatible "
     "with vLLM.", "ASC-START-019"),
])
def test_each_release_wording_of_a_family_finds_its_entry(cli, line, entry):
    doc = _triage(cli, f"{E}{line}\n")
    assert doc["confident"] and doc["answers"][0]["id"] == entry, doc["answers"][:2]


def test_an_operator_missing_on_another_backend_is_not_the_npu_one(cli):
    doc = _triage(cli, "NotImplementedError: Could not run 'quantized::linear_dynamic' with "
                       "arguments from the 'CUDA' backend.\n")
    assert not any(a["id"] == "ASC-UPS-029" for a in doc["answers"])


def test_a_failed_model_inspection_defers_to_the_import_error_before_it(cli):
    log = (f"{E}Error in inspecting model architecture 'Qwen3MoeForCausalLM'\n"
           f"{E}RuntimeError: MKL_THREADING_LAYER=INTEL is incompatible with libgomp.so.1 library.\n"
           f"{E}ValueError: Model architectures ['Qwen3MoeForCausalLM'] failed to be inspected. "
           "Please check the logs for more details.\n")
    doc = _triage(cli, log)
    assert doc["decisive"]["line"] == 2, doc["decisive"]


def test_a_worker_selector_matching_no_worker_is_named_with_its_value(cli):
    log = ("2025-09-02T08:11:40 - gpustack.scheduler.scheduler - WARNING - No suitable workers.\n"
           "Details:\n"
           "- Matched 0/2 workers by label selector: {'arch': 'amd64', 'npu-type': '910b'}.\n")
    doc = _triage(cli, log)
    first = doc["answers"][0]
    assert doc["confident"] and first["id"] == "ASC-SVC-012"
    assert "{'arch': 'amd64', 'npu-type': '910b'}" in first["steps"][0]
    # candidates left: the selector is not what blocks the model
    doc = _triage(cli, "- Matched 1/2 workers by label selector: {'npu-type': '910b'}.\n")
    assert not any(a["id"] == "ASC-SVC-012" for a in doc["answers"])


def test_frames_of_a_traceback_in_a_log_too_big_to_read_whole_still_name_the_owner(cli):
    # past the small-paste size only lines with an event word are kept: a raw stderr
    # traceback's frames have none but `File "`, and the owner reading needs them
    filler = "".join(f"INFO 06-02 14:{i // 60 % 60:02d}:{i % 60:02d} [loggers.py:123] Engine 000: "
                     f"Avg prompt throughput: 0.0 tokens/s, Running: 0 reqs, step {i}\n"
                     for i in range(14000))
    assert len(filler) > (1 << 20)
    tb = ("Traceback (most recent call last):\n"
          f'  File "{SITE}/vllm_ascend/worker/model_runner_v1.py", line 1311, in _prepare_inputs\n'
          "    self.input_ids[:total] = self.input_ids_cpu[token_indices]\n"
          "IndexError: index 4096 is out of bounds for dimension 0 with size 4096\n")
    doc = _triage(cli, filler + tb)
    assert doc["answers"][0]["id"] == "ASC-BUG-001" and doc["confident"], doc["answers"][:2]


def test_the_owner_answer_names_the_version_of_the_installed_package(cli, tmp_path):
    pkg = tmp_path / "vllm_ascend"
    pkg.mkdir()
    (pkg / "sampler.py").write_text("def pick(ids, k):\n    return ids[k]\n\n\n"
                                    "def check(k):\n    if k < 0:\n"
                                    "        raise ValueError(f'negative top-k {k}')\n")
    (tmp_path / "vllm_ascend-0.23.0.dist-info").mkdir()
    log = ("Traceback (most recent call last):\n"
           f'  File "{tmp_path}/vllm_ascend/sampler.py", line 2, in pick\n'
           "    return ids[k]\n"
           "IndexError: list index out of range\n")
    r = cli("triage", "-", "--json", "--lang", "en", "--site", str(tmp_path),
            env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, input=log)
    doc = json.loads(r.stdout)
    first = doc["answers"][0]
    assert first["id"] == "ASC-BUG-001" and "vllm-ascend 0.23.0" in first["title"], first


def test_an_hccl_init_call_failing_is_no_collective_timeout(cli):
    log = ("[rank0]: RuntimeError: initialize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:96 "
           "HCCL function error: HcclCommInitRootInfo(numRanks, &rootInfo, rank, &comm), error code is 4\n"
           "[rank0]: [ERROR] 2025-06-01-09:12:44 (PID:77, Device:0, RankID:0) ERR02200 DIST call hccl "
           "api failed.\n")
    doc = _triage(cli, log)
    ids = [a["id"] for a in doc["answers"]]
    assert "ASC-UPS-018" in ids and ids.index("ASC-UPS-018") < ids.index("ASC-LOG-003"), ids
