# case: vLLM quantization plugin: the fused-MoE method's apply() calls a callable token balancer; vLLM's graph runner captures apply() inside the model's decode graph
import torch

from vllm.model_executor.layers.fused_moe import FusedMoEMethodBase
from vllm.model_executor.layers.fused_moe.fused_moe import fused_experts
from vllm.model_executor.layers.quantization import register_quantization_config
from vllm.model_executor.layers.quantization.base_config import QuantizationConfig


class CapacityBalancer:
    """Drops tokens over an expert's capacity by zeroing their routing weight."""

    def __init__(self, num_experts, capacity_factor=1.25):
        self.num_experts = num_experts
        self.capacity_factor = capacity_factor

    def __call__(self, topk_weights, topk_ids):
        counts = torch.bincount(topk_ids.flatten(), minlength=self.num_experts)  # allow: OFL105
        cap = int(self.capacity_factor * topk_ids.numel() / self.num_experts)
        if (counts > cap).any():  # expect: OFL105
            over = counts[topk_ids] > cap
            topk_weights = topk_weights.masked_fill(over, 0.0)
        return topk_weights, topk_ids


class BalancedMoEMethod(FusedMoEMethodBase):
    def __init__(self, moe):
        super().__init__(moe)
        self.balance = CapacityBalancer(moe.num_experts)

    def create_weights(self, layer, num_experts, hidden_size, intermediate_size_per_partition,
                       params_dtype, **extra_weight_attrs):
        w13 = torch.nn.Parameter(torch.empty(num_experts, 2 * intermediate_size_per_partition,
                                             hidden_size, dtype=params_dtype), requires_grad=False)
        w2 = torch.nn.Parameter(torch.empty(num_experts, hidden_size,
                                            intermediate_size_per_partition, dtype=params_dtype),
                                requires_grad=False)
        layer.register_parameter("w13_weight", w13)
        layer.register_parameter("w2_weight", w2)

    def apply(self, layer, x, router_logits, top_k, renormalize, **kwargs):
        topk_weights, topk_ids = torch.topk(router_logits.softmax(dim=-1), top_k, dim=-1)
        if renormalize:
            topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
        topk_weights, topk_ids = self.balance(topk_weights, topk_ids)
        return fused_experts(x, layer.w13_weight, layer.w2_weight, topk_weights, topk_ids)


@register_quantization_config("balanced_moe")
class BalancedMoEConfig(QuantizationConfig):
    @classmethod
    def get_name(cls):
        return "balanced_moe"

    @classmethod
    def get_supported_act_dtypes(cls):
        return [torch.bfloat16, torch.float16]

    @classmethod
    def get_min_capability(cls):
        return 80

    @staticmethod
    def get_config_filenames():
        return []

    @classmethod
    def from_config(cls, config):
        return cls()

    def get_quant_method(self, layer, prefix):
        from vllm.model_executor.layers.fused_moe import FusedMoE

        if isinstance(layer, FusedMoE):
            return BalancedMoEMethod(layer.moe_config)
        return None
