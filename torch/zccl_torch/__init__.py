"""zccl backend for torch.distributed (PyTorch 2.x).

``import zccl_torch`` registers the backend ``"zccl"`` for CPU tensors; then
``torch.distributed.init_process_group("zccl", ...)`` (or ``"cpu:zccl"``,
env://, tcp:// or a store) runs every collective on zccl. The root info
travels through the process group's store.

``zccl_torch.use_activated_memory()`` makes torch's CPU allocator serve
tensors from activated memory, so collectives on them are zero-copy. Call it
on every rank before ``init_process_group`` (or, later, on every rank at the
same point: it registers the range with each existing group collectively).

``torch.distributed.monitored_barrier`` refuses every backend but Gloo by
name; the backend implements it (``monitoredBarrier``), so importing this
package lets the function through for zccl groups too (the check is
otherwise unchanged).
"""
import functools

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

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
    "backend_of",
    "activated_memory_enabled",
    "allocator_stats",
    "is_activated",
    "use_activated_memory",
]


def backend_of(group=None):
    """The ProcessGroupZccl under a process group (the default one when None)."""
    pg = c10d._get_default_group() if group is None else group
    return pg._get_backend(torch.device("cpu"))


def _create_zccl(store, rank, size, timeout):
    return _C._create(store, rank, size, timeout)


def _is_zccl(group):
    try:
        return c10d.get_backend(group) in ("zccl", "cpu:zccl")
    except (ValueError, RuntimeError):
        return False


def _monitored_barrier_for(orig):
    @functools.wraps(orig)
    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        if not _is_zccl(group):
            return orig(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
        if c10d._rank_not_in_group(group):
            c10d._warn_not_in_group("monitored_barrier")
            return None
        if timeout is None:
            timeout = c10d._get_default_timeout("zccl")
        elif isinstance(timeout, float):
            import datetime

            timeout = datetime.timedelta(seconds=timeout)
        c10d._check_valid_timeout(timeout)
        pg = c10d._get_default_group() if group is None else group
        return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    monitored_barrier._zccl = True
    return monitored_barrier


if "ZCCL" not in dist.Backend._plugins:
    dist.Backend.register_backend("zccl", _create_zccl, devices=["cpu"])
    if not getattr(c10d.monitored_barrier, "_zccl", False):
        c10d.monitored_barrier = _monitored_barrier_for(c10d.monitored_barrier)
        dist.monitored_barrier = c10d.monitored_barrier
