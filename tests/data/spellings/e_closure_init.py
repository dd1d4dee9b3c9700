import torch


class Offloader:
    def __init__(self, layers):
        self.stream = torch.cuda.Stream()
        self.events = {}
        for i, layer in enumerate(layers):
            def pre_hook(module, args, i=i):
                self.events[i].wait()  # expect: OFL101

            def post_hook(module, args, out, i=i):
                with torch.cuda.stream(self.stream):  # expect: OFL104
                    self.events[i + 1] = torch.cuda.Event()
                    self.events[i + 1].record()
                return out

            layer.register_forward_pre_hook(pre_hook)
            layer.register_forward_hook(post_hook)
