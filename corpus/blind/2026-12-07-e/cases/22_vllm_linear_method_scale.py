# case: vLLM quantization plugin: a per-tensor FP8 linear method derived from vLLM's LinearMethodBase reads its activation scale back to the host in apply(); vLLM captures apply() in its decode graphs
import torch

from vllm import _custom_ops as ops
from vllm.model_executor.layers.linear import LinearMethodBase
from vllm.model_executor.parameter import PerTensorScaleParameter


class StaticFp8LinearMethod(LinearMethodBase):
    def __init__(self, quant_config):
        self.quant_config = quant_config

    def create_weights(self, layer, input_size_per_partition, output_partition_sizes,
                       input_size, output_size, params_dtype, **extra_weight_attrs):
        weight_loader = extra_weight_attrs.get("weight_loader")
        out = sum(output_partition_sizes)
        layer.weight = torch.nn.Parameter(
            torch.empty(out, input_size_per_partition, dtype=torch.float8_e4m3fn), requires_grad=False)
        layer.input_scale = PerTensorScaleParameter(
            data=torch.empty(len(output_partition_sizes), dtype=torch.float32), weight_loader=weight_loader)
        layer.weight_scale = PerTensorScaleParameter(
            data=torch.empty(len(output_partition_sizes), dtype=torch.float32), weight_loader=weight_loader)

    def process_weights_after_loading(self, layer):
        # start-up only: collapse the shard scales to one
        max_scale = float(layer.input_scale.max().item())
        layer.input_scale = torch.nn.Parameter(torch.tensor([max_scale], device=layer.weight.device),
                                               requires_grad=False)
        layer.weight_scale = torch.nn.Parameter(layer.weight_scale.max().reshape(1), requires_grad=False)

    def apply(self, layer, x, bias=None):
        scale = layer.input_scale
        if scale.item() == 0.0:  # expect: OFL105
            scale = torch.ones_like(scale)
        qx, _ = ops.scaled_fp8_quant(x, scale)
        return torch._scaled_mm(qx, layer.weight.t(), scale_a=scale, scale_b=layer.weight_scale,
                                out_dtype=x.dtype, bias=bias)
