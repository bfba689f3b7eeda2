#!/usr/bin/env python3
"""DistributedDataParallel training on synthetic data: Gloo and zccl in one run.

A small MLP is trained for --steps steps on data drawn from a fixed seed.
The defaults make it communication-bound on purpose: a batch of 4 (2 rows
per rank) through 8 layers of 256 x 256 makes little compute, while DDP's
buckets of 0.25 MiB (about one layer each) make 8 all-reduces of 256 KiB
per step, the size where a backend's per-op cost shows. (Wider layers move
more bytes per step but the compute grows with them: at 1024 x 1024 the
step on this 2-core machine is mostly forward, backward and optimizer.) Every rank holds
the same initial weights and a slice of each global batch; DDP averages the
gradients. With --backend both (the default) each rank makes a Gloo group
and a zccl group and trains one replica on each, the steps interleaved
(a Gloo step, a zccl step, ...) so the machine's load hits both alike. The
same training runs in one process on the whole batch, and each backend's
loss curve is compared with it (the global loss of a DDP step is the mean
of the ranks' losses, all-reduced outside the timed part) within --rtol. At
the end the weights are gathered and must be bitwise identical on every
rank. Reported per backend: step time (forward, backward with DDP's
overlapped bucket all-reduces, optimizer; median and mean of the timed
steps, the slowest rank's; each step starts after a barrier on the
backend's own group, as that backend's training loop would sync: a Gloo
barrier released two ranks 30 us apart (median; 90th percentile 100 us,
worst 3.9 ms) and zccl's 0.3 us, and the first bucket all-reduce of the
step waits that out), the compute time of the same step under DDP's
no_sync (no all-reduce; measured after training, interleaved likewise) and
the communication's share of the step, (step - compute) / step, and the
time of one synchronous dist.all_reduce of all the gradients' bytes
(alternating rounds, median). The models, DDP's
buckets and the gradients live in activated memory
(zccl_torch.use_activated_memory), so zccl's all-reduces are zero-copy; Gloo
gets the same memory.

With --explain 1 (the default) a third replica, "nocomm", trains beside them
under DDP with a communication hook that hands each bucket back at once,
divided by the world size as DDP's default path divides every gradient before
its all-reduce, but not all-reduced: its step is DDP's own work on top of the
compute (its autograd hooks, the buckets, that division, the end of backward).
The table then splits each backend's step into its compute, DDP's own work
(nocomm's step - nocomm's compute) and what the all-reduces add (the rest). The
nocomm replica's ranks drift apart (nothing is averaged), so its losses and
weights are not checked.

Usage: ddp_train.py [--backend gloo|zccl|both] [-n NRANKS] [--steps N]
                    [--width W] [--layers L] [--batch B]
"""
import argparse
import ctypes
import datetime
import os
import socket
import sys
import time
import warnings

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


def staged_counter():
    """libhccl's count of bytes a communicator staged through its CCL buffers
    (zccl_comm_staged_bytes), or None when the library does not export it."""
    try:
        f = ctypes.CDLL("libhccl.so.0").zccl_comm_staged_bytes
    except (OSError, AttributeError):
        return None
    f.restype = ctypes.c_uint64
    f.argtypes = [ctypes.c_void_p]
    return f


def nocomm_hook(state, bucket):
    """A DDP communication hook without communication: the bucket divided by
    the world size, the work DDP's default path does on each gradient before
    its all-reduce (a registered hook replaces that division)."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer().div_(dist.get_world_size()))
    return fut


def setup(a, backend, group):
    """One DDP replica (same seed, so the same initial weights) on group."""
    model = make_model(a)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, process_group=group, bucket_cap_mb=a.bucket_mb,
        gradient_as_bucket_view=a.bucket_view)
    if backend == "nocomm":
        ddp.register_comm_hook(None, nocomm_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr)
    return {"name": backend, "group": group, "model": model, "ddp": ddp, "opt": opt,
            "losses": [], "times": []}


def train_step(r, xs, ys, world):
    dist.barrier(group=r["group"])
    t0 = time.perf_counter()
    r["opt"].zero_grad()
    loss = torch.nn.functional.mse_loss(r["ddp"](xs), ys)
    loss.backward()
    r["opt"].step()
    r["times"].append(time.perf_counter() - t0)
    lt = loss.detach().clone()
    dist.all_reduce(lt, group=world)
    return lt.item()


def compute_step(r, xs, ys, world):
    """The same step without communication (DDP's no_sync: no bucket is
    all-reduced), so step - compute is what the all-reduces cost the step."""
    dist.barrier(group=world)
    t0 = time.perf_counter()
    r["opt"].zero_grad()
    with r["ddp"].no_sync():
        loss = torch.nn.functional.mse_loss(r["ddp"](xs), ys)
        loss.backward()
    r["opt"].step()
    return time.perf_counter() - t0


def allreduce_time(a, group, world, grads):
    """Mean time of one synchronous all-reduce of every gradient byte."""
    for _ in range(3):
        dist.all_reduce(grads, group=group)
    dist.barrier(group=world)
    t0 = time.perf_counter()
    for _ in range(a.ar_iters):
        dist.all_reduce(grads, group=group)
    return (time.perf_counter() - t0) / a.ar_iters


def worker(rank, a, port, q):
    import zccl_torch

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's renamed functions
    torch.set_num_threads(1)
    if "zccl" in a.backends:
        zccl_torch.use_activated_memory()  # models, buckets and data: zero-copy for zccl
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=a.nranks, timeout=datetime.timedelta(seconds=300))
    world = dist.distributed_c10d._get_default_group()
    groups = {"gloo": world}
    if "zccl" in a.backends:
        groups["zccl"] = dist.new_group(backend="zccl")
    reps = [setup(a, b, groups[b]) for b in a.backends]
    if a.explain:
        reps.append(setup(a, "nocomm", world))
    counter = staged_counter() if "zccl" in groups else None
    zcomm = zccl_torch.backend_of(groups["zccl"])._comm_handle() if counter else None
    staged0 = counter(zcomm) if counter else None
    for x, y in batches(a):
        xs, ys = x.chunk(a.nranks)[rank], y.chunk(a.nranks)[rank]
        for r in reps:  # interleaved: one step of each backend in turn
            r["losses"].append(train_step(r, xs, ys, world) / a.nranks)
    staged = counter(zcomm) - staged0 if counter else None
    out = {}
    for r in reps:
        if r["name"] == "nocomm":
            out["nocomm"] = [None, None, None, None, None]
            continue
        flat = torch.cat([p.detach().reshape(-1) for p in r["model"].parameters()])
        gathered = [torch.empty_like(flat) for _ in range(a.nranks)]
        dist.all_gather(gathered, flat, group=world)
        same = all(torch.equal(g, gathered[0]) for g in gathered)
        activated = None
        if r["name"] == "zccl":
            activated = all(zccl_torch.is_activated(p.grad) for p in r["model"].parameters())
        out[r["name"]] = [r["losses"], same, flat.numel() * 4, activated,
                          staged if r["name"] == "zccl" else None]
    # After the weights were compared: steps without communication (they
    # change the weights differently on each rank), interleaved likewise.
    comp = {r["name"]: [] for r in reps}
    for x, y in batches(a):
        xs, ys = x.chunk(a.nranks)[rank], y.chunk(a.nranks)[rank]
        for r in reps:
            comp[r["name"]].append(compute_step(r, xs, ys, world))
    grads = torch.zeros(out[a.backends[0]][2] // 4)
    ar = {b: [] for b in a.backends}
    for _ in range(3):  # alternating rounds of the plain all-reduce too
        for b in a.backends:
            ar[b].append(allreduce_time(a, groups[b], world, grads))
    for r in reps:
        steps = r["times"][a.warmup:] or r["times"]
        cs = comp[r["name"]][a.warmup:] or comp[r["name"]]
        art = sorted(ar[r["name"]])[1] if r["name"] in ar else 0.0
        tt = torch.tensor([sorted(steps)[len(steps) // 2], sum(steps) / len(steps),
                           art, sorted(cs)[len(cs) // 2]],
                          dtype=torch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX, group=world)
        out[r["name"]] += [tt[0].item(), tt[1].item(), tt[2].item(), tt[3].item()]
    if rank == 0:
        q.put(out)
    dist.barrier(group=world)
    del reps
    dist.destroy_process_group()


def run(a):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    q = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(worker, args=(a, port, q), nprocs=a.nranks, start_method="spawn")
    return q.get()


def explain(a, res):
    """Each backend's median step as compute + DDP's own work + exposed all-reduces."""
    nc_step, nc_comp = res["nocomm"][5], res["nocomm"][8]
    print("# where the step goes (medians, ms): compute = the replica's no_sync step; DDP's "
          "own work = nocomm's step - its compute; all-reduces = the rest of the step")
    print("# %-6s %10s %10s %16s %14s" % ("backend", "step", "compute", "DDP's own work",
                                           "all-reduces"))
    print("  %-6s %10.3f %10.3f %16.3f %14s" % ("nocomm", nc_step * 1e3, nc_comp * 1e3,
                                                 (nc_step - nc_comp) * 1e3, "-"))
    own = nc_step - nc_comp
    for b in a.backends:
        step, comp = res[b][5], res[b][8]
        print("  %-6s %10.3f %10.3f %16.3f %14.3f" % (b, step * 1e3, comp * 1e3, own * 1e3,
                                                       (step - comp - own) * 1e3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="both", choices=["gloo", "zccl", "both"])
    ap.add_argument("-n", "--nranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--inp", type=int, default=64)
    ap.add_argument("--out", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--bucket-mb", type=float, default=0.25)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--ar-iters", type=int, default=10)
    ap.add_argument("--explain", type=int, default=1,
                    help="1: also train a replica whose DDP hook does not communicate, and "
                         "split each step into compute, DDP's own work and the all-reduces")
    ap.add_argument("--bucket-view", type=int, default=1,
                    help="DDP gradient_as_bucket_view (1: gradients are views of the buckets)")
    a = ap.parse_args()
    if a.batch % a.nranks:
        sys.exit("--batch must be a multiple of the rank count")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    a.backends = ["gloo", "zccl"] if a.backend == "both" else [a.backend]
    ref = serial(a)
    print("# ddp_train: MLP %d -> %d x %d (%d layers) -> %d, batch %d on %d ranks, %d steps per "
          "backend, interleaved in one run (first %d not timed); step = median, mean over the "
          "timed steps" % (a.inp, a.width, a.width, a.layers, a.out, a.batch, a.nranks, a.steps,
                           a.warmup))
    print("# compute = the step under DDP's no_sync (no all-reduce); comm share = (step - "
          "compute) / step; allreduce = one synchronous all_reduce of all gradient bytes")
    print("# %-6s %10s %10s %12s %10s %14s %12s %14s %10s %10s %10s" % (
        "backend", "step(ms)", "mean(ms)", "compute(ms)", "comm share", "allreduce(ms)",
        "grad bytes", "max loss rdiff", "weights", "activated", "staged"))
    res = run(a)
    ok = True
    for b in a.backends:
        losses, same, nbytes, activated, staged, step, mean, ar, comp = res[b]
        rd = max(abs(l - r) / max(abs(r), 1e-12) for l, r in zip(losses, ref))
        good = same and rd <= a.rtol
        ok = ok and good
        print("  %-6s %10.3f %10.3f %12.3f %9.0f%% %14.3f %12d %14.2e %10s %10s %10s" % (
            b, step * 1e3, mean * 1e3, comp * 1e3, 100.0 * max(step - comp, 0.0) / step,
            ar * 1e3, nbytes, rd, "identical" if same else "DIFFER",
            "-" if activated is None else ("yes" if activated else "NO"),
            "-" if staged is None else staged))
        if staged is not None:
            print("ddp_train: %s staged %d bytes in training (0 = every bucket zero-copy)" % (
                b, staged))
        print("ddp_train: %s loss first %.5f last %.5f (serial %.5f -> %.5f): %s" % (
            b, losses[0], losses[-1], ref[0], ref[-1], "OK" if good else "MISMATCH"))
    if "nocomm" in res:
        explain(a, res)
    if "gloo" in res and "zccl" in res:
        sp = res["gloo"][5] / res["zccl"][5]
        print("target DDP step >= 2x faster than Gloo: %s (%.2fx median step, %.2fx mean; "
              "all-reduce %.1fx)" % ("MET" if sp >= 2 else "MISSED", sp,
                                     res["gloo"][6] / res["zccl"][6],
                                     res["gloo"][7] / res["zccl"][7]))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
