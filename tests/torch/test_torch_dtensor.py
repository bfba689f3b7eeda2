"""DTensor on a CPU DeviceMesh over the group's backend: init_device_mesh("cpu")
(1-D over every rank, and 2-D when the rank count allows), distribute_tensor
with Shard(0) / Shard(1) / Replicate, each rank's local shard, redistribute
Shard -> Replicate (an all-gather) and Partial -> Replicate (an all-reduce),
Replicate -> Shard, full_tensor, and matmuls (row-sharded x replicated,
column-sharded x row-sharded, whose result is Partial) against the same
computation on whole tensors.
Usage: test_torch_dtensor.py [NRANKS] [--backend zccl|gloo]
"""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

import zt_harness


def whole(seed, *shape):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def main(rank, n):
    c = zt_harness.Checker(rank)
    mesh = init_device_mesh("cpu", (n,))
    c.true("mesh backend is the group's", dist.get_backend(mesh.get_group()) ==
           dist.get_backend())
    rows, cols = 3 * n, 2 * n + 1
    a = whole(1, rows, cols)
    b = whole(2, cols, 5)

    # Shard(0): each rank holds rows [rank*3, rank*3+3).
    da = distribute_tensor(a, mesh, [Shard(0)])
    c.equal("Shard(0) local", da.to_local(), a.chunk(n, 0)[rank])
    rep = da.redistribute(mesh, [Replicate()])
    c.equal("Shard(0) -> Replicate", rep.to_local(), a)
    c.equal("full_tensor", da.full_tensor(), a)
    # Uneven Shard(1): 2n+1 columns over n ranks.
    db1 = distribute_tensor(a, mesh, [Shard(1)])
    pieces = torch.chunk(a, n, 1)  # DTensor shards as torch.chunk does
    c.equal("Shard(1) uneven local", db1.to_local(),
            pieces[rank] if rank < len(pieces) else a[:, :0])
    c.equal("Shard(1) -> Replicate", db1.redistribute(mesh, [Replicate()]).to_local(), a)
    # Replicate -> Shard(0) is local (no traffic) and must still be right.
    back = rep.redistribute(mesh, [Shard(0)])
    c.equal("Replicate -> Shard(0)", back.to_local(), a.chunk(n, 0)[rank])

    # Partial -> Replicate: every rank's local value summed.
    part = DTensor.from_local(torch.full((4, 3), float(rank + 1)), mesh, [Partial()])
    c.equal("Partial -> Replicate", part.redistribute(mesh, [Replicate()]).to_local(),
            torch.full((4, 3), n * (n + 1) / 2.0))

    # Matmuls against the whole computation.
    want = a @ b
    db = distribute_tensor(b, mesh, [Replicate()])
    out = torch.mm(da, db)  # Shard(0) x Replicate -> Shard(0)
    c.true("row-sharded matmul placement", out.placements[0].is_shard(0))
    c.close("row-sharded matmul", out.full_tensor(), want)
    a_cols = distribute_tensor(a[:, :2 * n], mesh, [Shard(1)])
    b_rows = distribute_tensor(b[:2 * n], mesh, [Shard(0)])
    out2 = torch.mm(a_cols, b_rows)  # contraction over the sharded dim: Partial
    c.true("col x row matmul is partial", out2.placements[0].is_partial())
    c.close("col x row matmul (all-reduce)", out2.redistribute(mesh, [Replicate()]).to_local(),
            a[:, :2 * n] @ b[:2 * n])
    # Autograd through the sharded matmul: the weight's gradient.
    w = distribute_tensor(b.clone().requires_grad_(True), mesh, [Replicate()])
    w_local = b.clone().requires_grad_(True)
    torch.mm(da, w).sum().backward()
    (a @ w_local).sum().backward()
    c.close("matmul weight grad", w.grad.full_tensor(), w_local.grad)

    if n >= 4 and n % 2 == 0:
        mesh2 = init_device_mesh("cpu", (2, n // 2), mesh_dim_names=("dp", "tp"))
        d2 = distribute_tensor(a, mesh2, [Shard(0), Shard(1)])
        c.equal("2-D mesh full_tensor", d2.full_tensor(), a)
        c.equal("2-D mesh Shard,Shard -> Replicate,Shard", d2.redistribute(
            mesh2, [Replicate(), Shard(1)]).to_local(), torch.chunk(a, n // 2, 1)[
                mesh2.get_local_rank("tp")])
    c.finish()


if __name__ == "__main__":
    a = zt_harness.parse_args(2)
    zt_harness.run(main, a.nranks, backend=a.backend)
