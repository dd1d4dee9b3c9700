"""A module-offloader-shaped class with custom method names and a required constructor argument."""


class LayerLoader:
    def __init__(self, module, alt_stream, whitelist_param_names, budget_bytes):
        self.module = module
        self.budget_bytes = budget_bytes

    def fetch(self):
        pass

    def acquire(self):
        return {}

    def drop(self):
        pass
