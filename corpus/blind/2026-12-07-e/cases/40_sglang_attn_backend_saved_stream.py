# case: SGLang attention-backend plugin that spills evicted KV pages to host on a stream saved at construction; SGLang's CUDA graph runner captures forward_decode through the backend's forward
import torch

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.layers.attention.triton_backend import TritonAttnBackend


class HostSpillTritonBackend(TritonAttnBackend):
    """Triton attention that mirrors freshly written KV pages into a pinned host pool."""

    def __init__(self, model_runner, host_pages=65536):
        super().__init__(model_runner)
        self.spill_stream = torch.cuda.current_stream()
        pool = model_runner.token_to_kv_pool
        self.host_k = torch.empty((host_pages, pool.head_num, pool.head_dim), dtype=pool.dtype, pin_memory=True)
        self.host_v = torch.empty_like(self.host_k, pin_memory=True)

    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True):
        out = super().forward_decode(q, k, v, layer, forward_batch, save_kv_cache)
        loc = forward_batch.out_cache_loc
        with torch.cuda.stream(self.spill_stream):  # expect: OFL104
            self.host_k[: k.shape[0]].copy_(k.view(-1, *self.host_k.shape[1:]), non_blocking=True)
            self.host_v[: v.shape[0]].copy_(v.view(-1, *self.host_v.shape[1:]), non_blocking=True)
        return out


def create_host_spill_backend(runner) -> AttentionBackend:
    return HostSpillTritonBackend(runner)
