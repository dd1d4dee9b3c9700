"""`offlint fix`'s output for fixtures/group_offload_record_stream.py: one `ModuleGroup` (the
class the fix rewrote, not the fixture's hand-fixed `FixedModuleGroup`) per offloaded layer,
offloaded once at start-up (the weights then live in the group's pinned host copies), and its
`GroupOffloadingHook` installed: each forward onloads the group on its side stream, records the
onloaded weight on the consumer stream and joins, and the post-forward hook offloads again.

`build(fixed=PATH)`; the probe's `--init-arg` values are the other keyword arguments.
"""

from __future__ import annotations

from fixed_entry_stack import load_fixed, probed, stack

from offlint.probing.entry import ProbedModel

GROUP = "ModuleGroup"
HOOK = "GroupOffloadingHook"


def build(
    fixed: str, layers: int = 8, hidden: int = 1024, every: int = 2, dtype: str = "bfloat16"
) -> ProbedModel:
    module = load_fixed(fixed)
    built = stack(layers, hidden, every, dtype)
    groups = []
    for index in built.offloaded:
        group = getattr(module, GROUP)([built.model.layers[index]], onload_device=str(built.device))
        group.offload_()
        getattr(module, HOOK)(group).install()
        groups.append(group)
    built.model._groups = groups  # kept alive with the model
    first = built.model.layers[built.offloaded[0]].get_parameter("weight")
    return probed(
        built,
        built.model,
        host_of_first=lambda: groups[0].cpu_param_dict[first],
        name="group offloading with record_stream",
    )
