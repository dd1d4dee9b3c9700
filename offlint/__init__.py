"""offlint: find and fix CUDA-graph capture hazards in PyTorch weight offloaders."""

__version__ = "0.2.0"
