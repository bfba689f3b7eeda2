#!/usr/bin/env python3
"""One peer's AllReduce through PyTorch, timed as benchmarks/peers/peer_loop.h times the C
drivers, for scripts/bench_peers.sh.

Peers: gloo (torch.distributed, Gloo), zccl-torch (torch.distributed with the zccl
backend, tensors from zccl's activated allocator so the op is zero-copy), deepspeed-shm
(deepspeed.comm.inference_all_reduce with DS_ACCELERATOR=cpu: DeepSpeed's CPU
shared-memory kernel, its ShareMemComm op JIT-built with ninja). A peer that would
quietly fall back to another path (DeepSpeed without its kernel, or without the
vector ISA its kernel needs for the dtype) exits 3 with the reason on stderr, never
timing the fallback.

Per size: one checked op (rank r fills r + 1, every element must be n(n + 1)/2),
the tensor zeroed, a warm-up op, 3 timed ops that set the iteration count (about
--budget ms per round, the slowest rank's figure), then --rounds timed loops each
after a barrier; the best round's time per op (the slowest rank's) is printed by
rank 0 as "bytes,us,note". Control traffic (barrier, max) goes over a Gloo group.

Usage: peer_torch.py --peer gloo|zccl-torch|deepspeed-shm -n N --sizes 8,4K,1M
                     --dtype fp32|bf16 [--budget MS] [--rounds R]
"""
import argparse
import datetime
import glob
import os
import signal
import tempfile
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
PROBE_OPS = 3
MAX_ITERS = 10000


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    return int(s[:-1]) * mult[s[-1]] if s and s[-1] in mult else int(s)


def setup(peer, rank, n, store, dtype):
    """Returns (all_reduce(tensor), zccl_torch or None); exits 3 when the peer cannot run as named.

    The ranks meet through a file store (no port to race other programs for); MASTER_PORT only
    names DeepSpeed's shared-memory segment, so the parent's pid keeps concurrent runs apart."""
    init = "file://" + store
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(os.getppid()), RANK=str(rank),
                      WORLD_SIZE=str(n), LOCAL_RANK=str(rank), LOCAL_SIZE=str(n))
    timeout = datetime.timedelta(seconds=600)
    if peer == "deepspeed-shm":
        import deepspeed
        import deepspeed.comm as dscomm
        from deepspeed.accelerator import get_accelerator

        if get_accelerator().device_name() != "cpu":
            fail("DeepSpeed's accelerator is %s, not cpu" % get_accelerator().device_name())
        deepspeed.init_distributed(dist_backend="gloo", init_method=init, rank=rank,
                                   world_size=n, timeout=timeout)
        backend = dscomm.comm.cdb
        if getattr(backend, "shm_comm_op", None) is None:
            fail("DeepSpeed's ShareMemComm op did not build or load")
        if not hasattr(getattr(torch.ops, "deepspeed", None), "inference_all_reduce_"):
            fail("torch.ops.deepspeed.inference_all_reduce_ is missing: DeepSpeed would fall "
                 "back to torch.distributed")
        need = 1 if dtype == torch.float32 else 2
        level = getattr(backend, "shm_vector_kernel_level", 0)
        if level < need:
            fail("DeepSpeed's shm kernel needs vector level %d for %s (this CPU: %d), it would "
                 "fall back to torch.distributed" % (need, dtype, level))
        return (lambda t: dscomm.inference_all_reduce(t)), None
    dist.init_process_group("gloo", init_method=init, rank=rank,
                            world_size=n, timeout=timeout)
    if peer == "gloo":
        return (lambda t: dist.all_reduce(t)), None
    import zccl_torch

    zccl_torch.use_activated_memory()
    group = dist.new_group(backend="zccl")
    return (lambda t: dist.all_reduce(t, group=group)), zccl_torch


def fail(why):
    print(why, file=sys.stderr, flush=True)
    sys.exit(3)


def worker(rank, n, store, a):
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dtype = DTYPES[a.dtype]
    all_reduce, zt = setup(a.peer, rank, n, store, dtype)

    def slowest(v):
        t = torch.tensor([v], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    rc = 0
    want = n * (n + 1) / 2.0
    for nbytes in [parse_size(s) for s in a.sizes.split(",")]:
        t = torch.full((max(1, nbytes // torch.empty(0, dtype=dtype).element_size()),),
                       float(rank + 1), dtype=dtype)
        if zt is not None and not zt.is_activated(t):
            fail("the tensor is not in zccl's activated memory")
        all_reduce(t)
        wrong = slowest(float((t != want).sum()))
        if wrong > 0:
            if rank == 0:
                print("%d,,wrong result: %d of %d elements" % (nbytes, wrong, t.numel()),
                      flush=True)
            rc = 1
            continue
        t.zero_()
        all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(PROBE_OPS):
            all_reduce(t)
        one = slowest((time.perf_counter() - t0) / PROBE_OPS)
        iters = max(1, min(MAX_ITERS, int(a.budget * 1e-3 / one) if one > 0 else MAX_ITERS))
        best = None
        for _ in range(a.rounds):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                all_reduce(t)
            dt = slowest((time.perf_counter() - t0) / iters)
            best = dt if best is None or dt < best else best
        if rank == 0:
            print("%d,%.3f," % (nbytes, best * 1e6), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if rc:
        sys.exit(rc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", required=True, choices=["gloo", "zccl-torch", "deepspeed-shm"])
    ap.add_argument("-n", "--nranks", type=int, default=2)
    ap.add_argument("--sizes", default="8,4K,1M")
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    ap.add_argument("--budget", type=float, default=10.0, help="ms per timed round")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    # timeout(1) sends SIGTERM: exit through the finally below, which removes the segments.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    with tempfile.TemporaryDirectory(prefix="peer_torch") as d:
        try:
            mp.start_processes(worker, args=(a.nranks, os.path.join(d, "store"), a),
                               nprocs=a.nranks, start_method="spawn")
        except mp.ProcessExitedException as e:
            sys.exit(e.exit_code if e.exit_code and e.exit_code > 0 else 1)
        finally:
            remove_ds_segments()


def remove_ds_segments():
    """DeepSpeed's shm kernel never unlinks its per-rank segments (tens of MB each); they are
    named after uid, MASTER_ADDR and MASTER_PORT, here this process's pid (see setup)."""
    for f in glob.glob("/dev/shm/deepspeed_allreduce_buffer_%d_127.0.0.1_%d_*" % (
            os.getuid(), os.getpid())):
        os.unlink(f)


if __name__ == "__main__":
    main()
