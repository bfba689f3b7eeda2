"""Every collective x dtype x op against a serial reference, on zero-copy
tensors (the activated allocator) and buffered ones (numpy-owned memory),
in-place and out-of-place, contiguous and strided; async works, futures,
and the errors for what zccl refuses. Usage: test_torch_colls.py NRANKS
"""
import os
import sys
import threading
import zlib

import numpy as np
import torch
import torch.distributed as dist

import zt_harness

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def seed_of(*parts):
    """A seed every rank computes alike (hash() of a dtype differs by process)."""
    return zlib.crc32(repr(parts).encode()) % 100000


def ops_for(dtype):
    names = ["sum", "product", "min", "max"]
    if dtype.is_floating_point:
        names.append("avg")
    return names


def data(rank, dtype, n, seed, op="sum"):
    """Rank rank's input: small integers, so every reduction is exact."""
    g = torch.Generator().manual_seed(seed * 131 + rank * 7 + 1)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    lo, hi = (1, 3) if op == "product" else ((0, 4) if dtype == torch.uint8 else (-3, 4))
    return torch.randint(lo, hi, (n,), generator=g).to(dtype)


def reference(inputs, op, nranks):
    x = torch.stack(inputs)
    dtype = x.dtype
    if dtype == torch.bool:
        return x.any(0) if op in ("sum", "max") else x.all(0)
    acc = x[0].clone()
    for r in range(1, nranks):
        if op in ("sum", "avg"):
            acc = acc + x[r]
        elif op == "product":
            acc = acc * x[r]
        elif op == "min":
            acc = torch.minimum(acc, x[r])
        else:
            acc = torch.maximum(acc, x[r])
    return acc / nranks if op == "avg" else acc


class Maker:
    """Tensors of one kind: zero-copy (activated allocator) or buffered."""

    def __init__(self, zero_copy):
        self.zero_copy = zero_copy

    def like(self, t):
        if self.zero_copy:
            out = torch.empty(t.shape, dtype=t.dtype)
        elif t.dtype == torch.bfloat16:
            # numpy has no bfloat16: int16 storage viewed as bfloat16
            out = torch.from_numpy(np.zeros(t.shape, dtype=np.int16)).view(torch.bfloat16)
        else:
            npdt = torch.empty(0, dtype=t.dtype).numpy().dtype
            out = torch.from_numpy(np.zeros(t.shape, dtype=npdt))
        out.copy_(t)
        return out

    def empty(self, shape, dtype):
        return self.like(torch.zeros(shape, dtype=dtype))


def check_kind(c, mk, zero_copy):
    import zccl_torch

    probe = mk.empty((1024,), torch.float32)
    c.true("zero_copy=%s: is_activated(probe) is %s" % (zero_copy, zero_copy),
           zccl_torch.is_activated(probe) == zero_copy)


def t_allreduce(c, rank, n, mk, tag):
    count = 37
    for dt in DTYPES:
        for op in ops_for(dt):
            seed = seed_of(dt, op)
            ins = [data(r, dt, count, seed, op) for r in range(n)]
            want = reference(ins, op, n)
            t = mk.like(ins[rank])
            dist.all_reduce(t, OPS[op])
            c.equal("%s all_reduce %s %s" % (tag, dt, op), t, want)
    # strided (a transposed view) and a zero-element tensor
    base = [data(r, torch.float32, 6 * 5, 3).view(6, 5) for r in range(n)]
    t = mk.like(base[rank]).t()
    dist.all_reduce(t)
    c.equal("%s all_reduce strided" % tag, t, reference([b.t() for b in base], "sum", n))
    z = mk.empty((0,), torch.float32)
    dist.all_reduce(z)
    c.true("%s all_reduce of 0 elements" % tag, z.numel() == 0)


def t_coalesced(c, rank, n, mk, tag):
    shapes = [(3,), (4, 2), (1,), (5,)]
    ins = [[data(r, torch.float32, int(np.prod(s)), 11 + i).view(s) for i, s in
            enumerate(shapes)] for r in range(n)]
    ts = [mk.like(x) for x in ins[rank]]
    dist.all_reduce_coalesced(ts)
    for i, t in enumerate(ts):
        c.equal("%s all_reduce_coalesced %d" % (tag, i), t,
                reference([ins[r][i] for r in range(n)], "sum", n))


def t_broadcast_reduce(c, rank, n, mk, tag):
    for dt in DTYPES:
        for root in range(n):
            ins = [data(r, dt, 19, root) for r in range(n)]
            t = mk.like(ins[rank])
            dist.broadcast(t, root)
            c.equal("%s broadcast %s root %d" % (tag, dt, root), t, ins[root])
        for op in ops_for(dt):
            root = seed_of(dt, op) % n
            ins = [data(r, dt, 23, 5, op) for r in range(n)]
            t = mk.like(ins[rank])
            dist.reduce(t, root, OPS[op])
            if rank == root:
                c.equal("%s reduce %s %s root %d" % (tag, dt, op, root), t,
                        reference(ins, op, n))
    base = data(0, torch.int32, 40, 9).view(8, 5)
    t = mk.like(base if rank == 1 % n else torch.zeros_like(base))[::2]
    dist.broadcast(t, 1 % n)
    c.equal("%s broadcast strided" % tag, t, base[::2])


def t_gathers(c, rank, n, mk, tag):
    for dt in DTYPES:
        ins = [data(r, dt, 13, 2) for r in range(n)]
        outs = [mk.empty((13,), dt) for _ in range(n)]
        dist.all_gather(outs, mk.like(ins[rank]))
        for r in range(n):
            c.equal("%s all_gather %s from %d" % (tag, dt, r), outs[r], ins[r])
        # into one tensor, out-of-place and in-place (input is this rank's slot)
        flat = mk.empty((n * 13,), dt)
        dist._all_gather_base(flat, mk.like(ins[rank]))
        c.equal("%s _all_gather_base %s" % (tag, dt), flat, torch.cat(ins))
        flat = mk.empty((n * 13,), dt)
        flat[rank * 13:(rank + 1) * 13] = ins[rank]
        dist._all_gather_base(flat, flat[rank * 13:(rank + 1) * 13])
        c.equal("%s _all_gather_base in-place %s" % (tag, dt), flat, torch.cat(ins))
        for root in {0, n - 1}:
            outs = [mk.empty((13,), dt) for _ in range(n)] if rank == root else None
            dist.gather(mk.like(ins[rank]), outs, dst=root)
            if rank == root:
                for r in range(n):
                    c.equal("%s gather %s root %d from %d" % (tag, dt, root, r), outs[r],
                            ins[r])
            chunks = [data(r, dt, 7, 40 + root) for r in range(n)]
            out = mk.empty((7,), dt)
            dist.scatter(out, [mk.like(x) for x in chunks] if rank == root else None,
                         src=root)
            c.equal("%s scatter %s root %d" % (tag, dt, root), out, chunks[rank])
    # strided outputs of all_gather
    big = mk.empty((n, 6), torch.float64)
    outs = [big[r, ::2] for r in range(n)]
    ins = [data(r, torch.float64, 3, 77) for r in range(n)]
    dist.all_gather(outs, mk.like(ins[rank]))
    for r in range(n):
        c.equal("%s all_gather strided %d" % (tag, r), big[r, ::2], ins[r])


def t_reduce_scatter(c, rank, n, mk, tag):
    m = 9
    for dt in DTYPES:
        for op in ops_for(dt):
            seed = seed_of(dt, op, "rs")
            full = [data(r, dt, n * m, seed, op) for r in range(n)]
            want = reference(full, op, n)[rank * m:(rank + 1) * m]
            out = mk.empty((m,), dt)
            dist.reduce_scatter(out, [mk.like(x) for x in full[rank].split(m)], OPS[op])
            c.equal("%s reduce_scatter %s %s" % (tag, dt, op), out, want)
            out = mk.empty((m,), dt)
            dist._reduce_scatter_base(out, mk.like(full[rank]), OPS[op])
            c.equal("%s _reduce_scatter_base %s %s" % (tag, dt, op), out, want)
            buf = mk.like(full[rank])
            view = buf[rank * m:(rank + 1) * m]
            dist._reduce_scatter_base(view, buf, OPS[op])
            c.equal("%s _reduce_scatter_base in-place %s %s" % (tag, dt, op), view, want)


def t_alltoall(c, rank, n, mk, tag):
    for dt in (torch.float32, torch.int64, torch.bfloat16, torch.bool, torch.uint8):
        k = 5
        ins = [data(r, dt, n * k, 8) for r in range(n)]
        out = mk.empty((n * k,), dt)
        dist.all_to_all_single(out, mk.like(ins[rank]))
        want = torch.cat([ins[r][rank * k:(rank + 1) * k] for r in range(n)])
        c.equal("%s all_to_all_single %s" % (tag, dt), out, want)
        # uneven splits of rows (2 columns): rank r sends (r + j + 1) rows to j
        rows = [[r + j + 1 for j in range(n)] for r in range(n)]
        ins = [data(r, dt, sum(rows[r]) * 2, 9).view(-1, 2) for r in range(n)]
        out_rows = [rows[r][rank] for r in range(n)]
        out = mk.empty((sum(out_rows), 2), dt)
        dist.all_to_all_single(out, mk.like(ins[rank]), out_rows, rows[rank])
        want = torch.cat([ins[r].split(rows[r])[rank] for r in range(n)])
        c.equal("%s all_to_all_single splits %s" % (tag, dt), out, want)
        # lists of different sizes: rank r sends j + r + 1 elements to j
        ins = [[data(r, dt, j + r + 1, 10 + j) for j in range(n)] for r in range(n)]
        outs = [mk.empty((rank + r + 1,), dt) for r in range(n)]
        dist.all_to_all(outs, [mk.like(x) for x in ins[rank]])
        for r in range(n):
            c.equal("%s all_to_all %s from %d" % (tag, dt, r), outs[r], ins[r][rank])


def t_p2p(c, rank, n, mk, tag):
    right, left = (rank + 1) % n, (rank - 1) % n
    for dt in (torch.float32, torch.int16, torch.bool):
        for count in (1, 1000, 300000):
            want = data(left, dt, count, count)
            got = mk.empty((count,), dt)
            # both ranks post the send first: the send and recv lanes keep
            # this from waiting on itself
            s = dist.isend(mk.like(data(rank, dt, count, count)), right)
            r = dist.irecv(got, left)
            s.wait()
            r.wait()
            c.equal("%s isend/irecv %s %d" % (tag, dt, count), got, want)
    if rank == 0:
        for src in range(1, n):
            t = mk.empty((4,), torch.int32)
            dist.recv(t, src)
            c.equal("%s recv from %d" % (tag, src), t, torch.full((4,), src, dtype=torch.int32))
    else:
        dist.send(mk.like(torch.full((4,), rank, dtype=torch.int32)), 0)
    dist.barrier()


def t_async(c, rank, n, mk, tag):
    works, ts, wants = [], [], []
    for i in range(8):
        ins = [data(r, torch.float32, 1000 * (i + 1), 60 + i) for r in range(n)]
        t = mk.like(ins[rank])
        works.append(dist.all_reduce(t, async_op=True))
        ts.append(t)
        wants.append(reference(ins, "sum", n))
    futs = [w.get_future() for w in works[:4]]
    for f, w in zip(futs, works[:4]):
        res = f.wait()
        c.true("%s future holds the tensor" % tag, isinstance(res, list) and len(res) == 1)
    for i, w in enumerate(works):
        w.wait()
        c.true("%s is_completed after wait" % tag, w.is_completed())
        c.true("%s is_success after wait" % tag, w.is_success())
        c.equal("%s async all_reduce %d" % (tag, i), ts[i], wants[i])
    # Ops on the stream worker (> 4 KiB) waited newest first from two threads
    # at once: one synchronizes the lane, the other then finds its works done.
    works, ts, wants = [], [], []
    for i in range(6):
        ins = [data(r, torch.float32, 20000 + 1000 * i, 80 + i) for r in range(n)]
        ts.append(mk.like(ins[rank]))
        works.append(dist.all_reduce(ts[-1], async_op=True))
        wants.append(reference(ins, "sum", n))
    ths = [threading.Thread(target=lambda ws=works[k::2]: [w.wait() for w in reversed(ws)])
           for k in range(2)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    for i, w in enumerate(works):
        c.true("%s waited from two threads %d" % (tag, i), w.is_completed() and w.is_success())
        c.equal("%s all_reduce waited from two threads %d" % (tag, i), ts[i], wants[i])
    w = dist.barrier(async_op=True)
    while not w.is_completed():
        pass
    c.true("%s barrier completes by polling" % tag, w.is_completed())


def t_errors(c, rank, n, mk):
    q = torch.quantize_per_tensor(torch.zeros(4), 0.1, 0, torch.quint8)
    c.raises("quantized dtype", lambda: dist.broadcast(q, 0), "not supported")
    # complex: torch hands zccl the real view (float pairs), so SUM works
    z = torch.full((3,), complex(rank, 1), dtype=torch.complex64)
    dist.all_reduce(z)
    c.equal("complex all_reduce", z, torch.full((3,), complex(n * (n - 1) / 2, n),
                                                dtype=torch.complex64))
    c.raises("BXOR on int", lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int32),
                                                    dist.ReduceOp.BXOR), "not supported")
    c.raises("AVG on int", lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int32),
                                                   dist.ReduceOp.AVG), "floating dtype")
    c.raises("bad root", lambda: dist.broadcast(torch.zeros(4), n + 3), "")
    c.raises("allgather sizes", lambda: dist._all_gather_base(torch.zeros(3), torch.zeros(4)),
             "elements")
    # the group still works after refused calls
    t = torch.ones(3)
    dist.all_reduce(t)
    c.equal("all_reduce after errors", t, torch.full((3,), float(n)))


def main(rank, n):
    import zccl_torch

    c = zt_harness.Checker(rank)
    pg = dist.distributed_c10d._get_default_group()
    c.true("group is zccl's", type(pg).__name__ == "ProcessGroupZccl")
    kinds = [(False, Maker(False))]
    zccl_torch.use_activated_memory()  # collective: every rank at the same point
    kinds.append((True, Maker(True)))
    for zero_copy, mk in kinds:
        tag = "zc" if zero_copy else "buf"
        check_kind(c, mk, zero_copy)
        staged0 = zt_harness.staged_bytes(pg)
        for f in (t_allreduce, t_coalesced, t_broadcast_reduce, t_gathers, t_reduce_scatter,
                  t_alltoall, t_p2p, t_async):
            if os.environ.get("ZT_VERBOSE"):
                print("rank %d: %s %s" % (rank, tag, f.__name__), flush=True)
            f(c, rank, n, mk, tag)
        staged = zt_harness.staged_bytes(pg)
        if staged is not None and zero_copy:
            c.true("zero-copy ops staged %d bytes" % (staged - staged0), staged == staged0)
        if staged is not None and not zero_copy:
            c.true("buffered ops staged bytes", staged > staged0)
    t_errors(c, rank, n, kinds[0][1])
    c.finish()


if __name__ == "__main__":
    zt_harness.run(main, int(sys.argv[1]))
