from .offloader import LayerOffloader

__all__ = ["LayerOffloader"]
