# case: vLLM custom op registered by name: forward_cuda compacts active LoRA slots with torch.nonzero; the op sits in the decoder layers that vLLM's graph runner captures
import torch

from vllm.model_executor.custom_op import CustomOp


@CustomOp.register("slot_compact_gate")
class SlotCompactGate(CustomOp):
    def __init__(self, max_slots):
        super().__init__()
        self.max_slots = max_slots

    def forward_native(self, x, slot_ids):
        active = slot_ids >= 0
        return x * active.unsqueeze(-1).to(x.dtype)

    def forward_cuda(self, x, slot_ids):
        rows = torch.nonzero(slot_ids >= 0).squeeze(-1)  # expect: OFL105
        out = torch.zeros_like(x)
        out.index_copy_(0, rows, x.index_select(0, rows))
        return out
