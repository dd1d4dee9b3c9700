"""Builds the model of one module, layer by layer: bindings and kinds (`model.py`), then the walk
of every function body (`walker.py`), then reachability (`reachability.py`). Each layer reads the
ones before it; this module is the only one that knows all three, so none of them imports another
that imports it back."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from offlint.analysis.model import ModuleModel
from offlint.analysis.program import ModelOptions
from offlint.analysis.reachability import mark_reachable
from offlint.analysis.torch_api import SEGMENTED_GRAPH_CONTEXTS
from offlint.analysis.walker import BodyWalker


def build_model(
    module: cst.Module,
    options: ModelOptions | None = None,
    *,
    source_of: Callable[[cst.CSTNode], str | None] | None = None,
    imports: Sequence[cst.Import | cst.ImportFrom] | None = None,
) -> ModuleModel:
    """The model every rule reads. `module` is a libcst tree or a skeleton (`skeleton.py`); for a
    skeleton, `source_of` gives a node's source text and `imports` its import statements."""
    model = ModuleModel(module, options, source_of=source_of, imports=imports)
    for fn in model.functions:
        BodyWalker(model, fn).walk()
    model.mark_offloader_classes()
    mark_reachable(model, model.options.capture_reachable, model.options.seeds)
    model.segmented_capture = (
        model.segmented_capture
        or any(fn.eager_break for fn in model.functions)
        or any(cls.name in SEGMENTED_GRAPH_CONTEXTS for cls in model.classes)
    )
    return model
