"""Stand-in (tests/data/sglang_release/README.md): only `_move_param_to_meta` (meta and sharded
modes) compares a parameter's type with it."""

import torch


class ModelWeightParameter(torch.nn.Parameter):
    pass
