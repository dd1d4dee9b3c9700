"""Tables of the APIs the core models: PyTorch's (`torch`), and the interfaces serving engines
call inside their CUDA graph captures (`engines`). Data, not logic."""
