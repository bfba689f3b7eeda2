"""Shared launcher and checks for the zccl_torch tests.

run(fn, nranks, *args) starts nranks processes with torch.multiprocessing
(spawn), each initialising the "zccl" process group (or another backend:
backend=, e.g. "gloo" to check a test's logic against torch's own) over a
file store (no port to race for on a busy machine), runs fn(rank, nranks, *args) in each and
fails (exit status 1, with every rank's error) when any rank raised, exited
badly or did not finish within the time limit. The parent watches every rank
at once: when one fails, the rest are killed after a short grace instead of
being left blocked until the test's timeout (launch() returns the problems). Each test file is one spawned run holding
many cases, since importing torch dominates the time on a small machine.
"""
import ctypes
import datetime
import multiprocessing.connection as mp_connection
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def store_path():
    """A fresh path for a FileStore (torch creates the file)."""
    d = tempfile.mkdtemp(prefix="zt_store_")
    return os.path.join(d, "store")


def _entry(rank, nranks, path, fn, args, timeout_s, errq, backend="zccl"):
    # torch 2.x warns of its own private and renamed functions the tests call
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    try:
        if "zccl" in backend:
            import zccl_torch  # noqa: F401  (registers "zccl")

        dist.init_process_group(
            backend,
            init_method="file://" + path,
            rank=rank,
            world_size=nranks,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        fn(rank, nranks, *args)
        dist.destroy_process_group()
    except BaseException:
        errq.put((rank, traceback.format_exc()))
        sys.stderr.write("rank %d FAILED\n%s" % (rank, traceback.format_exc()))
        sys.stderr.flush()
        os._exit(1)


def _drain(errq, errors):
    while not errq.empty():
        r, tb = errq.get()
        errors.setdefault(r, tb)


def launch(fn, nranks, *args, timeout_s=120, limit_s=600, expect_dead=None, grace_s=3.0,
           entry=None, backend="zccl"):
    """Starts nranks ranks running fn and watches them all at once. Returns
    the list of problems (empty when every rank exited 0, or by SIGKILL for
    rank expect_dead). Fails fast: once a rank fails (non-zero exit or a
    raised exception), the others get grace_s to report their own errors and
    are then killed, so one failed rank never leaves its peers blocked until
    the test's timeout; each failed rank's traceback is in the list."""
    ctx = mp.get_context("spawn")
    errq = ctx.SimpleQueue()
    path = store_path()
    t0 = time.time()
    procs = []
    for r in range(nranks):
        p = ctx.Process(target=entry or _entry, args=(r, nranks, path, fn, args, timeout_s, errq),
                        kwargs={} if entry else {"backend": backend})
        p.start()
        procs.append(p)
    bad, errors = [], {}
    live = dict(enumerate(procs))
    deadline = t0 + limit_s
    first_failure = None
    while live:
        now = time.time()
        stop = deadline if first_failure is None else min(deadline, first_failure + grace_s)
        if now >= stop:
            break
        ready = mp_connection.wait([p.sentinel for p in live.values()], min(0.2, stop - now))
        _drain(errq, errors)
        for r, p in list(live.items()):
            if p.sentinel not in ready and p.is_alive():
                continue
            p.join()
            del live[r]
            ok = p.exitcode == 0 or (r == expect_dead and p.exitcode == -signal.SIGKILL)
            if r == expect_dead and p.exitcode != -signal.SIGKILL:
                bad.append("rank %d exit status %s, expected SIGKILL" % (r, p.exitcode))
            elif not ok:
                bad.append("rank %d exit status %s" % (r, p.exitcode))
            if not ok and first_failure is None:
                first_failure = time.time()
        if errors and first_failure is None:
            first_failure = time.time()
    for r, p in live.items():
        p.kill()
        p.join()
        if first_failure is not None:
            bad.append("rank %d killed: still running %.1f s after the first failure" % (
                r, grace_s))
        else:
            bad.append("rank %d did not finish within %d s" % (r, limit_s))
    _drain(errq, errors)
    for r in sorted(errors):
        bad.append("rank %d raised:\n%s" % (r, errors[r]))
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    return bad


def run(fn, nranks, *args, timeout_s=120, limit_s=600, backend="zccl"):
    """Runs fn on nranks ranks; exits the test with status 1 on any failure."""
    t0 = time.time()
    bad = launch(fn, nranks, *args, timeout_s=timeout_s, limit_s=limit_s, backend=backend)
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print("%d ranks passed in %.1f s (%s)" % (nranks, time.time() - t0, backend))


def parse_args(default_ranks):
    """NRANKS [--backend NAME] from the command line (backend default zccl)."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("nranks", nargs="?", type=int, default=default_ranks)
    ap.add_argument("--backend", default="zccl", help="zccl, or gloo to check the test itself")
    return ap.parse_args()


class Checker:
    """Counts cases and collects mismatches instead of stopping at the first."""

    def __init__(self, rank):
        self.rank = rank
        self.cases = 0
        self.failures = []

    def equal(self, what, got, want):
        self.cases += 1
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            self.failures.append("%s: got %s, want %s" % (what, got.flatten()[:8].tolist(),
                                                           want.flatten()[:8].tolist()))

    def close(self, what, got, want, rtol=1e-5, atol=1e-6):
        """Same dtype and shape, values within tolerance (rounding may differ)."""
        self.cases += 1
        if (got.dtype != want.dtype or got.shape != want.shape
                or not torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol)):
            self.failures.append("%s: got %s, want %s" % (what, got.flatten()[:8].tolist(),
                                                           want.flatten()[:8].tolist()))

    def true(self, what, cond):
        self.cases += 1
        if not cond:
            self.failures.append(what)

    def raises(self, what, fn, needle):
        self.cases += 1
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the message is what is checked
            if needle not in str(e):
                self.failures.append("%s: message %r lacks %r" % (what, str(e), needle))
            return
        self.failures.append("%s: did not raise" % what)

    def finish(self):
        if self.failures:
            raise AssertionError("rank %d: %d of %d cases failed:\n  %s" % (
                self.rank, len(self.failures), self.cases, "\n  ".join(self.failures[:40])))
        if self.rank == 0:
            print("rank 0: %d cases passed" % self.cases)


def staged_bytes(pg):
    """Bytes zccl staged through CCL buffers on pg's communicator, from the
    counter libhccl exports for tests (None when the library lacks it)."""
    lib = os.environ.get("ZT_LIBHCCL")
    if not lib:
        return None
    h = ctypes.CDLL(lib)
    if not hasattr(h, "zccl_comm_staged_bytes"):
        return None
    f = h.zccl_comm_staged_bytes
    f.restype = ctypes.c_uint64
    f.argtypes = [ctypes.c_void_p]
    return int(f(ctypes.c_void_p(pg._comm_handle())))
