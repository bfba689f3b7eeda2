"""Helpers of torch_collectives.py: the ops, the floor backend, the C-level
op time, busy cores, and the targets.

The floor is a backend whose collectives return an already completed Work
and move nothing (zccl_torch._C._create_floor, C++ like zccl's own backend so
both cross the same pybind11 and dispatcher boundaries). The package never
registers it; register_floor() does, under FLOOR, for this benchmark only.
Its time per call is what PyTorch's own path costs; zccl's time minus the
floor minus the C-level op (all_reduce_perf, blocking, same sizes) is what
the zccl backend adds.

Busy cores (--busy N): N processes, each a Python busy loop pinned to one
core (round robin over the cores this process may use), started before the
first timed loop and killed after the last, on every rank's machine by
rank 0; they run at the ranks' own priority.
"""
import csv as csv_mod
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist

FLOOR = "zccl_floor"  # test-only backend name (benchmarks only)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
C_DTYPES = {"fp32": "float", "bf16": "bfloat16"}


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def busbw_factor(op, n):
    if op.startswith("all_reduce"):
        return 2.0 * (n - 1) / n
    if op.split(":")[0] in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def iters_for(nbytes):
    """Enough calls for a stable mean; fewer for large sizes (Gloo is slow)."""
    return int(max(3, min(2000, (64 << 20) // max(nbytes, 1) // 4)))


def register_floor():
    import zccl_torch

    if FLOOR.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(FLOOR, zccl_torch._C._create_floor, devices=["cpu"])


class Op:
    """Buffers and one call of a collective on a group; count elements per
    rank-chunk, so 'bytes' (the nccl-tests size) is count * esize * chunks."""

    def __init__(self, name, nbytes, rank, n, dtype=torch.float32):
        self.name, self.rank, self.n, self.dtype = name, rank, n, dtype
        esz = torch.empty(0, dtype=dtype).element_size()
        chunks_in, chunks_out = {"all_gather": (1, n), "gather": (1, n),
                                 "reduce_scatter": (n, 1), "scatter": (n, 1),
                                 "alltoall": (n, n)}.get(name, (0, 0))
        if chunks_in:
            self.count = max(1, nbytes // esz // n)
            self.send = torch.empty(self.count * chunks_in, dtype=dtype)
            self.recv = torch.empty(self.count * chunks_out, dtype=dtype)
        else:
            self.count = max(1, nbytes // esz)
            self.send = torch.empty(self.count, dtype=dtype)
            self.recv = self.send
        self.nbytes = max(self.send.numel(), self.recv.numel()) * esz

    def fill(self):
        self.send.fill_(float(self.rank + 1))
        if self.recv is not self.send:
            self.recv.fill_(-1.0)

    def call(self, group, gloo=False, async_op=False):
        """One call; the Work when async_op, else None (the call waited)."""
        name, n, a = self.name, self.n, async_op
        if name == "all_gather" and gloo:
            return dist.all_gather(list(self.recv.chunk(n)), self.send, group=group, async_op=a)
        if name == "all_reduce":
            return dist.all_reduce(self.send, group=group, async_op=a)
        if name == "broadcast":
            return dist.broadcast(self.send, 0, group=group, async_op=a)
        if name == "reduce":
            return dist.reduce(self.send, 0, group=group, async_op=a)
        if name == "all_gather":
            return dist._all_gather_base(self.recv, self.send, group=group, async_op=a)
        if name == "reduce_scatter":
            return dist._reduce_scatter_base(self.recv, self.send, group=group, async_op=a)
        if name == "alltoall":
            return dist.all_to_all_single(self.recv, self.send, group=group, async_op=a)
        if name == "gather":
            outs = list(self.recv.chunk(n)) if self.rank == 0 else None
            return dist.gather(self.send, outs, dst=0, group=group, async_op=a)
        ins = list(self.send.chunk(n)) if self.rank == 0 else None
        return dist.scatter(self.recv, ins, src=0, group=group, async_op=a)

    def wrong(self):
        """Elements differing from the expected result after fill + call."""
        n, r = self.n, self.rank
        s = n * (n + 1) / 2.0
        name = self.name
        gathered = torch.arange(1, n + 1, dtype=self.dtype).repeat_interleave(self.count)
        if name in ("all_reduce", "reduce") and (name == "all_reduce" or r == 0):
            want, got = torch.full_like(self.send, s), self.send
        elif name == "broadcast":
            want, got = torch.full_like(self.send, 1.0), self.send
        elif name in ("all_gather", "alltoall") or (name == "gather" and r == 0):
            want, got = gathered, self.recv
        elif name == "reduce_scatter":
            want, got = torch.full_like(self.recv, s), self.recv
        elif name == "scatter":  # root 0's values
            want, got = torch.full_like(self.recv, 1.0), self.recv
        else:  # reduce and gather off the root
            return 0
        return int((got != want).sum())


def busy_start(n):
    """n busy-loop processes, each pinned to one core (round robin)."""
    cores = sorted(os.sched_getaffinity(0))
    loop = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", loop, str(cores[i % len(cores)])])
             for i in range(n)]
    if procs:
        time.sleep(0.3)  # past the interpreter's start-up, into the loop
    return procs


def busy_stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def c_op_times(tool, n, sizes, dtypes, iters=2000):
    """{(dtype, bytes): us} of HcclAllReduce from all_reduce_perf: in place
    like dist.all_reduce, blocking (each op synchronized, as a sync torch
    call is), np n, activated (zero-copy) buffers."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for dt in dtypes:
            csv = os.path.join(d, dt + ".csv")
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), tool,
                   "-b", str(min(sizes)), "-e", str(max(sizes)), "-d", C_DTYPES[dt], "-I", "1",
                   "--blocking", "1", "-n", str(iters), "-w", "200", "-c", "0",
                   "--repeat", "3", "--csv", csv]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            with open(csv) as f:
                rows = list(csv_mod.DictReader(f))
            out.update({(dt, int(r["size"])): float(r["time_us"]) for r in rows})
    return out
