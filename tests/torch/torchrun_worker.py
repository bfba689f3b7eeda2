"""Run by tests/torch under `python3 -m torch.distributed.run` (env://):
init_process_group("zccl") from the launcher's environment, a few checked
collectives, then DistributedDataParallel on a small model for some steps
(1 MiB buckets, then PyTorch's default 25 MiB) with weights compared across
ranks (they must be bitwise identical) and, on activated memory, no byte
staged by zccl during training (buckets and parameters are zero-copy).
"""
import os

import torch
import torch.distributed as dist

import zccl_torch

try:
    import zt_harness
except ImportError:  # run outside the test tree
    zt_harness = None


def main():
    if os.environ.get("ZT_ACTIVATED", "1") == "1":
        zccl_torch.use_activated_memory()
    dist.init_process_group("zccl")  # env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank, n = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "zccl", dist.get_backend()
    t = torch.full((1 << 12,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((1 << 12,), n * (n + 1) / 2.0)), t[:4]

    backend = zccl_torch.backend_of()
    staged = zt_harness.staged_bytes(backend) if zt_harness else None
    for bucket_mb in (1, None):
        train(rank, n, bucket_mb)
    if staged is not None and zccl_torch.activated_memory_enabled():
        more = zt_harness.staged_bytes(backend) - staged
        assert more == 0, "DDP on activated memory staged %d bytes" % more
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("torchrun: %d ranks, DDP weights identical after 5 steps, %s" % (
            n, "staged bytes not read" if staged is None else "0 bytes staged"))


def train(rank, n, bucket_mb):
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    kw = {} if bucket_mb is None else {"bucket_cap_mb": bucket_mb}
    ddp = torch.nn.parallel.DistributedDataParallel(model, **kw)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(99 + rank)
    for _ in range(5):
        x = torch.randn(16, 32, generator=g)
        y = torch.randn(16, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(n)]
    dist.all_gather(gathered, flat)
    for r in range(n):
        assert torch.equal(gathered[r], flat), "rank %d weights differ from rank %d" % (r, rank)


if __name__ == "__main__":
    main()
