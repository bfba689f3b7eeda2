"""Functional collectives (torch.distributed._functional_collectives, the
layer DTensor and torch.compile use): all_reduce (sum, avg, max, min),
all_gather_tensor (dims 0 and 1; all_gather_single in 2.13),
reduce_scatter_tensor (sum, avg; dims 0 and 1; reduce_scatter_single), all_to_all_single (equal and unequal splits), each on float32, bfloat16
and int64 where the op allows, on the world group (by object and by name)
and on a sub-group, every
result checked against the value computed locally.
Usage: test_torch_functional.py [NRANKS] [--backend zccl|gloo]
"""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import zt_harness

DTYPES = (torch.float32, torch.bfloat16, torch.int64)
# 2.13 names all_gather_tensor and reduce_scatter_tensor *_single (the old names
# are deprecated aliases).
ALL_GATHER = getattr(funcol, "all_gather_single", None) or funcol.all_gather_tensor
REDUCE_SCATTER = getattr(funcol, "reduce_scatter_single", None) or funcol.reduce_scatter_tensor


def value(r, shape, dtype, salt=0):
    """Rank r's input: small integers, exact in every dtype and sum."""
    n = 1
    for s in shape:
        n *= s
    return ((torch.arange(n) * 7 + r * 3 + salt) % 11 - 5).reshape(shape).to(dtype)


def tol(dtype):
    return {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {"rtol": 1e-6, "atol": 1e-6}


def check_group(c, rank, ranks, group, tag):
    n = len(ranks)
    me = ranks.index(rank)
    for dtype in DTYPES:
        what = "%s %s" % (tag, str(dtype).replace("torch.", ""))
        ins = [value(r, (n * 2, 3), dtype) for r in range(n)]
        stack = torch.stack([t.to(torch.float64) for t in ins])
        # all_reduce
        for op in ("sum", "avg", "max", "min"):
            if op == "avg" and not dtype.is_floating_point:
                continue
            got = funcol.all_reduce(ins[me], op, group).wait()
            want = {"sum": stack.sum(0), "avg": stack.mean(0), "max": stack.max(0).values,
                    "min": stack.min(0).values}[op].to(dtype)
            if op == "avg":  # the rounding of a mean may differ between backends
                c.close("%s all_reduce avg" % what, got, want, **tol(dtype))
            else:
                c.equal("%s all_reduce %s" % (what, op), got, want)
            c.equal("%s all_reduce %s leaves its input" % (what, op), ins[me],
                    value(me, (n * 2, 3), dtype))
        # all_gather_tensor along dims 0 and 1
        for dim in (0, 1):
            got = ALL_GATHER(ins[me], dim, group)
            got = funcol.wait_tensor(got)
            c.equal("%s all_gather_tensor dim %d" % (what, dim), got, torch.cat(ins, dim))
        # reduce_scatter_tensor along dims 0 and 1
        for op in ("sum", "avg"):
            if op == "avg" and not dtype.is_floating_point:
                continue
            for dim in (0, 1):
                x = ins[me] if dim == 0 else ins[me].t().contiguous()
                full = stack.sum(0) if op == "sum" else stack.mean(0)
                if dim == 1:
                    full = full.t()
                want = full.chunk(n, dim)[me].to(dtype)
                got = REDUCE_SCATTER(x, op, dim, group).wait()
                name = "%s reduce_scatter_tensor %s dim %d" % (what, op, dim)
                if op == "avg":
                    c.close(name, got, want, **tol(dtype))
                else:
                    c.equal(name, got, want)
        # all_to_all_single: equal splits, then rank r sends r + j + 1 rows to rank j
        rows = [value(r, (n * 2, 3), dtype, salt=1) for r in range(n)]
        got = funcol.all_to_all_single(rows[me], None, None, group).wait()
        want = torch.cat([rows[j].chunk(n)[me] for j in range(n)])
        c.equal("%s all_to_all_single equal" % what, got, want)

        def split(r):
            return [r + j + 1 for j in range(n)]

        src = [value(r, (sum(split(r)), 2), dtype, salt=2) for r in range(n)]
        out_splits = [split(j)[me] for j in range(n)]
        got = funcol.all_to_all_single(src[me], out_splits, split(me), group).wait()
        want = torch.cat([src[j].split(split(j))[me] for j in range(n)])
        c.equal("%s all_to_all_single unequal" % what, got, want)


def main(rank, n):
    c = zt_harness.Checker(rank)
    world = list(range(n))
    check_group(c, rank, world, dist.group.WORLD, "world")
    # By group name (how DTensor and compiled code name a group) and a
    # sub-group of all ranks but the last.
    check_group(c, rank, world, dist.group.WORLD.group_name, "group name")
    sub = world[:-1]
    g = dist.new_group(sub)
    if rank in sub:
        check_group(c, rank, sub, g, "sub-group")
    c.finish()


if __name__ == "__main__":
    a = zt_harness.parse_args(2)
    zt_harness.run(main, a.nranks, backend=a.backend)
