"""Stand-in (tests/data/sglang_release/README.md)."""


class MultiprocessingSerializer:
    @staticmethod
    def serialize(obj):
        raise NotImplementedError("only the sharded_gpu mode serializes tensors")

    @staticmethod
    def deserialize(data):
        raise NotImplementedError("only the sharded_gpu mode serializes tensors")


def is_pin_memory_available():
    return True
