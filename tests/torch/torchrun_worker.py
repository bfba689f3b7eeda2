"""Run by tests/torch under `python3 -m torch.distributed.run` (env://):
init_process_group("zccl") from the launcher's environment, a few checked
collectives, then DistributedDataParallel on a small model for some steps
with weights compared across ranks (they must be bitwise identical).
"""
import os

import torch
import torch.distributed as dist

import zccl_torch


def main():
    if os.environ.get("ZT_ACTIVATED", "1") == "1":
        zccl_torch.use_activated_memory()
    dist.init_process_group("zccl")  # env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank, n = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "zccl", dist.get_backend()
    t = torch.full((1 << 12,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((1 << 12,), n * (n + 1) / 2.0)), t[:4]

    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
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
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("torchrun: %d ranks, DDP weights identical after 5 steps" % n)


if __name__ == "__main__":
    main()
