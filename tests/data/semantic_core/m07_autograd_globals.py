import torch

STREAMS = [torch.cuda.Stream()]
EVENTS = {"h2d": torch.cuda.Event()}


class OffloadFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, host):
        with torch.cuda.stream(STREAMS[0]):
            y = host.to("cuda", non_blocking=True)
            EVENTS["h2d"].record()
        EVENTS["h2d"].wait()
        return x + y

    @staticmethod
    def backward(ctx, g):
        return g, None
