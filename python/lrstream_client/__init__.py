"""Python client for lrstream: read rendered, collated LeRobot batches
from ``lrstream stream`` (pipe or file) or ``lrstream serve`` (Unix socket).

Needs only msgpack and numpy. The PyTorch wrapper
:class:`LRStreamDataset` imports torch lazily, on first use.
"""

from .reader import (
    Batch,
    ProtocolError,
    StreamError,
    StreamInterrupted,
    StreamReader,
    TruncatedStreamError,
    connect,
    decode_array,
    decode_batch_buffer,
    hello,
    read_stream,
)

__all__ = [
    "Batch",
    "LRStreamDataset",
    "ProtocolError",
    "StreamError",
    "StreamInterrupted",
    "StreamReader",
    "TruncatedStreamError",
    "connect",
    "decode_array",
    "decode_batch_buffer",
    "hello",
    "read_stream",
    "to_torch",
]

__version__ = "0.1.0"


def __getattr__(name):
    if name in ("LRStreamDataset", "to_torch"):
        from . import torch_dataset

        return getattr(torch_dataset, name)
    raise AttributeError(f"module 'lrstream_client' has no attribute {name!r}")
