"""The semantic core: facts computed from Python's own binding and calling rules.

Layers, each one concept (shared/DESIGN.md, "The semantic core"):

- `lowered`: every module, class body, function and lambda of a file lowered to a small closed
  set of instructions (copy, load, store, element load/store, call, with, return, yield), each
  call keeping its source position and the tests that guard it;
- `names`: dotted module names of the tree's files and what an import binds;
- `heap`: abstract objects by allocation site (streams, events, the current stream, host and
  device tensors, graphs, instances, functions, bound methods, partials, classes, modules) and
  the places that hold them, solved as inclusion constraints on a worklist; calls resolve on the
  fly from the callee's objects (`calls`);
- `summaries`: what each function does to those objects, composed over the call graph;
- `contexts`: which functions capture reaches, at which tier, through which calls.

The API and engine tables the layers read are data (`protocols/`). Nothing here compares a
user's identifier with a name or a pattern: a class is a module because `torch.nn.Module` is
among its bases, a call waits on an event because the receiver holds an event object.
"""
