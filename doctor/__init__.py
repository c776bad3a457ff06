"""ascend-doctor: diagnose Huawei Ascend NPU hosts that serve LLMs with vllm-ascend.

The core package knows no particular check: it holds the Host abstraction, the fact and
check registries, the engine and the reports. Checks live in the top-level ``checks``
package, fixes in ``fixes``, knowledge in ``knowledge``.
"""

__version__ = "0.1.0"
