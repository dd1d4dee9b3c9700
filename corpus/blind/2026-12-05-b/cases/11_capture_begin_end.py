"""Manual capture_begin()/capture_end() driver around a decode step."""
import torch


def decode_step(model, tokens, lengths):
    longest = int(lengths.max().item())
    return model(tokens[:, :longest])


def decode_step_static(model, tokens):
    return model(tokens)


class DecodeGraph:
    def __init__(self, model, tokens, lengths):
        self.model = model
        self.tokens = tokens
        self.lengths = lengths
        self.graph = torch.cuda.CUDAGraph()

    def record(self):
        torch.cuda.synchronize()
        self.graph.capture_begin()
        try:
            self.out = decode_step(self.model, self.tokens, self.lengths)
        finally:
            self.graph.capture_end()
        torch.cuda.synchronize()

    def record_static(self):
        torch.cuda.synchronize()
        self.graph.capture_begin()
        self.out = decode_step_static(self.model, self.tokens)
        self.graph.capture_end()

    def replay(self, tokens):
        self.tokens.copy_(tokens)
        self.graph.replay()
        return self.out.clone()
