"""Faults: a killed rank makes every other rank's wait() raise, naming the
zccl error, well within the group's timeout; a stuck rank makes them raise
HCCL_E_TIMEOUT after the timeout; mismatched collectives (rank 0 all_reduce,
the others broadcast) raise on every rank within the timeout; a barrier only
rank 0 enters raises " Timed out " (what torch's suite matches for a CPU
backend) no sooner than the timeout, and monitored_barrier names the rank
that did not come; nobody hangs in destroy_process_group or at exit.
Usage: test_torch_fault.py NRANKS (3)
"""
import os
import re
import signal
import sys
import time

import torch
import torch.distributed as dist

import zt_harness

TIMEOUT_S = 60  # the group's timeout: a dead peer must be seen far sooner


def killed(rank, n):
    c = zt_harness.Checker(rank)
    t = torch.ones(1 << 16)
    dist.all_reduce(t)
    c.equal("first all_reduce", t, torch.full((1 << 16,), float(n)))
    if rank == n - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.time()
    msg = ""
    try:
        w = dist.all_reduce(t, async_op=True)
        w.wait()
    except RuntimeError as e:
        msg = str(e)
    dt = time.time() - t0
    c.true("wait() raised after the kill (message %r)" % msg, "HCCL_E_" in msg)
    c.true("raised in %.1f s, under a third of the %d s timeout" % (dt, TIMEOUT_S),
           dt < TIMEOUT_S / 3)
    # later ops fail at once: the communicator is broken
    t1 = time.time()
    try:
        dist.all_reduce(torch.ones(4))
        c.true("a later op fails", False)
    except RuntimeError as e:
        c.true("a later op names the error", "HCCL_E_" in str(e))
    c.true("the later op failed fast", time.time() - t1 < 5)
    c.finish()
    print("rank %d: wait raised in %.2f s: %s" % (rank, dt, msg.splitlines()[0]))
    # returning runs destroy_process_group with a dead peer: it must not hang


def stuck(rank, n):
    c = zt_harness.Checker(rank)
    dist.barrier()
    if rank == 1:
        time.sleep(8)  # alive but not taking part
        os._exit(0)
    t0 = time.time()
    msg = ""
    try:
        dist.all_reduce(torch.ones(8))
    except RuntimeError as e:
        msg = str(e)
    dt = time.time() - t0
    c.true("timeout named (message %r)" % msg, "HCCL_E_TIMEOUT" in msg or "Timed out" in msg)
    c.true("raised after %.1f s, near the 3 s timeout" % dt, 2.0 <= dt < 20)
    c.finish()
    os._exit(0)


def mismatch(rank, n):
    c = zt_harness.Checker(rank)
    dist.barrier()
    t = torch.ones(1 << 10)
    t0 = time.time()
    msg = ""
    try:
        if rank == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, 0)
    except RuntimeError as e:
        msg = str(e)
    dt = time.time() - t0
    c.true("mismatch raised (message %r)" % msg, "zccl" in msg)
    c.true("raised in %.1f s, within the 3 s timeout and a margin" % dt, dt < 20)
    c.finish()
    t1 = time.time()
    dist.destroy_process_group()
    c.true("destroy_process_group took %.1f s" % (time.time() - t1), time.time() - t1 < 20)
    c.finish()
    os._exit(0)


def barriers(rank, n):
    import datetime

    c = zt_harness.Checker(rank)
    dist.barrier()
    timeout = datetime.timedelta(seconds=1)
    if rank < n - 1:  # the last rank never comes
        msg = ""
        try:
            dist.monitored_barrier(timeout=timeout, wait_all_ranks=True)
        except RuntimeError as e:
            msg = str(e)
        want = ("Rank %d failed to pass monitoredBarrier" % (n - 1) if rank == 0 else
                "Rank %d successfully reached monitoredBarrier, but received errors while "
                "waiting for send/recv from rank 0" % rank)
        c.true("monitored_barrier: %r in %r" % (want, msg), want in msg)
    g = dist.new_group(timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        t0 = time.time()
        msg = ""
        try:
            dist.barrier(group=g)
        except RuntimeError as e:
            msg = str(e)
        dt = time.time() - t0
        c.true("barrier timeout worded as torch expects (%r)" % msg,
               re.search(" (Timed out|closed|timeout) ", msg) is not None)
        c.true("barrier raised after %.1f s, not before the 2 s timeout" % dt, 1.9 <= dt < 20)
    else:
        time.sleep(5)  # alive, as torch's suite keeps them (a dead peer fails it sooner)
    c.finish()
    os._exit(0)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    # The killed rank exits by SIGKILL: the harness expects exactly that one.
    for name, fn, timeout_s, expect_dead in (("killed", killed, TIMEOUT_S, n - 1),
                                             ("stuck", stuck, 3, None),
                                             ("mismatch", mismatch, 3, None),
                                             ("barriers", barriers, 30, None)):
        t0 = time.time()
        bad = zt_harness.launch(fn, n, timeout_s=timeout_s, limit_s=120, expect_dead=expect_dead)
        if bad:
            print("\n".join("%s: %s" % (name, b) for b in bad))
            sys.exit(1)
        print("%s: %d ranks behaved in %.1f s" % (name, n, time.time() - t0))
