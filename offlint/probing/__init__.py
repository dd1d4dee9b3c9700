"""`offlint probe`: drive an offloader through a decode graph runner's life on a real GPU.

Nothing here imports libcst (the GPU images have none), and torch is imported only inside the
functions that need it, so `import offlint.cli` works without torch. Each scenario runs in its own
process (`python -m offlint.probing.worker`), so a CUDA context poisoned by one cannot spoil the
next.
"""
