"""The interfaces a serving engine calls inside its CUDA graph capture (shared/CATALOGUE.md,
"engine-captured code"): a class that derives from one of these bases implements methods the
engine's graph runner runs while it captures a decode step. Data: one row per base class, with
the engine module that defines it; methods the engine runs eagerly are not listed.

A plugin outside the engine's tree that implements one of them is on the capture path at
`medium` (the capture lives in the engine); the engine's own implementations are reached the
same way when the engine's tree is checked.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Interface:
    engine: str
    base: str  # the dotted name of the base class, as the engine's package defines it
    methods: tuple[str, ...]  # what the engine calls under capture
    why: str
    source: str  # where the base is defined, in the releases it was read from


INTERFACES: tuple[Interface, ...] = (
    # vLLM: CustomOp.forward dispatches to forward_cuda / forward_native in every captured layer
    Interface("vllm", "vllm.model_executor.custom_op.CustomOp", ("forward", "forward_cuda", "forward_native", "forward_hip"),
              "a vLLM CustomOp runs in every captured decode step", "vllm/model_executor/custom_op.py:103 (0.20.2, 0.29.0)"),
    # quantization and fused-MoE methods: `apply` runs in the layer's forward
    Interface("vllm", "vllm.model_executor.layers.quantization.base_config.QuantizeMethodBase", ("apply",),
              "a vLLM quantization method's apply runs in the captured layer forward",
              "vllm/model_executor/layers/quantization/base_config.py:20 (0.29.0)"),
    Interface("vllm", "vllm.model_executor.layers.linear.LinearMethodBase", ("apply",),
              "a vLLM linear method's apply runs in the captured layer forward", "vllm/model_executor/layers/linear.py:125 (0.29.0)"),
    Interface("vllm", "vllm.model_executor.layers.fused_moe.fused_moe_method_base.FusedMoEMethodBase", ("apply",),
              "a vLLM fused-MoE method's apply runs in the captured MoE layer",
              "vllm/model_executor/layers/fused_moe/fused_moe_method_base.py:26 (0.20.2), :28 (0.29.0)"),
    Interface("vllm", "vllm.model_executor.layers.fused_moe.modular_kernel.FusedMoEExpertsModular", ("apply",),
              "a vLLM modular MoE kernel's apply runs in the captured MoE layer",
              "vllm/model_executor/layers/fused_moe/modular_kernel.py:763 (0.20.2)"),
    Interface("vllm", "vllm.v1.attention.backend.AttentionImpl", ("forward",),
              "a vLLM attention backend's forward runs in the captured decode step",
              "vllm/v1/attention/backend.py:763 (0.20.2), :869 (0.29.0)"),
    Interface("vllm", "vllm.lora.layers.base.BaseLayerWithLoRA", ("forward", "apply"),
              "a vLLM LoRA layer runs in the captured forward", "vllm/lora/layers/base.py:17 (0.29.0)"),
    # SGLang
    Interface("sglang", "sglang.srt.layers.utils.multi_platform.MultiPlatformOp", ("forward", "forward_cuda", "forward_native"),
              "an SGLang platform op runs in every captured decode step", "sglang/srt/layers/utils/multi_platform.py:20 (0.5.19)"),
    Interface("sglang", "sglang.srt.layers.quantization.base_config.QuantizeMethodBase", ("apply",),
              "an SGLang quantization method's apply runs in the captured layer forward",
              "sglang/srt/layers/quantization/base_config.py:24 (0.5.23)"),
    Interface("sglang", "sglang.srt.layers.quantization.base_config.LinearMethodBase", ("apply",),
              "an SGLang linear method's apply runs in the captured layer forward",
              "sglang/srt/layers/quantization/base_config.py:57 (0.5.23)"),
    Interface("sglang", "sglang.srt.layers.quantization.base_config.FusedMoEMethodBase", ("apply",),
              "an SGLang fused-MoE method's apply runs in the captured MoE layer",
              "sglang/srt/layers/quantization/base_config.py:97 (0.5.23)"),
    Interface("sglang", "sglang.srt.layers.attention.base_attn_backend.AttentionBackend", ("forward", "forward_decode"),
              "an SGLang attention backend's decode forward runs in the captured decode step",
              "sglang/srt/layers/attention/base_attn_backend.py:38, forward :321, forward_decode :365 (0.5.23)"),
    Interface("sglang", "sglang.srt.lora.backend.base_backend.BaseLoRABackend",
              ("run_lora_a_sgemm", "run_lora_b_sgemm", "run_qkv_lora", "run_gate_up_lora"),
              "an SGLang LoRA backend runs in the captured forward", "sglang/srt/lora/backend/base_backend.py:18 (0.5.23)"),
)

BY_BASE: dict[str, Interface] = {row.base: row for row in INTERFACES}
