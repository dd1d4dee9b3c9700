"""What a scenario drives: a model with offloading installed, its inputs and what it must compute.

Two kinds, one interface:

- `SyntheticSubject`: the probe's own layer stack (model.py) with a TARGET offloader class
  attached the way an engine attaches it (attach.py), checked against the all-on-GPU stack;
- `EntrySubject`: the user's own model from `--entry` (entry.py), checked against its
  `reference`, or against a second eager forward of the model when there is none.

Inputs may be a tensor, a tuple of positional arguments or a dict of keyword arguments; outputs
a tensor or any nesting of tuples, lists and dicts of tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from offlint.probing.attach import WEIGHT, attach
from offlint.probing.entry import ProbedModel, load_entry, normalize
from offlint.probing.model import (
    TORCH_DTYPES,
    build_stack,
    make_weights,
    random_input,
    relative_error,
)
from offlint.probing.spec import ScenarioSpec
from offlint.probing.target import LoadedTarget, load_target


def call(model: Callable[..., Any], inputs: Any) -> Any:
    if isinstance(inputs, tuple):
        return model(*inputs)
    if isinstance(inputs, dict):
        return model(**inputs)
    return model(inputs)


def tensors_of(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_of(item)]
    if isinstance(value, dict):
        return [t for key in sorted(value, key=str) for t in tensors_of(value[key])]
    return []


def copy_into(static: Any, fresh: Any) -> None:
    """Copy the tensors of `fresh` into the graph's static inputs, in place."""
    for target, source in zip(tensors_of(static), tensors_of(fresh), strict=True):
        target.copy_(source)


def output_error(output: Any, expected: Any) -> tuple[float, bool]:
    """(relative error over all output tensors together, bit-exact)."""
    got, want = tensors_of(output), tensors_of(expected)
    if len(got) != len(want) or not got:
        return float("inf"), False
    if len(got) == 1:
        return relative_error(got[0], want[0]), bool(torch.equal(got[0], want[0]))
    flat_got = torch.cat([t.detach().float().reshape(-1) for t in got])
    flat_want = torch.cat([t.detach().float().reshape(-1) for t in want])
    exact = all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    return relative_error(flat_got, flat_want), exact


def host_tensor_entries(named: list[tuple[str, torch.Tensor]]) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "device": str(tensor.device),
            "pinned": bool(tensor.is_pinned()),
            "bytes": tensor.numel() * tensor.element_size(),
        }
        for name, tensor in named
        if tensor.device.type == "cpu"
    ]


class SyntheticSubject:
    """The layer stack with a TARGET offloader attached (the classic probe)."""

    shape_key = "target_shape"

    def __init__(self, spec: ScenarioSpec, device: torch.device):
        self.spec = spec
        self.config = spec.model
        self.device = device
        self.dtype = TORCH_DTYPES[spec.model.dtype]
        self.target: LoadedTarget = load_target(spec.target, spec.methods)
        self.label = self.target.label
        self.shape = self.target.shape
        self.source_file = self.target.source_file
        self.batch_sizes = self.config.batch_sizes
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(spec.seed)
        self.weights = make_weights(
            self.config.layers, self.config.hidden, self.dtype, device, self.generator
        )
        self.reference: Callable[..., Any] | None = build_stack(self.weights).to(device)
        self.model: Any = None
        self.offloader: Any = None
        self.constructor: dict[str, str] = {}
        self.expected_copies: int | None = None

    @property
    def target_files(self) -> list[str]:
        return [self.source_file] if self.source_file else []

    def attach(self) -> None:
        self.model = build_stack(self.weights).to(self.device)
        attached = attach(self.target, self.model, self.config, dict(self.spec.init_kwargs))
        self.constructor = attached.constructor
        self.offloader = attached.offloader

    def make_input(self, batch: int) -> Any:
        return random_input(batch, self.config.hidden, self.dtype, self.device, self.generator)

    def expected(self, inputs: Any) -> Any:
        assert self.reference is not None
        return call(self.reference, inputs)

    def host_weights(self) -> list[dict[str, Any]]:
        host = []
        for index, layer in enumerate(self.model.layers):
            weight = layer.get_parameter(WEIGHT)
            if weight.device != self.device:
                host.append(
                    {
                        "layer": index,
                        "device": str(weight.device),
                        "pinned": bool(weight.device.type == "cpu" and weight.is_pinned()),
                        "bytes": weight.numel() * weight.element_size(),
                    }
                )
        return host

    def probe_bytes(self) -> int:
        return int(self.weights[0].numel() * self.weights[0].element_size())

    def update_weights(self) -> dict[str, Any]:
        """Write new values into the first offloaded layer's host weight, in place, as a weight
        update must (rebinding would leave the graphs reading the old storage)."""
        layer_index = self.config.offloaded_layers[0]
        weight = self.model.layers[layer_index].get_parameter(WEIGHT)
        if weight.device.type != "cpu":
            return {
                "layer": layer_index,
                "applied": False,
                "why": f"the offloaded weight lives on {weight.device}, not in host memory",
            }
        new_weight = make_weights(1, self.config.hidden, self.dtype, self.device, self.generator)[0]
        torch.cuda.synchronize()  # no copy of the old values may still be reading the host buffer
        weight.copy_(new_weight.cpu())
        assert isinstance(self.reference, nn.Module)
        self.reference.get_submodule(f"layers.{layer_index}").get_parameter(WEIGHT).copy_(
            new_weight
        )
        torch.cuda.synchronize()
        return {"layer": layer_index, "applied": True}

    def fresh(self) -> tuple[Any, Any]:
        """A newly attached model (for the compile check) and what keeps its offloader alive."""
        model = build_stack(self.weights).to(self.device)
        attached = attach(self.target, model, self.config, dict(self.spec.init_kwargs))
        return model, attached


class EntrySubject:
    """The user's model from `--entry`."""

    shape_key = "target_shape"

    def __init__(self, spec: ScenarioSpec, device: torch.device):
        self.spec = spec
        self.device = device
        self.entry = load_entry(spec.target)
        self.label = self.entry.label
        self.shape = "entry"
        self.source_file = self.entry.source_file
        torch.manual_seed(spec.seed)
        self.probed: ProbedModel = self._build()
        if self.probed.name:
            self.label = f"{self.label} ({self.probed.name})"
        given = spec.batch_sizes_given or self.probed.batch_sizes is None
        self.batch_sizes = spec.model.batch_sizes if given else self.probed.batch_sizes
        self.reference = self.probed.reference
        self.model: Any = self.probed.model
        self.expected_copies = self.probed.expected_copies
        self.constructor = {name: repr(value) for name, value in spec.init_kwargs.items()}

    def _build(self) -> ProbedModel:
        return normalize(self.entry.function(**dict(self.spec.init_kwargs)), self.label)

    @property
    def target_files(self) -> list[str]:
        # Only the entry's own file: a failure elsewhere is found as the innermost frame of
        # the user's code (cuda_errors.triggering_line).
        return [self.source_file] if self.source_file else []

    def attach(self) -> None:
        """Nothing to attach: build() installed the user's offloading."""

    def make_input(self, batch: int) -> Any:
        return self.probed.make_inputs(batch)

    def expected(self, inputs: Any) -> Any:
        if self.reference is not None:
            return call(self.reference, inputs)
        return call(self.model, inputs)

    def host_weights(self) -> list[dict[str, Any]]:
        named: list[tuple[str, torch.Tensor]] = [
            (f"host_tensors[{index}]", tensor)
            for index, tensor in enumerate(self.probed.host_tensors)
        ]
        if not named and isinstance(self.model, nn.Module):
            named = [
                *self.model.named_parameters(remove_duplicate=True),
                *self.model.named_buffers(remove_duplicate=True),
            ]
        return host_tensor_entries(named)

    def probe_bytes(self) -> int:
        sizes = [entry["bytes"] for entry in self.host_weights()]
        return int(max(sizes)) if sizes else 32 * 2**20

    def update_weights(self) -> dict[str, Any]:
        if self.probed.update_weights is None:
            return {"applied": False, "why": "build() gave no update_weights"}
        torch.cuda.synchronize()
        what = self.probed.update_weights()
        torch.cuda.synchronize()
        return {"applied": True, **({"what": str(what)} if what is not None else {})}

    def fresh(self) -> tuple[Any, Any]:
        probed = self._build()
        return probed.model, probed
