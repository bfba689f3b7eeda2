"""zccl backend for torch.distributed.

``import zccl_torch`` registers the backend ``"zccl"``; then
``torch.distributed.init_process_group("zccl", ...)`` (env://, tcp:// or a
store) runs every collective on zccl. The root info travels through the
process group's store.

``zccl_torch.use_activated_memory()`` makes torch's CPU allocator serve
tensors from activated memory, so collectives on them are zero-copy. Call it
on every rank before ``init_process_group`` (or, later, on every rank at the
same point: it registers the range with each existing group collectively).
"""
import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C
from ._C import (  # noqa: F401
    ProcessGroupZccl,
    activated_memory_enabled,
    allocator_stats,
    is_activated,
    use_activated_memory,
)

__all__ = [
    "ProcessGroupZccl",
    "activated_memory_enabled",
    "allocator_stats",
    "is_activated",
    "use_activated_memory",
]


def _create_zccl(store, rank, size, timeout):
    return _C._create(store, rank, size, timeout)


if "ZCCL" not in dist.Backend._plugins:
    dist.Backend.register_backend("zccl", _create_zccl)
