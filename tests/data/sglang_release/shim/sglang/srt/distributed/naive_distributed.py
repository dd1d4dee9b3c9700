"""Stand-in (tests/data/sglang_release/README.md): the offloader's `cpu` mode never uses these."""


class NaiveDistributed:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("naive distributed: only the sharded_gpu and shm_cpu modes use it")


def get_naive_distributed():
    raise NotImplementedError("naive distributed: only the sharded_gpu and shm_cpu modes use it")


def set_naive_distributed(instance):
    raise NotImplementedError("naive distributed: only the sharded_gpu and shm_cpu modes use it")
