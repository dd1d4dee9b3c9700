"""Two orchestrator-shaped classes: loading this file without naming one is ambiguous."""


class FirstOffloader:
    def wrap_modules(self, all_modules):
        return list(all_modules)


class SecondOffloader:
    def wrap_modules(self, all_modules):
        return list(all_modules)
