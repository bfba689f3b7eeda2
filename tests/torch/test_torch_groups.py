"""new_group sub-groups on 4 ranks: disjoint, overlapping and one-rank
groups, interleaved with ops on the world group, on zero-copy tensors (the
allocator registers its range with every group's communicator).
Usage: test_torch_groups.py NRANKS (4)
"""
import sys

import torch
import torch.distributed as dist

import zt_harness


def main(rank, n):
    import zccl_torch

    c = zt_harness.Checker(rank)
    zccl_torch.use_activated_memory()
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    upper = dist.new_group([1, 2, 3])
    solo = [dist.new_group([r]) for r in range(n)]
    mine = pairs[rank // 2]
    for it in range(3):
        t = torch.full((1000,), float(rank + 1 + it))
        dist.all_reduce(t, group=mine)
        lo = (rank // 2) * 2
        c.equal("pair all_reduce it %d" % it, t, torch.full((1000,), float(2 * it + lo + lo + 3)))
        w = torch.full((5,), float(rank))
        dist.all_reduce(w)
        c.equal("world all_reduce it %d" % it, w, torch.full((5,), float(n * (n - 1) / 2)))
        if rank in (1, 2, 3):
            u = torch.full((300,), rank, dtype=torch.int64)
            dist.all_reduce(u, dist.ReduceOp.MAX, group=upper)
            c.equal("upper max it %d" % it, u, torch.full((300,), 3, dtype=torch.int64))
            outs = [torch.empty(2, dtype=torch.int32) for _ in range(3)]
            dist.all_gather(outs, torch.full((2,), rank, dtype=torch.int32), group=upper)
            for i, o in enumerate(outs):
                c.equal("upper all_gather %d" % i, o, torch.full((2,), i + 1, dtype=torch.int32))
            # broadcast from global rank 3 (group rank 2)
            b = torch.full((4,), float(rank))
            dist.broadcast(b, 3, group=upper)
            c.equal("upper broadcast", b, torch.full((4,), 3.0))
        s = torch.full((7,), float(rank))
        dist.all_reduce(s, group=solo[rank])
        c.equal("one-rank group", s, torch.full((7,), float(rank)))
        c.true("zero-copy tensor", zccl_torch.is_activated(t))
    # ranks outside a group get the non-member marker
    c.true("non-member", (upper == dist.GroupMember.NON_GROUP_MEMBER) == (rank == 0))
    c.true("pair size", dist.get_world_size(mine) == 2)
    c.finish()


if __name__ == "__main__":
    zt_harness.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 4)
