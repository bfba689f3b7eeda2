"""Every collective x dtype x op against a serial reference, on zero-copy
tensors (the activated allocator) and buffered ones (numpy-owned memory),
in-place and out-of-place, contiguous and strided; async works, futures,
what PyTorch 2.x adds (bitwise ops on integers, unsigned and complex dtypes,
sparse all_reduce, the coalesced variants, recv from any source,
monitored_barrier, batch_isend_irecv and the coalescing manager, sequence
numbers), the profiler's records, the benchmarks' floor backend and the errors for
what zccl refuses.
Usage: test_torch_colls.py NRANKS
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
    c.raises("quantized dtype", lambda: dist.broadcast(q, 0), "")
    # complex: torch hands zccl the real view (float pairs), so SUM works
    z = torch.full((3,), complex(rank, 1), dtype=torch.complex64)
    dist.all_reduce(z)
    c.equal("complex all_reduce", z, torch.full((3,), complex(n * (n - 1) / 2, n),
                                                dtype=torch.complex64))
    c.raises("BXOR on float", lambda: dist.all_reduce(torch.zeros(4), dist.ReduceOp.BXOR),
             "BXOR")
    c.raises("PREMUL_SUM", lambda: dist.all_reduce(torch.zeros(4),
                                                   dist._make_nccl_premul_sum(2.0)),
             "PREMUL_SUM")
    c.raises("sparse PRODUCT", lambda: dist.all_reduce(torch.eye(3).to_sparse(),
                                                       dist.ReduceOp.PRODUCT), "SUM")
    c.raises("AVG on int", lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int32),
                                                   dist.ReduceOp.AVG), "floating dtype")
    c.raises("bad root", lambda: dist.broadcast(torch.zeros(4), n + 3), "")
    c.raises("allgather sizes", lambda: dist._all_gather_base(torch.zeros(3), torch.zeros(4)),
             "elements")
    # the group still works after refused calls
    t = torch.ones(3)
    dist.all_reduce(t)
    c.equal("all_reduce after errors", t, torch.full((3,), float(n)))


BITWISE = {"band": (dist.ReduceOp.BAND, torch.bitwise_and),
           "bor": (dist.ReduceOp.BOR, torch.bitwise_or),
           "bxor": (dist.ReduceOp.BXOR, torch.bitwise_xor)}
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


def fold(ins, f):
    acc = ins[0].clone()
    for x in ins[1:]:
        acc = f(acc, x)
    return acc


def t_bitwise(c, rank, n, mk, tag):
    m = 6
    for dt in INTS:
        for name, (op, f) in BITWISE.items():
            seed = seed_of(dt, name)
            ins = [torch.randint(0, 120, (n * m,), generator=torch.Generator().manual_seed(
                seed + r)).to(dt) for r in range(n)]
            want = fold(ins, f)
            t = mk.like(ins[rank])
            dist.all_reduce(t, op)
            c.equal("%s all_reduce %s %s" % (tag, dt, name), t, want)
            t = mk.like(ins[rank])
            dist.reduce(t, n - 1, op)
            if rank == n - 1:
                c.equal("%s reduce %s %s" % (tag, dt, name), t, want)
            out = mk.empty((m,), dt)
            dist.reduce_scatter_tensor(out, mk.like(ins[rank]), op)
            c.equal("%s reduce_scatter_tensor %s %s" % (tag, dt, name), out,
                    want[rank * m:(rank + 1) * m])
            ts = [mk.like(ins[rank][:2]), mk.like(ins[rank][2:])]
            dist.all_reduce_coalesced(ts, op)
            c.equal("%s all_reduce_coalesced %s %s" % (tag, dt, name), torch.cat(ts), want)


def t_dtypes(c, rank, n, mk, tag):
    """Unsigned and complex dtypes: SUM and the data-moving collectives."""
    for dt in (torch.uint16, torch.uint32, torch.uint64):
        ins = [torch.arange(5, dtype=torch.int64).add(r).to(dt) for r in range(n)]
        t = mk.like(ins[rank]) if dt != torch.uint16 else ins[rank].clone()
        dist.all_reduce(t)
        c.equal("%s all_reduce %s" % (tag, dt), t,
                sum(x.to(torch.int64) for x in ins).to(dt))
        outs = [torch.zeros(5, dtype=dt) for _ in range(n)]
        dist.all_gather(outs, ins[rank].clone())
        c.true("%s all_gather %s" % (tag, dt), all(torch.equal(outs[r], ins[r])
                                                    for r in range(n)))
    for dt in (torch.complex64, torch.complex128):
        ins = [torch.full((4,), complex(r, 2 * r + 1), dtype=dt) for r in range(n)]
        t = mk.like(ins[rank])
        dist.all_reduce(t)
        c.equal("%s all_reduce %s" % (tag, dt), t, sum(ins))
        t = mk.like(ins[rank])
        dist.broadcast(t, n - 1)
        c.equal("%s broadcast %s" % (tag, dt), t, ins[n - 1])
        outs = [mk.empty((4,), dt) for _ in range(n)]
        dist.all_gather(outs, mk.like(ins[rank]))
        c.true("%s all_gather %s" % (tag, dt), all(torch.equal(outs[r], ins[r])
                                                    for r in range(n)))


def t_sparse(c, rank, n, mk, tag):
    dense = [torch.zeros(6, 3) for _ in range(n)]
    for r in range(n):
        for k in range(r + 1):  # rank r has r + 1 non-zero rows, overlapping
            dense[r][(r + 2 * k) % 6] = float(r + k + 1)
    t = dense[rank].to_sparse()
    dist.all_reduce(t)
    c.true("%s sparse all_reduce is sparse" % tag, t.is_sparse)
    c.equal("%s sparse all_reduce" % tag, t.to_dense(), sum(dense))


def t_coalesced_more(c, rank, n, mk, tag):
    shapes = [(3,), (2, 2), (5,)]
    ins = [[data(r, torch.float32, int(np.prod(s)), 31 + i).view(s) for i, s in
            enumerate(shapes)] for r in range(n)]
    outs = [[mk.empty(s, torch.float32) for s in shapes] for _ in range(n)]
    dist.all_gather_coalesced(outs, [mk.like(x) for x in ins[rank]])
    for r in range(n):
        for i in range(len(shapes)):
            c.equal("%s all_gather_coalesced %d from %d" % (tag, i, r), outs[r][i], ins[r][i])
    # the coalescing manager's fast paths: allgather_into_tensor_coalesced and
    # reduce_scatter_tensor_coalesced
    k = 4
    outs = [mk.empty((n * k,), torch.float32) for _ in range(3)]
    with dist._coalescing_manager(async_ops=False):
        for i in range(3):
            dist.all_gather_into_tensor(outs[i], mk.like(data(rank, torch.float32, k, 50 + i)))
    for i in range(3):
        c.equal("%s allgather_into_tensor_coalesced %d" % (tag, i), outs[i],
                torch.cat([data(r, torch.float32, k, 50 + i) for r in range(n)]))
    full = [[data(r, torch.float32, n * k, 60 + i) for i in range(3)] for r in range(n)]
    outs = [mk.empty((k,), torch.float32) for _ in range(3)]
    with dist._coalescing_manager(async_ops=False):
        for i in range(3):
            dist.reduce_scatter_tensor(outs[i], mk.like(full[rank][i]))
    for i in range(3):
        want = reference([full[r][i] for r in range(n)], "sum", n)[rank * k:(rank + 1) * k]
        c.equal("%s reduce_scatter_tensor_coalesced %d" % (tag, i), outs[i], want)
    # startCoalescing/endCoalescing around ordinary ops (device given)
    ts = [mk.like(data(rank, torch.float32, 7, 70 + i)) for i in range(2)]
    with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        for t in ts:
            dist.broadcast(t, 0)
    cm.wait()
    for i, t in enumerate(ts):
        c.equal("%s broadcast coalesced %d" % (tag, i), t, data(0, torch.float32, 7, 70 + i))


def t_p2p_more(c, rank, n, mk, tag):
    right, left = (rank + 1) % n, (rank - 1) % n
    got = mk.empty((9,), torch.float32)
    ops = [dist.P2POp(dist.isend, mk.like(data(rank, torch.float32, 9, 90)), right),
           dist.P2POp(dist.irecv, got, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    c.equal("%s batch_isend_irecv" % tag, got, data(left, torch.float32, 9, 90))
    # recv from any source: rank 0 takes one message from every other rank
    if rank == 0:
        seen = set()
        for _ in range(n - 1):
            t = mk.empty((3,), torch.int64)
            src = dist.recv(t)
            c.equal("%s recv any source from %d" % (tag, src), t,
                    torch.full((3,), src, dtype=torch.int64))
            seen.add(src)
        c.true("%s recv any source saw every rank" % tag, seen == set(range(1, n)))
    else:
        dist.send(mk.like(torch.full((3,), rank, dtype=torch.int64)), 0)
    dist.monitored_barrier(wait_all_ranks=True)
    dist.barrier()


def t_sequence(c, rank, n):
    import zccl_torch

    g = dist.new_group()  # a fresh count: the default group's ranks ran different p2p
    b = zccl_torch.backend_of(g)
    s0 = b._get_sequence_number_for_group()
    dist.all_reduce(torch.ones(2), group=g)
    dist.broadcast(torch.ones(2), 0, group=g)
    s1 = b._get_sequence_number_for_group()
    c.true("sequence number counts ops", s1 == s0 + 2)
    seqs = [None] * n
    dist.all_gather_object(seqs, s1)
    c.true("sequence numbers agree %s" % seqs, len(set(seqs)) == 1)
    dist.destroy_process_group(g)


def t_profiler_floor(c, rank, n):
    """The profiler records zccl's ops (a work passes its title to c10d only
    while someone records); the benchmarks' floor backend is registered by
    no import, and its ops complete at once and move nothing."""
    import zccl_torch
    from torch.profiler import ProfilerActivity, profile

    t = torch.ones(4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        dist.all_reduce(t)
    names = {e.key for e in prof.key_averages()}
    c.true("profiler records zccl:all_reduce (%s)" % sorted(names)[:8],
           "zccl:all_reduce" in names)
    c.equal("all_reduce under the profiler", t, torch.full((4,), float(n)))
    c.true("the floor is not registered by the package",
           "ZCCL_FLOOR" not in dist.Backend._plugins)
    dist.Backend.register_backend("zccl_floor", zccl_torch._C._create_floor, devices=["cpu"])
    g = dist.new_group(backend="zccl_floor")
    t = torch.full((4,), float(rank))
    w = dist.all_reduce(t, group=g, async_op=True)
    c.true("a floor work is complete at once", w.is_completed())
    w.wait()
    c.equal("the floor moves nothing", t, torch.full((4,), float(rank)))
    dist.destroy_process_group(g)


def main(rank, n):
    import zccl_torch

    c = zt_harness.Checker(rank)
    pg = zccl_torch.backend_of()
    c.true("group is zccl's", type(pg).__name__ == "ProcessGroupZccl")
    kinds = [(False, Maker(False))]
    zccl_torch.use_activated_memory()  # collective: every rank at the same point
    kinds.append((True, Maker(True)))
    for zero_copy, mk in kinds:
        tag = "zc" if zero_copy else "buf"
        check_kind(c, mk, zero_copy)
        staged0 = zt_harness.staged_bytes(pg)
        for f in (t_allreduce, t_coalesced, t_broadcast_reduce, t_gathers, t_reduce_scatter,
                  t_alltoall, t_p2p, t_async, t_bitwise, t_dtypes, t_coalesced_more,
                  t_p2p_more):
            if os.environ.get("ZT_VERBOSE"):
                print("rank %d: %s %s" % (rank, tag, f.__name__), flush=True)
            f(c, rank, n, mk, tag)
        staged = zt_harness.staged_bytes(pg)
        if staged is not None and zero_copy:
            c.true("zero-copy ops staged %d bytes" % (staged - staged0), staged == staged0)
        if staged is not None and not zero_copy:
            c.true("buffered ops staged bytes", staged > staged0)
    t_sparse(c, rank, n, kinds[0][1], "buf")
    t_sequence(c, rank, n)
    t_profiler_floor(c, rank, n)
    t_errors(c, rank, n, kinds[0][1])
    c.finish()


if __name__ == "__main__":
    zt_harness.run(main, int(sys.argv[1]))
