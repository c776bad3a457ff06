"""Every wording of the start-up and serving failures every vLLM operator meets (issue 32
item 3), as the releases users run print them, goes to its family's entry, first and
confident, through the real triage ranking (knowledge.decide).

Messages are reworded between releases. Each row is the message of one release's raise
site, formatted as that source formats it (placeholders filled with plausible values) with
the prefix the process puts in front of it. Where a row says "vLLM 0.7.x–0.10.x" the text is
that of the V0 worker / V1 check those releases share; "current" is the vLLM and vllm-ascend
of the CI stack (tests/corpus/threads/ci_stack.py) or the library releases installed here.
"""

from __future__ import annotations

import pytest

from ascend_doctor import knowledge
from ascend_doctor.knowledge.decide import decide

# (family, entry, release, log) — one row per real wording
WORDINGS: list[tuple[str, str, str, str]] = [
    # -- the KV cache cannot hold one sequence of max_model_len ------------------------------
    ("kv-too-small", "ASC-START-001", "vLLM V0 worker 0.7.x-0.10.x; vllm-ascend V0 worker v0.7.3-v0.9.x",
     "ERROR 03-11 09:12:40 engine.py:400] ValueError: The model's max seq len (32768) is larger "
     "than the maximum number of tokens that can be stored in KV cache (21840). Try increasing "
     "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."),
    ("kv-too-small", "ASC-START-001", "vLLM V1 0.7.x-0.8.x (models's, no estimate)",
     "ValueError: To serve at least one request with the models's max seq len (32768), (6.00 GiB "
     "KV cache is needed, which is larger than the available KV cache memory (2.39 GiB). Try "
     "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
     "engine."),
    ("kv-too-small", "ASC-START-001", "vLLM V1 0.9.x-0.10.x (estimate added)",
     "(EngineCore_DP0 pid=2211) ValueError: To serve at least one request with the models's max "
     "seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache "
     "memory (5.31 GiB). Based on the available memory, the estimated maximum model length is "
     "43488. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
     "initializing the engine."),
    ("kv-too-small", "ASC-START-001", "vLLM 0.11+ / current (model's, docs link)",
     "(EngineCore_DP0 pid=5120) ValueError: To serve at least one request with the model's max seq "
     "len (262144), (24.0 GiB KV cache is needed, which is larger than the available KV cache "
     "memory (9.87 GiB). Based on the available memory, the estimated maximum model length is "
     "107776. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
     "backend) or decreasing `max_model_len` when initializing the engine. See "
     "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."),
    ("kv-too-small", "ASC-START-001", "a V1 message pasted wrapped at 80 columns",
     "ValueError: To serve at least one request with the model's max seq len (262144), (24.0 GiB\n"
     "KV cache is needed, which is larger than the available KV cache memory (9.87 GiB)."),
    # -- no memory at all for KV cache blocks ------------------------------------------------
    ("no-cache-blocks", "ASC-LOG-006", "vLLM V0 0.7.x-0.10.x; vllm-ascend V0 worker v0.7.3-v0.9.x",
     "ValueError: No available memory for the cache blocks. Try increasing "
     "`gpu_memory_utilization` when initializing the engine."),
    ("no-cache-blocks", "ASC-LOG-006", "vLLM V1 0.11+ (docs link)",
     "(EngineCore_DP0 pid=77) ValueError: No available memory for the cache blocks. Try increasing "
     "`gpu_memory_utilization` when initializing the engine. See "
     "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."),
    ("no-cache-blocks", "ASC-LOG-006", "current vLLM (CPU backend note)",
     "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
     "when initializing the engine (this flag also controls CPU memory reservation on the CPU "
     "backend, despite its name). See https://docs.vllm.ai/en/latest/configuration/"
     "conserving_memory/ for more details."),
    # -- free memory at start-up below the utilization asked for -----------------------------
    ("free-below-utilization", "ASC-UPS-026", "vLLM 0.9-0.10; vllm-ascend main worker",
     "ValueError: Free memory on device (20.31/60.96 GiB) on startup is less than desired GPU "
     "memory utilization (0.9, 54.86 GiB). Decrease GPU memory utilization or reduce GPU memory "
     "used by other processes."),
    ("free-below-utilization", "ASC-UPS-026", "vLLM 0.11+ (device named)",
     "(EngineCore_DP0 pid=881) ValueError: Free memory on device npu:0 (12.18/61.28 GiB) on "
     "startup is less than desired GPU memory utilization (0.92, 56.38 GiB). Decrease GPU memory "
     "utilization or reduce GPU memory used by other processes."),
    ("free-below-utilization", "ASC-UPS-026", "vllm-ascend v0.9.x-v0.13.x worker_v1",
     "(EngineCore_DP0 pid=634) INFO 11-22 10:01:28 [worker_v1.py:256] Available memory: 0, total "
     "memory: 65452113920"),
    # -- free memory moved under the profiling run (another process on the card) -------------
    ("profiling-disturbed", "ASC-START-031", "vllm-ascend worker_v1 v0.9.x-v0.11.x (bytes)",
     "AssertionError: Error in memory profiling. Initial free memory 61342253056, current free "
     "memory 61980000256. This happens when the NPU memory was not properly cleaned up before "
     "initializing the vLLM instance."),
    ("profiling-disturbed", "ASC-START-031", "vLLM 0.10+ (GiB, shared container)",
     "AssertionError: Error in memory profiling. Initial free memory 52.1 GiB, current free memory "
     "53.4 GiB. This happens when other processes sharing the same container release GPU memory "
     "while vLLM is profiling during initialization."),
    # -- --max-model-len above the model's ---------------------------------------------------
    ("max-model-len", "ASC-START-002", "vLLM 0.7.x (may lead to incorrect outputs)",
     "ValueError: User-specified max_model_len (40960) is greater than the derived max_model_len "
     "(max_position_embeddings=32768 or model_max_length=None in model's config.json). This may "
     "lead to incorrect model outputs or CUDA errors. To allow overriding this maximum, set the "
     "env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"),
    ("max-model-len", "ASC-START-002", "vLLM 0.8+ (pydantic ModelConfig, extreme caution)",
     "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
     "  Value error, User-specified max_model_len (65536) is greater than the derived "
     "max_model_len (max_position_embeddings=32768 or model_max_length=None in model's "
     "config.json). To allow overriding this maximum, set the env var "
     "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme "
     "caution. If the model uses relative position encoding (RoPE), positions exceeding "
     "derived_max_model_len lead to nan."),
    ("max-model-len", "ASC-START-002", "a sliding-window key",
     "ValueError: User-specified max_model_len (8192) is greater than the derived max_model_len "
     "(sliding_window=4096 or model_max_length=None in model's config.json)."),
    ("max-model-len", "ASC-START-002", "a float derived length (rope-scaled configs)",
     "  Value error, User-specified max_model_len (131072) is greater than the derived "
     "max_model_len (max_position_embeddings=40960.0 or model_max_length=None in model's "
     "config.json). To allow overriding this maximum, set the env var "
     "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."),
    # -- the port is taken --------------------------------------------------------------------
    ("port-in-use", "ASC-START-003", "uvicorn via asyncio (Python <= 3.11)",
     "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address "
     "already in use"),
    ("port-in-use", "ASC-START-003", "uvicorn via asyncio (Python 3.12+)",
     "ERROR:    [Errno 98] error while attempting to bind on address ('::', 8000, 0, 0): [errno 98] "
     "address already in use"),
    ("port-in-use", "ASC-START-003", "uvicorn bind_socket (logs the OSError alone)",
     "ERROR:    [Errno 98] Address already in use"),
    ("port-in-use", "ASC-START-003", "vLLM's own API socket (0.7+)",
     "OSError: [Errno 98] Address already in use"),
    ("port-in-use", "ASC-START-003", "torch TCPStore 2.4+",
     "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
     "network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address "
     "already in use"),
    ("port-in-use", "ASC-START-003", "torch TCPStore 2.1-2.3",
     "RuntimeError: The server socket has failed to listen on any local network address. The "
     "server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The "
     "server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use)."),
    ("port-in-use", "ASC-START-003", "torchelastic store retry",
     "RuntimeError: on 10.0.0.2, port: 29500 already in use"),
    ("port-in-use", "ASC-START-003", "pyzmq >= 23 (V1 engine sockets)",
     "zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.2:13345')"),
    ("port-in-use", "ASC-START-003", "older pyzmq",
     "zmq.error.ZMQError: Address already in use"),
    # -- no chat template ---------------------------------------------------------------------
    ("chat-template", "ASC-START-004", "vLLM chat_utils 0.7-0.10 / current renderers",
     "ValueError: As of transformers v4.44, default chat template is no longer allowed, so you "
     "must provide a chat template if the tokenizer does not define one."),
    ("chat-template", "ASC-START-004", "current vLLM renderers exception class",
     "vllm.renderers.chat_utils.ChatTemplateResolutionError: As of transformers v4.44, default "
     "chat template is no longer allowed, so you must provide a chat template if the tokenizer "
     "does not define one."),
    ("chat-template", "ASC-START-004", "transformers >= 4.44 tokenizer",
     "ValueError: Cannot use chat template functions because tokenizer.chat_template is not set and "
     "no template argument was passed! For information about writing templates and setting the "
     "tokenizer.chat_template attribute, please see the documentation at "
     "https://huggingface.co/docs/transformers/main/en/chat_templating"),
    ("chat-template", "ASC-START-004", "transformers processor (multimodal)",
     "ValueError: Cannot use apply_chat_template because this processor does not have a chat "
     "template."),
    ("chat-template", "ASC-START-004", "vLLM 0.7-0.10 --chat-template path",
     "ValueError: The supplied chat template (/templates/qwen2.jinja) appears path-like, but "
     "doesn't exist!"),
    ("chat-template", "ASC-START-004", "vLLM --chat-template file unreadable",
     "ValueError: The supplied chat template (/templates/qwen2.jinja) looks like a file path, but "
     "it failed to be opened. Reason: [Errno 2] No such file or directory: '/templates/qwen2.jinja'"),
    ("chat-template", "ASC-START-004", "current vLLM (template string, builtin path tried)",
     "vllm.exceptions.VLLMValidationError: The supplied chat template string (./qwen3.jinja) "
     "appears path-like, but doesn't exist! Tried: ./qwen3.jinja and /usr/local/lib/python3.12/"
     "site-packages/vllm/transformers_utils/chat_templates/qwen3.jinja"),
    ("chat-template", "ASC-START-004", "current vLLM path check",
     "FileNotFoundError: the supplied chat template path doesn't exist"),
    # -- the hub cannot be reached ------------------------------------------------------------
    ("hub", "ASC-START-005", "transformers 4.4x (this file)",
     "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it "
     "in the cached files and it looks like Qwen/Qwen2.5-7B-Instruct is not the path to a directory "
     "containing a file named config.json."),
    ("hub", "ASC-START-005", "transformers 4.5x / 5.x (the files)",
     "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find "
     "them in the cached files."),
    ("hub", "ASC-START-005", "huggingface_hub local_files_only / HF_HUB_OFFLINE",
     "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk "
     "cache and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, "
     "set 'local_files_only' to False."),
    ("hub", "ASC-START-005", "huggingface_hub 0.2x connection error",
     "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the "
     "file on the Hub and we cannot find the requested files in the local cache. Please check your "
     "connection and try again or make sure your Internet connection is on."),
    ("hub", "ASC-START-005", "huggingface_hub snapshot with HF_HUB_OFFLINE=1",
     "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot "
     "folder for the specified revision on the local disk and outgoing traffic has been disabled. "
     "To enable repo look-ups and downloads online, set 'HF_HUB_OFFLINE=0' as environment "
     "variable."),
    ("hub", "ASC-START-005", "huggingface_hub text without its class, as an engine log line",
     "ERROR 11-20 03:01:12 [core.py:700] Cannot find an appropriate cached snapshot folder for the "
     "specified revision on the local disk and outgoing traffic has been disabled. To enable repo "
     "look-ups and downloads online, pass 'local_files_only=False' as input."),
    ("hub", "ASC-START-005", "huggingface_hub offline mode",
     "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/"
     "Qwen/Qwen3-8B: offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` "
     "environment variable."),
    ("hub", "ASC-START-005", "requests to the hub",
     "requests.exceptions.ConnectionError: (MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co',"
     " port=443): Max retries exceeded with url: /Qwen/Qwen3-8B/resolve/main/config.json (Caused by "
     "NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish "
     "a new connection: [Errno 101] Network is unreachable'))\"))"),
    ("hub", "ASC-START-005", "ModelScope (VLLM_USE_MODELSCOPE)",
     "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='www.modelscope.cn', port=443): "
     "Max retries exceeded with url: /api/v1/models/Qwen/Qwen2.5-7B-Instruct/revisions (Caused by "
     "NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f2c>: Failed to "
     "establish a new connection: [Errno -3] Temporary failure in name resolution'))"),
    # -- transformers too old for the model ---------------------------------------------------
    ("transformers-old", "ASC-START-006", "transformers 4.4x",
     "ValueError: The checkpoint you are trying to load has model type `qwen3_moe` but Transformers "
     "does not recognize this architecture. This could be because of an issue with the checkpoint, "
     "or because your version of Transformers is out of date."),
    ("transformers-old", "ASC-START-006", "transformers 4.5x+ (upgrade hint appended)",
     "ValueError: The checkpoint you are trying to load has model type `glm4_moe` but Transformers "
     "does not recognize this architecture. This could be because of an issue with the checkpoint, "
     "or because your version of Transformers is out of date.\n\nYou can update Transformers with "
     "the command `pip install --upgrade transformers`."),
    # -- remote code not trusted --------------------------------------------------------------
    ("trust-remote-code", "ASC-START-008", "transformers (configuration file)",
     "ValueError: Loading /models/internlm2-chat-7b requires you to execute the configuration file "
     "in that repo on your local machine. Make sure you have read the code there to avoid malicious "
     "use, then set the option `trust_remote_code=True` to remove this error."),
    ("trust-remote-code", "ASC-START-008", "transformers (custom code, repository for)",
     "ValueError: The repository for /models/glm-4-9b-chat contains custom code which must be "
     "executed to correctly load the model. You can inspect the repository content at "
     "https://hf.co//models/glm-4-9b-chat.\nPlease pass the argument `trust_remote_code=True` to "
     "allow custom code to be run."),
    ("trust-remote-code", "ASC-START-008", "transformers 4.5x+ / 5.x (repository)",
     "ValueError: The repository /models/MiniCPM-V-2_6 contains custom code which must be executed "
     "to correctly load the model."),
    ("trust-remote-code", "ASC-START-008", "transformers 5.x (timeout prompt)",
     "ValueError: Loading this model requires you to execute custom code contained in the model "
     "repository on your local machine. Please set the option `trust_remote_code=True` to permit "
     "loading of this model."),
    ("trust-remote-code", "ASC-START-008", "vLLM config wrapper",
     "RuntimeError: Failed to load the model config. If the model is a custom model not yet "
     "available in the HuggingFace transformers library, consider setting `trust_remote_code=True` "
     "in LLM or using the `--trust-remote-code` flag in the CLI."),
    ("trust-remote-code", "ASC-START-008", "vLLM tokenizer wrapper",
     "RuntimeError: Failed to load the tokenizer. If the tokenizer is a custom tokenizer not yet "
     "available in the HuggingFace transformers library, consider setting `trust_remote_code=True` "
     "in LLM or using the `--trust-remote-code` flag in the CLI."),
    ("trust-remote-code", "ASC-START-008", "current vLLM tokenizer wrapper (upgrade hint)",
     "RuntimeError: Failed to load the tokenizer. If the tokenizer is a custom tokenizer not yet "
     "available in the HuggingFace transformers library, consider setting `trust_remote_code=True` "
     "in LLM or using the `--trust-remote-code` flag in the CLI. If the model was created with a "
     "newer version of transformers, consider upgrading: `uv pip install --upgrade transformers`"),
    ("trust-remote-code", "ASC-START-008", "vLLM processor wrapper",
     "RuntimeError: Failed to load the processor. If the processor is a custom processor not yet "
     "available in the HuggingFace transformers library, consider setting `trust_remote_code=True` "
     "in LLM or using the `--trust-remote-code` flag in the CLI."),
    # -- the tokenizer does not load ----------------------------------------------------------
    ("tokenizer", "ASC-START-022", "vLLM 0.7-0.9 tokenizer wrapper (LLaMA hint)",
     "RuntimeError: Failed to load the tokenizer. If you are using a LLaMA-based model, use "
     "'hf-internal-testing/llama-tokenizer' instead of the original tokenizer."),
    ("tokenizer", "ASC-START-022", "transformers, slow tokenizer without sentencepiece",
     "ValueError: Couldn't instantiate the backend tokenizer from one of: \n(1) a `tokenizers` "
     "library serialization file, \n(2) a slow tokenizer instance to convert or \n(3) an "
     "equivalent slow tokenizer class to instantiate and convert."),
    ("tokenizer", "ASC-START-022", "tokenizers older than tokenizer.json",
     "Exception: data did not match any variant of untagged enum ModelWrapper at line 757443 "
     "column 3"),
    ("tokenizer", "ASC-START-022", "transformers, unknown tokenizer class",
     "ValueError: Tokenizer class Qwen2Tokenizer does not exist or is not currently imported."),
    ("tokenizer", "ASC-START-022", "transformers 4.4x-5.x, tokenizer files missing",
     "OSError: Can't load tokenizer for '/models/Qwen2.5-7B-Instruct'. If you were trying to load "
     "it from 'https://huggingface.co/models', make sure you don't have a local directory with the "
     "same name. Otherwise, make sure '/models/Qwen2.5-7B-Instruct' is the correct path to a "
     "directory containing all relevant files for a Qwen2TokenizerFast tokenizer."),
    ("tokenizer", "ASC-START-022", "transformers 5.x (sentencepiece or tiktoken)",
     "ValueError: You need to have sentencepiece or tiktoken installed to convert a slow tokenizer "
     "to a fast one."),
    ("tokenizer", "ASC-START-022", "transformers import guard",
     "ImportError: \nLlamaTokenizer requires the SentencePiece library but it was not found in your "
     "environment. Check out the instructions on the\ninstallation page of its repo"),
    ("model-path", "ASC-START-020", "transformers config (path without config.json)",
     "OSError: Can't load the configuration of '/data/qwen3-8b'. If you were trying to load it from "
     "'https://huggingface.co/models', make sure you don't have a local directory with the same "
     "name. Otherwise, make sure '/data/qwen3-8b' is the correct path to a directory containing a "
     "config.json file"),
    ("model-path", "ASC-START-020", "vLLM 0.10+ model path check",
     "ValueError: Invalid repository ID or local directory specified: '/models/Qwen3-8B'.\nPlease "
     "verify the following requirements:\n1. Provide a valid Hugging Face repository ID."),
    # -- quantisation dtype conflict and unknown methods --------------------------------------
    ("quant-dtype", "ASC-START-011", "vLLM 0.7+ (fp16-only method, bf16 asked)",
     "ValueError: torch.bfloat16 is not supported for quantization method awq. Supported dtypes: "
     "[torch.float16]"),
    ("quant-dtype", "ASC-START-011", "vLLM 0.7+ (bf16-only method, fp16 forced)",
     "ValueError: torch.float16 is not supported for quantization method fp8. Supported dtypes: "
     "[torch.bfloat16]"),
    ("quant-dtype", "ASC-START-011", "vLLM 0.8+ pydantic wrapper",
     "  Value error, torch.float32 is not supported for quantization method gptq. Supported dtypes: "
     "[torch.float16, torch.bfloat16] [type=value_error]"),
    ("quant-unknown", "ASC-START-017", "vLLM ModelConfig",
     "ValueError: Unknown quantization method: bitblas. Must be one of ['aqlm', 'awq', 'fp8', "
     "'gptq', 'compressed-tensors', 'bitsandbytes']."),
    ("quant-unknown", "ASC-START-017", "vLLM platform check on npu",
     "  Value error, gptq quantization is currently not supported in npu. [type=value_error]"),
    ("quant-unknown", "ASC-START-017", "vllm-ascend quant config",
     "NotImplementedError: Currently, vLLM Ascend only supports following quant types:['W8A8', "
     "'W8A8_DYNAMIC']"),
    ("quant-unknown", "ASC-START-017", "argparse of a vLLM without vllm-ascend's method",
     "vllm serve: error: argument --quantization/-q: invalid choice: 'ascend' (choose from 'aqlm', "
     "'awq', 'fp8', 'gptq')"),
    # -- tensor parallel and heads / devices --------------------------------------------------
    ("tp-heads", "ASC-START-014", "vLLM 0.7+",
     "ValueError: Total number of attention heads (28) must be divisible by tensor parallel size "
     "(8)."),
    ("tp-heads", "ASC-START-014", "vLLM 0.8+ pydantic wrapper",
     "  Value error, Total number of attention heads (40) must be divisible by tensor parallel "
     "size (3). [type=value_error]"),
    ("tp-devices", "ASC-START-015", "vLLM V0 multiproc 0.7.x",
     "AssertionError: please set tensor_parallel_size (8) to less than max local gpu count (4)"),
    ("tp-devices", "ASC-START-015", "vLLM V1 MultiprocExecutor 0.8-0.10",
     "RuntimeError: please ensure that world_size (16) is less than than max local gpu count (8)"),
    ("tp-devices", "ASC-START-015", "vLLM 0.11+ worker / vllm-ascend main worker",
     "AssertionError: local_world_size (8) must be less than or equal to the number of visible "
     "devices (4)."),
    # -- max_num_batched_tokens below max_model_len ---------------------------------------------
    ("batched-tokens", "ASC-START-013", "vLLM SchedulerConfig 0.7+",
     "ValueError: max_num_batched_tokens (8192) is smaller than max_model_len (32768). This "
     "effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM "
     "reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len."),
    ("batched-tokens", "ASC-START-013", "vllm-ascend Ascend scheduler v0.9-v0.11",
     "ValueError: Ascend scheduler is enabled without chunked prefill feature. Argument "
     "max_num_batched_tokens (2048) is smaller than max_model_len (32768). This effectively limits "
     "the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. "
     "Please increase max_num_batched_tokens or decrease max_model_len."),
    ("batched-tokens", "ASC-START-013", "vLLM SchedulerConfig (max_num_seqs)",
     "ValueError: max_num_batched_tokens (128) must be greater than or equal to max_num_seqs (256)."),
    # -- Ray without NPU resources ------------------------------------------------------------
    ("ray", "ASC-START-009", "vLLM ray_utils (existing placement group, 0.7-0.9)",
     "ValueError: The number of required NPUs exceeds the total number of available NPUs in the "
     "placement group."),
    ("ray", "ASC-START-009", "vLLM ray_utils (counts, current)",
     "ValueError: The number of required NPUs exceeds the total number of available NPUs in the "
     "placement group. Required number of devices: 16. Total number of devices: 8."),
    ("ray", "ASC-START-009", "vLLM wait_for_placement_group",
     "ValueError: Cannot provide a placement group of placement_group_specs=[{'NPU': 1.0}, "
     "{'NPU': 1.0}] within 1800 seconds. See `ray status` to make sure the cluster has enough "
     "resources."),
    ("ray", "ASC-START-009", "vLLM wait_for_placement_group (TP > 1, current)",
     "ValueError: Cannot provide a placement group requiring 16 GPUs (placement_group_specs=[{'NPU': "
     "1.0}]) within 1800 seconds."),
    ("ray", "ASC-START-009", "vLLM driver node without a device",
     "ValueError: Current node has no NPU available. current_node_resource={'CPU': 192.0}. vLLM "
     "engine cannot start without NPU. Make sure you have at least 1 NPU available in a node "
     "current_node_id=abc current_ip=10.0.0.2."),
    ("ray", "ASC-START-009", "Ray autoscaler",
     "(autoscaler +1m2s) Error: No available node types can fulfill resource request {'NPU': 1.0, "
     "'node:10.0.0.2': 0.001}. Add suitable node types to this cluster to resolve this issue."),
    # -- /dev/shm too small -------------------------------------------------------------------
    ("shm", "ASC-START-010", "torch shared-memory file (libshm)",
     "RuntimeError: unable to write to file </torch_1834_2871931011_0>: No space left on device (28)"),
    ("shm", "ASC-START-010", "torch worker bus error",
     "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
     "shared memory (shm)."),
    ("shm", "ASC-START-010", "torch DataLoader",
     "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
     "dataloader's workers are out of shared memory. Please try to raise your shared memory limit."),
    ("shm", "ASC-START-010", "Python shared_memory under /dev/shm",
     "OSError: [Errno 28] No space left on device: '/dev/shm/psm_6d8e2a1f'"),
    # -- multiprocessing start method ---------------------------------------------------------
    ("mp-start", "ASC-START-023", "torch_npu (all releases)",
     "(EngineCore_DP0 pid=14421) ERROR 11-27 08:19:08 [core.py:708] RuntimeError: Cannot "
     "re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must use the "
     "'spawn' start method"),
    ("mp-start", "ASC-START-023", "torch (CUDA wording on a mixed host)",
     "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
     "multiprocessing, you must use the 'spawn' start method"),
    ("mp-start", "ASC-START-023", "CPython spawn without a __main__ guard",
     "RuntimeError: \n        An attempt has been made to start a new process before the\n"
     "        current process has finished its bootstrapping phase."),
    # -- rendezvous and proxies ---------------------------------------------------------------
    ("rendezvous", "ASC-NET-006", "torch TCPStore client (MASTER_ADDR unreachable)",
     "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while "
     "trying to connect to (10.0.0.1, 29500)."),
    ("rendezvous", "ASC-NET-006", "torch TCPStore client (no address answers)",
     "torch.distributed.DistNetworkError: The client socket has failed to connect to any network "
     "address of (node-0, 29500)."),
    ("rendezvous", "ASC-NET-006", "torch TCPStore server waiting for ranks",
     "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 "
     "clients joined."),
    ("rendezvous", "ASC-NET-006", "torch store wait",
     "torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg/0//cpu//0/2"),
    ("proxy", "ASC-START-012", "urllib3 tunnel refused on the way to the local Ray dashboard",
     "urllib3.exceptions.ProxyError: ('Unable to connect to proxy', OSError('Tunnel connection "
     "failed: 403 Forbidden')) while connecting to http://localhost:8265/api/version"),
    ("proxy", "ASC-START-012", "requests through a proxy to a cluster node",
     "requests.exceptions.ProxyError: HTTPConnectionPool(host='192.168.20.11', port=8000): Max "
     "retries exceeded with url: /health (Caused by ProxyError('Unable to connect to proxy', "
     "RemoteDisconnected('Remote end closed connection without response')))"),
    ("proxy", "ASC-START-012", "requests through a proxy to a local address",
     "requests.exceptions.ProxyError: HTTPConnectionPool(host='127.0.0.1', port=8265): Max retries "
     "exceeded with url: /api/version (Caused by ProxyError('Unable to connect to proxy', "
     "OSError('Tunnel connection failed: 403 Forbidden')))"),
]


def verdict(log: str):
    """The real triage ranking of a pasted log."""
    return decide(knowledge.load(), list(enumerate(log.strip("\n").splitlines(), 1)))


@pytest.mark.parametrize("family,eid,release,log", WORDINGS,
                         ids=[f"{f}:{r}" for f, _, r, _ in WORDINGS])
def test_every_release_wording_ranks_its_family_first_and_confident(family, eid, release, log):
    v = verdict(log)
    assert v.answers, (family, release)
    got = v.answers[0]
    assert got.key == eid, (family, release, [a.key for a in v.answers[:3]])
    assert v.confident, (family, release, v.why_not_confident())


def test_the_table_has_several_wordings_for_every_family():
    per: dict[str, int] = {}
    for family, *_ in WORDINGS:
        per[family] = per.get(family, 0) + 1
    thin = {f: n for f, n in per.items() if n < 2}
    assert not thin, thin


# -- lines that look like a family but are not its failure ------------------------------------
NOT_THE_FAMILY: list[tuple[str, str]] = [
    # the override was asked for: a warning, the engine starts
    ("ASC-START-002", "WARNING 02-20 10:11:12 config.py:3396] User-specified max_model_len (65536) "
     "is greater than the derived max_model_len (max_position_embeddings=32768 or "
     "model_max_length=None in model's config.json). This may lead to incorrect model outputs or "
     "CUDA errors. Make sure the value is correct and within the model context size."),
    ("ASC-START-002", "WARNING 05-12 08:00:01 [model.py:1880] User-specified max_model_len (65536) "
     "is greater than the derived max_model_len (max_position_embeddings=32768 or "
     "model_max_length=None in model's config.json). VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used "
     "with extreme caution."),
    # a wrong address for the store, not a port someone holds
    ("ASC-START-003", "torch.distributed.DistNetworkError: The server socket has failed to listen "
     "on any local network address. port: 29500, useIpv6: 0, code: -99, name: EADDRNOTAVAIL, "
     "message: cannot assign requested address"),
    # no device visible at all: the devices, not the parallel size (ASC-NPU-006)
    ("ASC-START-015", "AssertionError: local_world_size (8) must be less than or equal to the "
     "number of visible devices (0)."),
    ("ASC-START-015", "AssertionError: please set tensor_parallel_size (2) to less than max local "
     "gpu count (0)"),
    # vLLM found another port by itself
    ("ASC-START-003", "INFO 09-02 11:04:17 [network_utils.py:248] Port 8000 is already in use, "
     "trying port 8001"),
]


@pytest.mark.parametrize("eid,line", NOT_THE_FAMILY)
def test_look_alikes_do_not_reach_the_family(eid, line):
    assert eid not in [m.entry.id for m in knowledge.load().match_lines([line])]


@pytest.mark.parametrize("line", [
    "AssertionError: local_world_size (8) must be less than or equal to the number of visible "
    "devices (0).",
    "AssertionError: please set tensor_parallel_size (2) to less than max local gpu count (0)",
    "RuntimeError: please ensure that world_size (2) is less than than max local gpu count (0)",
])
def test_a_count_of_zero_devices_reaches_the_no_npu_entry_first(line):
    """The parallel-size family leaves a count of 0 alone; the no-visible-NPU entry takes it."""
    v = verdict(line)
    assert v.answers and v.answers[0].key == "ASC-NPU-006", [a.key for a in v.answers[:3]]


# -- advice follows the value the message reports ---------------------------------------------
def test_kv_advice_names_the_estimated_length_only_when_the_release_printed_one():
    new = verdict(WORDINGS[2][3]).answers[0]
    assert "--max-model-len 43488" in new.steps()[0]
    old = verdict(WORDINGS[1][3]).answers[0]
    assert not any("{estimated}" in s or "43488" in s for s in old.steps())


def test_free_memory_advice_lowers_from_the_value_in_use_to_the_free_share():
    a = verdict(WORDINGS[9][3]).answers[0]
    step = next(s for s in a.steps() if "from 0.92" in s)
    assert "below 12.18 ÷ 61.28" in step and "56.38 GiB" in step
    # without the utilization in the message the numbered step is left out, the general one stays
    short = verdict("ValueError: Free memory on device (8.0/64.0 GiB) on startup is less than "
                    "desired").answers[0]
    assert not any("{utilization}" in s or "from {" in s for s in short.steps())
    assert any("below the value in use" in s for s in short.steps())


def test_max_model_len_advice_goes_down_to_the_models_own_length():
    for _, eid, _, log in WORDINGS:
        if eid != "ASC-START-002":
            continue
        a = verdict(log).answers[0]
        derived = a.groups["derived"]
        assert int(derived) < int(a.groups["max_model_len"])
        assert f"--max-model-len {derived}" in a.steps()[0]


def test_the_ascend_scheduler_wording_gets_its_own_switch():
    asc = verdict(next(w[3] for w in WORDINGS if "Ascend scheduler" in w[3])).answers[0]
    assert any("ascend_scheduler_config" in s for s in asc.steps())
    plain = verdict(WORDINGS[[w[2] for w in WORDINGS].index("vLLM SchedulerConfig 0.7+")][3])
    assert not any("ascend_scheduler_config" in s for s in plain.answers[0].steps())


def test_quant_dtype_advice_never_forces_float16_on_a_bf16_only_method():
    a = verdict("ValueError: torch.float16 is not supported for quantization method fp8. "
                "Supported dtypes: [torch.bfloat16]").answers[0]
    first = a.steps()[0]
    assert "[torch.bfloat16]" in first
    assert "float16" not in first.replace("bfloat16", "")



# -- the family still decides when the message sits in a whole start-up log --------------------
V1_KV_DEATH = """\
(APIServer pid=3021) INFO 11-20 03:01:02 [api_server.py:1805] vLLM API server version 0.11.0
(EngineCore_DP0 pid=3188) INFO 11-20 03:01:40 [worker.py:311] Available KV cache memory: 2.39 GiB
(EngineCore_DP0 pid=3188) ERROR 11-20 03:01:41 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=3188) ERROR 11-20 03:01:41 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=3188) ERROR 11-20 03:01:41 [core.py:708]   File "/vllm-workspace/vllm/vllm/v1/core/kv_cache_utils.py", line 699, in check_enough_kv_cache_memory
(EngineCore_DP0 pid=3188) ERROR 11-20 03:01:41 [core.py:708]     raise ValueError(
(EngineCore_DP0 pid=3188) ERROR 11-20 03:01:41 [core.py:708] ValueError: To serve at least one request with the models's max seq len (32768), (6.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.39 GiB). Based on the available memory, the estimated maximum model length is 13056. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
(APIServer pid=3021) Traceback (most recent call last):
(APIServer pid=3021)   File "/usr/local/python3.11.13/lib/python3.11/site-packages/vllm/v1/engine/core_client.py", line 84, in make_async_mp_client
(APIServer pid=3021) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""

UVICORN_PORT = """\
INFO 06-16 15:10:59 [api_server.py:1090] Starting vLLM API server on http://0.0.0.0:8000
INFO:     Started server process [4242]
INFO:     Waiting for application startup.
INFO:     Application startup complete.
ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use
INFO:     Waiting for application shutdown.
INFO:     Application shutdown complete.
"""

PYDANTIC_LEN = """\
(APIServer pid=77) Traceback (most recent call last):
(APIServer pid=77)   File "/usr/local/bin/vllm", line 10, in <module>
(APIServer pid=77)     sys.exit(main())
(APIServer pid=77)   File "/usr/local/lib/python3.11/site-packages/vllm/engine/arg_utils.py", line 1031, in create_model_config
(APIServer pid=77)     return ModelConfig(
(APIServer pid=77) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig
(APIServer pid=77)   Value error, User-specified max_model_len (65536) is greater than the derived max_model_len (max_position_embeddings=32768 or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. [type=value_error, input_value=ArgsKwargs((), {'model': '/models/Qwen2.5-7B-Instruct'}), input_type=ArgsKwargs]
"""


@pytest.mark.parametrize("log,eid,value", [
    (V1_KV_DEATH, "ASC-START-001", "--max-model-len 13056"),
    (UVICORN_PORT, "ASC-START-003", "ss -ltnp"),
    (PYDANTIC_LEN, "ASC-START-002", "--max-model-len 32768"),
])
def test_the_family_decides_inside_a_whole_start_up_log(log, eid, value):
    v = verdict(log)
    assert v.answers[0].key == eid and v.confident, [a.key for a in v.answers[:3]]
    assert any(value in s for s in v.answers[0].steps())


# -- real captures of the CI stack's vLLM (tests/corpus/realvllm/README.md) --------------------
REAL = __import__("pathlib").Path(__file__).resolve().parents[1] / "corpus" / "realvllm"


@pytest.mark.parametrize("name,eid,value", [
    ("max-model-len-above-derived.log", "ASC-START-002", "--max-model-len 2048"),
    ("port-in-use.log", "ASC-START-003", "ss -ltnp"),
])
def test_real_start_up_failures_of_the_installed_vllm(name, eid, value):
    v = verdict((REAL / name).read_text(encoding="utf-8"))
    assert v.answers[0].key == eid and v.confident, (v.why_not_confident(),
                                                      [a.key for a in v.answers[:3]])
    assert any(value in s for s in v.answers[0].steps())
