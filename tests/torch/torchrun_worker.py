"""Run by tests/torch under `python3 -m torch.distributed.run` (env://):
init_process_group from the launcher's environment (backend ZT_BACKEND,
default "zccl"), a few checked collectives, then DistributedDataParallel on a
small model for some steps (1 MiB buckets, then PyTorch's default 25 MiB),
each rank on its slice of one global batch. The weights must be bitwise
identical across ranks and equal (within tolerance) to the same model trained
in one process on the whole batch; on zccl's activated memory, no byte may be
staged by zccl during training (buckets and parameters are zero-copy). With
ZT_EXPECT_HOSTS set, the ranks' hostnames must be that many (torchrun
--nnodes across hosts).
"""
import os
import socket

import torch
import torch.distributed as dist

try:
    import zt_harness
except ImportError:  # run outside the test tree
    zt_harness = None

STEPS = 5
BATCH = 16


def net():
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def main():
    backend = os.environ.get("ZT_BACKEND", "zccl")
    zccl_torch = None
    if "zccl" in backend:
        import zccl_torch

        if os.environ.get("ZT_ACTIVATED", "1") == "1":
            zccl_torch.use_activated_memory()
    dist.init_process_group(backend)  # env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank, n = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == backend, dist.get_backend()
    t = torch.full((1 << 12,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((1 << 12,), n * (n + 1) / 2.0)), t[:4]
    hosts = [None] * n
    dist.all_gather_object(hosts, socket.gethostname())
    want_hosts = int(os.environ.get("ZT_EXPECT_HOSTS", "0"))
    if want_hosts:
        assert len(set(hosts)) == want_hosts, "ranks on hosts %s, want %d hosts" % (
            hosts, want_hosts)

    g = torch.Generator().manual_seed(99)
    data = [(torch.randn(n * BATCH, 32, generator=g), torch.randn(n * BATCH, 4, generator=g))
            for _ in range(STEPS)]
    # One process on the whole batch: DDP's averaged gradients are its gradients.
    ref = net()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for x, y in data:
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
    want = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])

    pg = zccl_torch.backend_of() if zccl_torch else None
    staged = zt_harness.staged_bytes(pg) if (zt_harness and pg is not None) else None
    err = 0.0
    for bucket_mb in (1, None):
        err = max(err, train(rank, n, bucket_mb, data, want))
    if staged is not None and zccl_torch.activated_memory_enabled():
        more = zt_harness.staged_bytes(pg) - staged
        assert more == 0, "DDP on activated memory staged %d bytes" % more
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("torchrun: %d ranks on %d hosts (%s), DDP weights identical after %d steps and "
              "equal to one process (max diff %.2g), %s" % (
                  n, len(set(hosts)), backend, STEPS, err,
                  "staged bytes not read" if staged is None else "0 bytes staged"))


def train(rank, n, bucket_mb, data, want):
    model = net()
    kw = {} if bucket_mb is None else {"bucket_cap_mb": bucket_mb}
    ddp = torch.nn.parallel.DistributedDataParallel(model, **kw)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    lo, hi = rank * BATCH, (rank + 1) * BATCH
    for x, y in data:
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x[lo:hi]), y[lo:hi]).backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(n)]
    dist.all_gather(gathered, flat)
    for r in range(n):
        assert torch.equal(gathered[r], flat), "rank %d weights differ from rank %d" % (r, rank)
    err = (flat - want).abs().max().item()
    assert torch.allclose(flat, want, rtol=1e-4, atol=1e-5), (
        "DDP (buckets %s MiB) weights differ from the one-process run by %g" % (
            bucket_mb or 25, err))
    return err


if __name__ == "__main__":
    main()
