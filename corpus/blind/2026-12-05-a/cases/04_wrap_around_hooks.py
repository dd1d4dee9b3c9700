"""Weight streaming with a post-hook prefetch and a pre-hook join; hooks are closures made in __init__."""
import torch
import torch.nn as nn


class StreamedLayers(nn.Module):
    def __init__(self, layers, host_params):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.host_params = [t.pin_memory() for t in host_params]
        self.slots = [torch.empty_like(t, device="cuda") for t in host_params]
        self.copy_stream = torch.cuda.Stream()
        n = len(self.layers)

        def pre_hook(mod, args):
            torch.cuda.current_stream().wait_stream(self.copy_stream)

        def make_post_hook(i):
            def post_hook(mod, args, out):
                nxt = (i + 1) % n
                self.copy_stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.copy_stream):
                    self.slots[nxt].copy_(self.host_params[nxt], non_blocking=True)
                return out
            return post_hook

        for i, layer in enumerate(self.layers):
            layer.register_forward_pre_hook(pre_hook)
            layer.register_forward_hook(make_post_hook(i))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
