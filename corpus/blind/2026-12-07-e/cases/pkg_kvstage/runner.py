import torch

import pkg_kvstage


class PrefixGraphRunner:
    def __init__(self, prefix_len=512, dim=128, batch=8):
        self.prefix = pkg_kvstage.StagedPrefix(prefix_len, dim)
        self.q = torch.zeros(batch, dim, dtype=torch.float16, device="cuda")
        self.graph = None

    def capture(self):
        self.prefix(self.q)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.prefix(self.q)

    def set_system_prompt(self, kv):
        self.prefix.load_prefix(kv)

    def step(self, q):
        self.q.copy_(q)
        self.graph.replay()
        return self.out
