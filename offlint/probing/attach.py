"""Attach the TARGET offloader to the synthetic model the way an inference engine does.

An orchestrator (SGLang's `OffloaderV2` shape) installs its own hooks: the probe constructs it,
hands it the layers (`wrap_modules`) and calls `post_init`, as SGLang's model runner does. A
module offloader (SGLang's `_ModuleOffloader` shape) gets the hooks SGLang's `OffloaderV2`
installs around it: the offloaded module's `forward` is replaced by one that waits for its
weights, runs `functional_call` with them, then prefetches the offloaded module `prefetch`
ahead with wrap-around (`(index + prefetch) % n`) and releases its own; `post_init` prefetches
the first `prefetch`. A module offloader with an end-of-forward join (what `offlint fix` writes
when no class owns the modules) has it called on every offloader after each model forward, as
the fix's note asks of the engine.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from offlint.probing.model import LayerStack
from offlint.probing.options import ModelConfig
from offlint.probing.target import ORCHESTRATOR, LoadedTarget, constructor_kwargs

# The only offloaded parameter of a synthetic layer.
WEIGHT = "weight"


@dataclass
class Attached:
    offloader: Any  # the orchestrator instance, or the list of module offloaders
    constructor: dict[str, str]  # the arguments it was built with, as text for the report


def _repr_args(kwargs: dict[str, Any]) -> dict[str, str]:
    return {
        name: type(value).__name__
        if isinstance(value, (nn.Module, torch.cuda.Stream))
        else repr(value)
        for name, value in kwargs.items()
    }


def _whole_layer(module: nn.Module) -> nn.Module:
    return module


def _weight_only(module: nn.Module) -> list[str]:
    return [WEIGHT]


def attach(
    target: LoadedTarget, model: LayerStack, config: ModelConfig, init_kwargs: dict[str, Any]
) -> Attached:
    if target.shape == ORCHESTRATOR:
        return _attach_orchestrator(target, model, config, init_kwargs)
    return _attach_module_offloaders(target, model, config, init_kwargs)


def _attach_orchestrator(
    target: LoadedTarget, model: LayerStack, config: ModelConfig, init_kwargs: dict[str, Any]
) -> Attached:
    known = {
        "group_size": config.offload_every,
        "num_in_group": 1,
        "prefetch_step": config.prefetch,
        "mode": "cpu",
    }
    kwargs = constructor_kwargs(target.cls, known, dict(init_kwargs))
    offloader = target.cls(**kwargs)
    assert target.methods.wrap is not None
    wrap = getattr(offloader, target.methods.wrap)
    parameters = inspect.signature(wrap).parameters
    wrap_kwargs: dict[str, Any] = {}
    if "submodule_accessor" in parameters:
        wrap_kwargs["submodule_accessor"] = _whole_layer
    if "whitelist_param_names_creator" in parameters:
        wrap_kwargs["whitelist_param_names_creator"] = _weight_only
    returned = wrap(list(model.layers), **wrap_kwargs)
    # SGLang builds its layer list from what wrap_modules returns; so does the probe.
    if (
        isinstance(returned, (list, tuple))
        and len(returned) == len(model.layers)
        and all(isinstance(module, nn.Module) for module in returned)
    ):
        model.layers = nn.ModuleList(returned)
    if target.methods.post_init is not None:
        getattr(offloader, target.methods.post_init)()
    return Attached(offloader, _repr_args(kwargs))


def _attach_module_offloaders(
    target: LoadedTarget, model: LayerStack, config: ModelConfig, init_kwargs: dict[str, Any]
) -> Attached:
    alt_stream = torch.cuda.Stream()
    modules = [model.layers[index] for index in config.offloaded_layers]
    offloaders = []
    kwargs: dict[str, Any] = {}
    for module in modules:
        known = {
            "module": module,
            "alt_stream": alt_stream,
            "whitelist_param_names": [WEIGHT],
            "mode": "cpu",
            "resident_parameter_ids": set(),
        }
        kwargs = constructor_kwargs(target.cls, known, dict(init_kwargs))
        offloaders.append(target.cls(**kwargs))

    methods = target.methods
    assert methods.prefetch is not None and methods.wait is not None
    for index, module in enumerate(modules):
        _hook_like_sglang(
            index,
            module,
            offloaders,
            config.prefetch,
            methods.prefetch,
            methods.wait,
            methods.release,
        )
    for offloader in offloaders:
        if methods.post_init is not None:
            getattr(offloader, methods.post_init)()
    for offloader in offloaders[: config.prefetch]:
        getattr(offloader, methods.prefetch)()
    if methods.join is not None:
        _join_after_every_forward(model, offloaders, methods.join)
    return Attached(offloaders, _repr_args(kwargs))


def _join_after_every_forward(model: nn.Module, offloaders: list[Any], join_method: str) -> None:
    """The engine's side of the end-of-forward join: after each forward of the whole model, inside
    whatever is being captured, every offloader joins the copies it still has pending."""

    def join(module: nn.Module, args: Any, output: Any) -> None:
        for offloader in offloaders:
            getattr(offloader, join_method)()

    model.register_forward_hook(join)


def _hook_like_sglang(
    index: int,
    module: nn.Module,
    offloaders: list[Any],
    prefetch: int,
    prefetch_method: str,
    wait_method: str,
    release_method: str | None,
) -> None:
    original_forward = module.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        # Restore the original while functional_call re-enters the module, as SGLang does.
        module.forward = original_forward
        tensors = getattr(offloaders[index], wait_method)()
        output = functional_call(module, tensors, args=args, kwargs=kwargs)
        getattr(offloaders[(index + prefetch) % len(offloaders)], prefetch_method)()
        if release_method is not None:
            getattr(offloaders[index], release_method)()
        module.forward = forward
        return output

    module.forward = forward
