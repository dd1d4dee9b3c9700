"""Stand-in (tests/data/sglang_release/README.md): what OffloaderV2's `cpu` mode reads from
SGLang's runtime context, with the values of a single-GPU server."""

from types import SimpleNamespace

import torch

_streams: dict = {}


def get_parallel():
    # a single-GPU server without a data-parallel controller (the adapter sets the same with
    # SGLang's own `get_parallel().override_permanently(dp_rank=None, num_dp_ranks=1)`)
    return SimpleNamespace(dp_rank=None, num_dp_ranks=1, tp_size=1)


def get_stream(name):
    # SGLang's runtime context makes one CUDA stream per name, on first use
    if name not in _streams:
        _streams[name] = torch.cuda.Stream()
    return _streams[name]


def get_exec():
    raise NotImplementedError("get_exec: the probe constructs OffloaderV2 itself")
