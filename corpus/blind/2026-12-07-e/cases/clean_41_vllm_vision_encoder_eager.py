# case: vLLM model plugin: a registered vision-language model whose vision tower reads the image grid back to the host; the tower runs only from get_multimodal_embeddings (eager), the captured forward touches only the language model
import torch
from torch import nn

from vllm import ModelRegistry
from vllm.model_executor.models.interfaces import SupportsMultiModal


class PatchVisionTower(nn.Module):
    def __init__(self, patch_dim, hidden):
        super().__init__()
        self.proj = nn.Linear(patch_dim, hidden)

    def forward(self, pixel_values, grid_thw):
        sizes = (grid_thw[:, 0] * grid_thw[:, 1] * grid_thw[:, 2]).tolist()
        feats = self.proj(pixel_values)
        return list(torch.split(feats, sizes, dim=0))


class TinyDecoder(nn.Module):
    def __init__(self, vocab, hidden, layers):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))

    def forward(self, input_ids, positions, inputs_embeds=None):
        h = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        for layer in self.layers:
            h = h + torch.tanh(layer(h))
        return h


class TinyVLForConditionalGeneration(nn.Module, SupportsMultiModal):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        cfg = vllm_config.model_config.hf_config
        self.visual = PatchVisionTower(cfg.patch_dim, cfg.hidden_size)
        self.language_model = TinyDecoder(cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers)

    def get_multimodal_embeddings(self, **kwargs):
        pixel_values = kwargs.get("pixel_values")
        if pixel_values is None:
            return []
        return self.visual(pixel_values, kwargs["image_grid_thw"])

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None, **kwargs):
        return self.language_model(input_ids, positions, inputs_embeds=inputs_embeds)


ModelRegistry.register_model("TinyVLForConditionalGeneration", TinyVLForConditionalGeneration)
