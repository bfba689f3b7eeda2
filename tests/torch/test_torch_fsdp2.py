"""FSDP2 (torch.distributed.fsdp.fully_shard) on a CPU DeviceMesh: a small MLP
sharded per layer and as a whole, trained for a few SGD steps, each rank on
its slice of one global batch. Every step's loss (averaged over ranks) and
the final weights (unsharded with full_tensor) must equal those of the same
model trained in one process on the whole batch, within tolerance; the
parameters must be sharded (each rank's local share smaller than the whole).
On zccl every tensor lives in activated memory (zccl_torch.use_activated_memory,
before the model is made), so FSDP2's all-gathers of the shards and
reduce-scatters of the gradients run zero-copy: 0 bytes staged in training.
Usage: test_torch_fsdp2.py [NRANKS] [--backend zccl|gloo]
"""
import copy

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import zt_harness

STEPS = 5
BATCH_PER_RANK = 8
LR = 0.1


def model():
    torch.manual_seed(4321)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32),
                               torch.nn.Tanh(), torch.nn.Linear(32, 4))


def batches(n):
    g = torch.Generator().manual_seed(77)
    return [(torch.randn(n * BATCH_PER_RANK, 16, generator=g),
             torch.randn(n * BATCH_PER_RANK, 4, generator=g)) for _ in range(STEPS)]


def main(rank, n):
    c = zt_harness.Checker(rank)
    pg = None
    if dist.get_backend() == "zccl":
        import zccl_torch

        zccl_torch.use_activated_memory()  # collective: every rank at the same point
        pg = zccl_torch.backend_of()
    data = batches(n)
    # The one-process run: the whole batch, no communication.
    ref = model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=LR)
    ref_losses = []
    for x, y in data:
        ref_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ref(x), y)
        loss.backward()
        ref_opt.step()
        ref_losses.append(loss.item())

    mesh = init_device_mesh("cpu", (n,))
    m = model()
    full_before = copy.deepcopy(m)
    for layer in m:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    local = sum(p.to_local().numel() for p in m.parameters())
    whole = sum(p.numel() for p in full_before.parameters())
    c.true("parameters sharded (%d of %d local)" % (local, whole), local < whole)
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    staged0 = zt_harness.staged_bytes(pg) if pg is not None else None
    lo, hi = rank * BATCH_PER_RANK, (rank + 1) * BATCH_PER_RANK
    for step, (x, y) in enumerate(data):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(m(x[lo:hi]), y[lo:hi])
        loss.backward()  # reduce-scatter of the gradients (averaged)
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= n
        c.close("step %d loss" % step, mean, torch.tensor(ref_losses[step]), rtol=1e-4,
                atol=1e-5)
    if staged0 is not None:
        more = zt_harness.staged_bytes(pg) - staged0
        c.true("FSDP2 on activated memory staged %d bytes in training" % more, more == 0)
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        c.close("weights %s after %d steps" % (name, STEPS), p.full_tensor(), q.detach(),
                rtol=1e-4, atol=1e-5)
    # Training moved the weights (a no-op step would pass the loss check only at step 0).
    moved = max((p.detach() - q.detach()).abs().max().item()
                for p, q in zip(ref.parameters(), full_before.parameters()))
    c.true("weights moved (%.3g)" % moved, moved > 1e-3)
    if rank == 0:
        print("losses", ["%.5f" % v for v in ref_losses])
    c.finish()


if __name__ == "__main__":
    a = zt_harness.parse_args(2)
    zt_harness.run(main, a.nranks, backend=a.backend)
