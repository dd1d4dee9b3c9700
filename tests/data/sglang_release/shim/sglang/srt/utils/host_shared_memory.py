"""Stand-in (tests/data/sglang_release/README.md): only the shm_cpu mode uses these."""


class HostSharedMemoryManager:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("host shared memory: only the shm_cpu mode uses it")


def get_host_shared_memory_manager():
    raise NotImplementedError("host shared memory: only the shm_cpu mode uses it")


def set_host_shared_memory_manager(instance):
    raise NotImplementedError("host shared memory: only the shm_cpu mode uses it")
