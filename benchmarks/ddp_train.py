#!/usr/bin/env python3
"""DistributedDataParallel training on synthetic data: Gloo or zccl.

A small MLP (wide layers, small batches: communication-bound on purpose) is
trained for --steps steps on data drawn from a fixed seed. Every rank holds
the same initial weights and a slice of each global batch; DDP averages the
gradients. The same training runs in one process on the whole batch, and
the loss curves are compared (the global loss of a DDP step is the mean of
the ranks' losses, all-reduced outside the timed part) within --rtol. At
the end the weights are gathered and must be bitwise identical on every
rank. Reported per backend: mean step time (forward, backward with DDP's
overlapped all-reduce, optimizer), and the time of one all-reduce of all the
gradients' bytes (a synchronous dist.all_reduce of that size, timed apart).
With zccl the model and DDP's buckets live in activated memory
(zccl_torch.use_activated_memory), so the gradient all-reduce is zero-copy.

Usage: ddp_train.py [--backend gloo|zccl|both] [-n NRANKS] [--steps N]
                    [--width W] [--layers L] [--batch B]
"""
import argparse
import datetime
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def make_model(a):
    torch.manual_seed(a.seed)
    layers = [torch.nn.Linear(a.inp, a.width), torch.nn.ReLU()]
    for _ in range(a.layers - 1):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(a.width, a.out))
    return torch.nn.Sequential(*layers)


def batches(a):
    g = torch.Generator().manual_seed(a.seed + 1)
    w_true = torch.randn(a.inp, a.out, generator=g) / a.inp ** 0.5
    for _ in range(a.steps):
        x = torch.randn(a.batch, a.inp, generator=g)
        y = x @ w_true + 0.01 * torch.randn(a.batch, a.out, generator=g)
        yield x, y


def serial(a):
    """The one-process reference: per-step loss as the mean of the slices'
    losses (what DDP's ranks see), gradient of the whole batch."""
    torch.set_num_threads(1)
    model = make_model(a)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    losses = []
    for x, y in batches(a):
        opt.zero_grad()
        parts = [torch.nn.functional.mse_loss(model(xs), ys)
                 for xs, ys in zip(x.chunk(a.nranks), y.chunk(a.nranks))]
        loss = sum(parts) / a.nranks
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def worker(rank, a, port, q):
    torch.set_num_threads(1)
    if a.backend_now == "zccl":
        import zccl_torch

        zccl_torch.use_activated_memory()
    dist.init_process_group(a.backend_now, init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=a.nranks, timeout=datetime.timedelta(seconds=300))
    model = make_model(a)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr)
    losses, times = [], []
    for x, y in batches(a):
        xs, ys = x.chunk(a.nranks)[rank], y.chunk(a.nranks)[rank]
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(xs), ys)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        lt = loss.detach().clone()
        dist.all_reduce(lt)
        losses.append(lt.item() / a.nranks)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(a.nranks)]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(g, gathered[0]) for g in gathered)
    # one all-reduce of every gradient byte, timed apart from training
    grads = torch.zeros(flat.numel())
    for _ in range(3):
        dist.all_reduce(grads)
    dist.barrier()
    iters = 20
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(grads)
    ar = (time.perf_counter() - t0) / iters
    tt = torch.tensor([sum(times[a.warmup:]) / max(1, len(times) - a.warmup), ar],
                      dtype=torch.float64)
    dist.all_reduce(tt, op=dist.ReduceOp.MAX)
    activated = None
    if a.backend_now == "zccl":
        import zccl_torch

        activated = zccl_torch.is_activated(grads) and all(
            zccl_torch.is_activated(p.grad) for p in model.parameters())
    if rank == 0:
        q.put((losses, tt[0].item(), tt[1].item(), same, flat.numel() * 4, activated))
    dist.barrier()
    dist.destroy_process_group()


def run(a, backend):
    a.backend_now = backend
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    q = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(worker, args=(a, port, q), nprocs=a.nranks, start_method="spawn")
    return q.get()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="both", choices=["gloo", "zccl", "both"])
    ap.add_argument("-n", "--nranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--inp", type=int, default=64)
    ap.add_argument("--out", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    if a.batch % a.nranks:
        sys.exit("--batch must be a multiple of the rank count")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ref = serial(a)
    backends = ["gloo", "zccl"] if a.backend == "both" else [a.backend]
    res = {}
    ok = True
    print("# ddp_train: MLP %d x %d (%d layers), batch %d on %d ranks, %d steps (first %d not "
          "timed)" % (a.width, a.width, a.layers, a.batch, a.nranks, a.steps, a.warmup))
    print("# %-6s %12s %14s %12s %14s %10s %10s" % ("backend", "step(ms)", "allreduce(ms)",
                                                   "grad bytes", "max loss rdiff", "weights",
                                                   "activated"))
    for b in backends:
        losses, step, ar, same, nbytes, activated = run(a, b)
        rd = max(abs(l - r) / max(abs(r), 1e-12) for l, r in zip(losses, ref))
        good = same and rd <= a.rtol
        ok = ok and good
        res[b] = (step, ar)
        print("  %-6s %12.3f %14.3f %12d %14.2e %10s %10s" % (
            b, step * 1e3, ar * 1e3, nbytes, rd, "identical" if same else "DIFFER",
            "-" if activated is None else ("yes" if activated else "NO")))
        print("ddp_train: %s loss first %.5f last %.5f (serial %.5f -> %.5f): %s" % (
            b, losses[0], losses[-1], ref[0], ref[-1], "OK" if good else "MISMATCH"))
    if "gloo" in res and "zccl" in res:
        sp = res["gloo"][0] / res["zccl"][0]
        print("target DDP step >= 2x faster than Gloo: %s (%.2fx; all-reduce %.1fx)" % (
            "MET" if sp >= 2 else "MISSED", sp, res["gloo"][1] / res["zccl"][1]))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
