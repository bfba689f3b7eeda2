#!/usr/bin/env python3
"""torch.distributed collectives on zccl against Gloo, in the same run.

Each rank (torch.multiprocessing, spawn) makes the default group with Gloo
and a second group over the same ranks with backend "zccl"; tensors come
from zccl's activated allocator (zccl_torch.use_activated_memory), so zccl's
ops are zero-copy and Gloo gets the same buffers. For every collective and
size: one checked op (the #wrong column counts wrong elements on any rank),
then --repeat rounds that alternate between the backends, each a timed loop
of synchronous calls (dist.<op>, each waits) with the same iteration count
on both; a backend's figure is the median of its rounds (the machine's load
changes during a run; alternating exposes both backends to it alike). Time is per call, as a Python program sees
it; algbw and busbw follow nccl-tests (bytes = the larger of send and
receive; busbw factors 2(n-1)/n, (n-1)/n or 1). The "staged" column is the
bytes zccl copied through its CCL buffers during the zccl loop, read from the
counter libhccl exports (zccl_comm_staged_bytes; "-" when absent): 0 means
zero-copy. Writes a table per collective, a CSV and (gnuplot) a PNG.

Rows of bf16 are named <op>:bf16 (values 1..n are exact in bfloat16).

Usage: torch_collectives.py [-n NRANKS] [--sizes 8,64K,...|--full] [--dtypes fp32,bf16]
                            [--ops all_reduce,...] [--repeat R] [--csv F] [--png F]
"""
import argparse
import ctypes
import datetime
import os
import shutil
import subprocess
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DEFAULT_SIZES = "8,64,512,4K,64K,1M,16M,64M"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall",
       "gather", "scatter"]


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def busbw_factor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def iters_for(nbytes):
    """Enough calls for a stable mean; fewer for large sizes (Gloo is slow)."""
    return int(max(3, min(2000, (64 << 20) // max(nbytes, 1) // 4)))


class Op:
    """Buffers and one call of a collective on a group; count elements per
    rank-chunk, so 'bytes' (the nccl-tests size) is count * 4 * chunks."""

    def __init__(self, name, nbytes, rank, n, dtype=torch.float32):
        self.name, self.rank, self.n, self.dtype = name, rank, n, dtype
        esz = torch.empty(0, dtype=dtype).element_size()
        if name in ("all_gather", "gather"):
            self.count = max(1, nbytes // esz // n)
            self.send = torch.empty(self.count, dtype=dtype)
            self.recv = torch.empty(self.count * n, dtype=dtype)
        elif name in ("reduce_scatter", "scatter"):
            self.count = max(1, nbytes // esz // n)
            self.send = torch.empty(self.count * n, dtype=dtype)
            self.recv = torch.empty(self.count, dtype=dtype)
        elif name == "alltoall":
            self.count = max(1, nbytes // esz // n)
            self.send = torch.empty(self.count * n, dtype=dtype)
            self.recv = torch.empty(self.count * n, dtype=dtype)
        else:
            self.count = max(1, nbytes // esz)
            self.send = torch.empty(self.count, dtype=dtype)
            self.recv = self.send
        self.nbytes = max(self.send.numel(), self.recv.numel()) * esz

    def fill(self):
        self.send.fill_(float(self.rank + 1))
        if self.recv is not self.send:
            self.recv.fill_(-1.0)

    def supported(self, gloo):
        """Gloo (torch 2.x) runs every one of them."""
        return True

    def call(self, group, gloo=False):
        name, n = self.name, self.n
        if name == "all_gather" and gloo:
            dist.all_gather(list(self.recv.chunk(n)), self.send, group=group)
        elif name == "all_reduce":
            dist.all_reduce(self.send, group=group)
        elif name == "broadcast":
            dist.broadcast(self.send, 0, group=group)
        elif name == "reduce":
            dist.reduce(self.send, 0, group=group)
        elif name == "all_gather":
            dist._all_gather_base(self.recv, self.send, group=group)
        elif name == "reduce_scatter":
            dist._reduce_scatter_base(self.recv, self.send, group=group)
        elif name == "alltoall":
            dist.all_to_all_single(self.recv, self.send, group=group)
        elif name == "gather":
            outs = list(self.recv.chunk(n)) if self.rank == 0 else None
            dist.gather(self.send, outs, dst=0, group=group)
        elif name == "scatter":
            ins = list(self.send.chunk(n)) if self.rank == 0 else None
            dist.scatter(self.recv, ins, src=0, group=group)

    def wrong(self):
        """Elements differing from the expected result after fill + call."""
        n, r = self.n, self.rank
        s = n * (n + 1) / 2.0
        name = self.name
        if name == "all_reduce":
            want = torch.full_like(self.send, s)
            got = self.send
        elif name == "broadcast":
            want, got = torch.full_like(self.send, 1.0), self.send
        elif name == "reduce":
            if r != 0:
                return 0
            want, got = torch.full_like(self.send, s), self.send
        elif name == "all_gather" or (name == "gather" and r == 0):
            want = torch.arange(1, n + 1, dtype=self.dtype).repeat_interleave(self.count)
            got = self.recv
        elif name == "gather":
            return 0
        elif name == "reduce_scatter":
            want, got = torch.full_like(self.recv, s), self.recv
        elif name == "alltoall":
            want = torch.arange(1, n + 1, dtype=self.dtype).repeat_interleave(self.count)
            got = self.recv
        else:  # scatter: root 0's values
            want, got = torch.full_like(self.recv, 1.0), self.recv
        return int((got != want).sum())


def staged_counter():
    try:
        lib = ctypes.CDLL("libhccl.so.0")
        f = lib.zccl_comm_staged_bytes
    except (OSError, AttributeError):
        return None
    f.restype = ctypes.c_uint64
    f.argtypes = [ctypes.c_void_p]
    return f


def timed(op, group, iters, gloo, sync):
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        op.call(group, gloo)
    dt = time.perf_counter() - t0
    return dt / iters


def worker(rank, n, port, sizes, ops, repeat, dtypes, q):
    import zccl_torch

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's renamed functions
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    zccl_torch.use_activated_memory()
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=n, timeout=datetime.timedelta(seconds=600))
    zg = dist.new_group(backend="zccl")
    gg = dist.distributed_c10d._get_default_group()
    counter = staged_counter()
    comm = zccl_torch.backend_of(zg)._comm_handle()
    rows = []
    for dt, name in [(d, o) for d in dtypes for o in ops]:
        for nbytes in sizes:
            op = Op(name, nbytes, rank, n, DTYPES[dt])
            iters = iters_for(op.nbytes)
            res = {}
            for label, group in (("zccl", zg), ("gloo", gg)):
                gloo = label == "gloo"
                if not op.supported(gloo):
                    res[label] = (None, 0, None)
                    continue
                op.fill()
                op.call(group, gloo)
                bad = torch.tensor([op.wrong()], dtype=torch.int64)
                dist.all_reduce(bad, group=gg)
                op.call(group, gloo)  # warm-up
                res[label] = ([], int(bad.item()), 0 if counter else None)
            # Rounds alternate between the backends, so a burst of load on
            # the machine hits both; each backend's figure is its median round.
            for _ in range(repeat):
                for label, group in (("zccl", zg), ("gloo", gg)):
                    gloo = label == "gloo"
                    if res[label][0] is None:
                        continue
                    before = counter(comm) if counter and label == "zccl" else None
                    t = timed(op, group, iters, gloo, lambda: dist.barrier(group=gg))
                    if before is not None:
                        res[label] = (res[label][0], res[label][1],
                                      res[label][2] + counter(comm) - before)
                    tt = torch.tensor([t], dtype=torch.float64)
                    dist.all_reduce(tt, op=dist.ReduceOp.MAX, group=gg)
                    res[label][0].append(tt.item())
            for label in res:
                ts, bad, staged = res[label]
                res[label] = (None if ts is None else sorted(ts)[len(ts) // 2], bad, staged)
            zero_copy = zccl_torch.is_activated(op.send) and zccl_torch.is_activated(op.recv)
            rows.append((name if dt == "fp32" else name + ":" + dt, op.nbytes, op.count, res,
                         zero_copy))
            del op
    if rank == 0:
        q.put(rows)
    dist.barrier(group=gg)
    dist.destroy_process_group()


def fmt_table(rows, n):
    out = []
    by_op = {}
    for r in rows:
        by_op.setdefault(r[0], []).append(r)
    out.append("# torch.distributed on %d ranks: zccl (activated tensors) vs Gloo, float32 "
               "(rows <op>:bf16 bfloat16), sum; time = mean per synchronous call, median of the alternating rounds" % n)
    for name, rs in by_op.items():
        out.append("#")
        out.append("# %s" % name)
        out.append("# %12s %12s %5s %5s | %10s %8s %8s %8s %6s | %10s %8s %6s | %8s" % (
            "size", "count", "type", "redop", "zccl(us)", "algbw", "busbw", "staged", "#wrong",
            "gloo(us)", "busbw", "#wrong", "speedup"))
        for (_, nbytes, count, res, zc) in rs:
            zt, zw, zs = res["zccl"]
            gt, gw, _ = res["gloo"]
            alg = nbytes / zt / 1e9
            f = busbw_factor(name, n)
            staged = "-" if zs is None else str(zs)
            if gt is None:
                gloo = "%10s %8s %6s | %8s" % ("n/a", "-", "-", "-")
            else:
                gloo = "%10.2f %8.3f %6d | %7.1fx" % (gt * 1e6, nbytes / gt / 1e9 * f, gw,
                                                     gt / zt)
            out.append("  %12d %12d %5s %5s | %10.2f %8.3f %8.3f %8s %6d | %s%s" % (
                nbytes, count, "bf16" if name.endswith(":bf16") else "fp32", "sum", zt * 1e6, alg, alg * f, staged, zw, gloo,
                "" if zc else " (not activated)"))
    return "\n".join(out)


def targets(rows):
    lines = []
    for key in ("all_reduce", "all_reduce:bf16"):
        lines += ar_targets(key, {r[1]: r[3] for r in rows if r[0] == key})
    staged = [r[3]["zccl"][2] for r in rows]
    if all(s is not None for s in staged):
        lines.append("target zero bytes staged (activated tensors): %s (%d bytes in all)" % (
            "MET" if sum(staged) == 0 else "MISSED", sum(staged)))
    wrong = sum(r[3]["zccl"][1] + r[3]["gloo"][1] for r in rows)
    lines.append("results: %s (%d wrong elements)" % ("OK" if wrong == 0 else "WRONG", wrong))
    return "\n".join(lines)


def ar_targets(key, ar):
    lines = []
    small = [(b, v["gloo"][0] / v["zccl"][0]) for b, v in ar.items() if b <= 64 << 10]
    if small:
        worst = min(small, key=lambda x: x[1])
        lines.append("target %s >= 20x Gloo up to 64 KiB: %s (lowest %.1fx at %d B)" % (
            key, "MET" if worst[1] >= 20 else "MISSED", worst[1], worst[0]))
    if (64 << 20) in ar:
        v = ar[64 << 20]
        sp = v["gloo"][0] / v["zccl"][0]
        lines.append("target %s >= 4x Gloo at 64 MiB: %s (%.1fx)" % (
            key, "MET" if sp >= 4 else "MISSED", sp))
    return lines


def plot(csv, png, ops):
    if not shutil.which("gnuplot"):
        print("(gnuplot not found: no PNG)")
        return
    cmds = ['set terminal png size 1400,900',
            'set output "%s"' % png, 'set datafile separator ","', 'set logscale xy',
            'set xlabel "bytes"', 'set ylabel "time per call (us)"', 'set key outside right',
            'set grid', 'set title "torch.distributed: zccl vs Gloo (time per call)"']
    parts = []
    for i, name in enumerate(ops):
        sel = '(strcol(1) eq "%s" ? $%d : 1/0)'
        parts.append('"%s" using 2:%s with linespoints lt %d dt 1 title "%s zccl"' % (
            csv, sel % (name, 4), i + 1, name))
        parts.append('"%s" using 2:%s with linespoints lt %d dt 2 title "%s gloo"' % (
            csv, sel % (name, 7), i + 1, name))
    cmds.append("plot " + ", ".join(parts))
    subprocess.run(["gnuplot"], input="\n".join(cmds).encode(), check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--nranks", type=int, default=2)
    ap.add_argument("--sizes", default=DEFAULT_SIZES)
    ap.add_argument("--full", action="store_true", help="every power of two, 8 B to 256 MiB")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--dtypes", default="fp32,bf16", help="fp32 and/or bf16")
    ap.add_argument("--repeat", type=int, default=3,
                    help="timed rounds per backend, alternating; the median is reported")
    ap.add_argument("--csv")
    ap.add_argument("--png")
    a = ap.parse_args()
    sizes = [8 << i for i in range(26)] if a.full else [parse_size(s) for s in a.sizes.split(",")]
    ops = [o for o in a.ops.split(",") if o]
    for o in ops:
        if o not in OPS:
            sys.exit("unknown op %s (one of %s)" % (o, ",".join(OPS)))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    dtypes = [d for d in a.dtypes.split(",") if d]
    for d in dtypes:
        if d not in DTYPES:
            sys.exit("unknown dtype %s (one of %s)" % (d, ",".join(DTYPES)))
    mp.start_processes(worker, args=(a.nranks, port, sizes, ops, a.repeat, dtypes, q),
                       nprocs=a.nranks,
                       start_method="spawn")
    rows = q.get()
    print(fmt_table(rows, a.nranks))
    print(targets(rows))
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("op,bytes,count,zccl_us,zccl_busbw,zccl_staged,gloo_us,gloo_busbw,speedup\n")
            for (name, nbytes, count, res, _) in rows:
                zt, _, zs = res["zccl"]
                gt = res["gloo"][0]
                fac = busbw_factor(name, a.nranks)
                gcols = "," * 2 if gt is None else "%.3f,%.4f,%.2f" % (
                    gt * 1e6, nbytes / gt / 1e9 * fac, gt / zt)
                f.write("%s,%d,%d,%.3f,%.4f,%s,%s\n" % (
                    name, nbytes, count, zt * 1e6, nbytes / zt / 1e9 * fac,
                    "" if zs is None else zs, gcols))
        if a.png:
            plot(a.csv, a.png, ops)
    wrong = sum(r[3]["zccl"][1] + r[3]["gloo"][1] for r in rows)
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
