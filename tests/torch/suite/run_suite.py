"""PyTorch's own backend suite (DistributedTest._DistTestBase, spawn-based, as
test/distributed/test_distributed_spawn.py builds it) on Gloo and on zccl.

Modes:
  gloo          BACKEND=gloo, torch's Gloo: the reference.
  zccl          BACKEND=zccl, zccl_torch registered and added to the CPU feature
                sets Gloo is in (DistTestCases.backend_feature "ddp", "subgroup",
                "plugin").
  zccl-as-gloo  BACKEND=gloo, but every process group the suite makes gets zccl's
                backend (torch's _new_process_group_helper is wrapped to build
                "zccl" wherever "gloo" is asked for, and the group is then
                recorded as "gloo"), so the tests gated on the name "gloo" run on
                zccl too. The profiler events the suite looks for by Gloo's name
                ("gloo:all_reduce") are looked for by zccl's ("zccl:all_reduce"),
                or not at all with STANDIN_PROFILER=off.
                Torch's ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) still
                makes its own Gloo helper group for its checks.

Commands:
  run_suite.py all [--modes M..] [--world-sizes N..] [--tests F] [--subset ci] --out DIR
      per world size one child per mode, every test run in each mode in turn
      (a run cut short has the same tests in every mode), writing
      DIR/<mode>_np<N>.csv and .log; then
      the table (DIR/table.txt). Exit status 1 when a test fails on a zccl mode
      that passes on Gloo in the same run, or (no gloo mode run) fails at all.
  run_suite.py serve   (a mode's child: reads ZT_SUITE_MODE, WORLD_SIZE, ...;
                        runs the test names it reads from stdin)
  run_suite.py table DIR

The spawn start method re-imports this module in every rank process, so the
mode's patches are made at import time, from the environment (ZT_SUITE_MODE),
before torch's test module is imported: its skip decorators read the feature
sets when the class is defined.
"""
import argparse
import csv
import fnmatch
import glob
import fcntl
import os
import re
import select as select_mod
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import unittest

MODES = ("gloo", "zccl", "zccl-as-gloo")

# SUBSET=ci: every collective the suite tests on CPU, DDP and a timeout case; a
# few minutes at np 2 on two cores. (2.13's suite tests all_to_all and the
# coalescing manager on CPU only for MPI and NCCL: tests/torch has its own.
# test_ddp_logging_data_cpu is left out: it wants DDP's logged backend name to
# be the group's, and torch names every plugin's ProcessGroup "custom".)
CI_SUBSET = [
    "test_all_reduce_sum", "test_all_reduce_product", "test_all_reduce_min",
    "test_all_reduce_max", "test_all_reduce_sum_complex", "test_all_reduce_sum_async",
    "test_all_reduce_coalesced_sum",
    "test_broadcast", "test_reduce_sum", "test_reduce_max",
    "test_all_gather", "test_all_gather_coalesced_simple", "test_all_gather_object_default_pg",
    "test_gather", "test_scatter",
    "test_send_recv", "test_isend", "test_irecv", "test_send_recv_any_source",
    "test_batch_isend_irecv_gloo",
    "test_barrier", "test_barrier_group", "test_monitored_barrier_gloo",
    "test_DistributedDataParallelCPU", "test_DistributedDataParallelCPU_grad_is_view",
    "test_DistributedDataParallel_requires_grad",
    "test_barrier_timeout_global",
]

STATUSES = ("passed", "failed", "skipped", "notrun")


# --------------------------------------------------------------------------
# Mode set-up, at import time in the driver's child and in every rank.

def _standin_gloo():
    """Wraps torch's group factory: a group asked for with "gloo" on CPU is
    built with "zccl" and then recorded as "gloo" (so get_backend and new
    groups without a backend argument still say gloo)."""
    import torch.distributed.distributed_c10d as c10d

    real = c10d._new_process_group_helper
    if getattr(real, "_zt_standin", False):
        return

    def to_zccl(backend):
        s = str(backend)
        if ":" not in s:
            return "zccl" if s.lower() == "gloo" else s
        parts = []
        for item in s.split(","):
            dev, _, name = item.partition(":")
            if name.lower() == "gloo":
                if dev.strip().lower() != "cpu":
                    continue  # zccl is a CPU backend; there is no GPU here
                name = "zccl"
            parts.append("%s:%s" % (dev, name))
        return ",".join(parts)

    def helper(group_size, group_rank, global_ranks_in_group, backend, *args, **kwargs):
        swapped = to_zccl(backend)
        pg, prefix_store = real(group_size, group_rank, global_ranks_in_group,
                                c10d.Backend(swapped) if swapped != str(backend) else backend,
                                *args, **kwargs)
        if swapped != str(backend) and pg is not None and pg in c10d._world.pg_map:
            _, store = c10d._world.pg_map[pg]
            c10d._world.pg_map[pg] = (backend, store)
            c10d._world.pg_backend_config[pg] = str(c10d.BackendConfig(backend)).replace(
                ",cuda:gloo", "")
        return pg, prefix_store

    helper._zt_standin = True
    c10d._new_process_group_helper = helper


def _fake_zccl():
    """ZT_SUITE_ZCCL_IS_GLOO=1 checks the driver itself: "zccl" is registered as
    torch's own Gloo under another name, so both zccl modes should match gloo
    except where a test reads the backend's name or type."""
    import torch.distributed as dist
    from torch.distributed import ProcessGroupGloo

    def create(store, rank, size, timeout):
        return ProcessGroupGloo(store, rank, size, timeout)

    if "ZCCL" not in dist.Backend._plugins:
        dist.Backend.register_backend("zccl", create, devices=["cpu"])


def _setup(mode):
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
    from torch.testing._internal import common_distributed as cd

    # Per-test time bound (torch's own default is 300 s, 500 for a few).
    limit = int(os.environ.get("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "300"))
    for k in list(cd.TIMEOUT_OVERRIDE):
        cd.TIMEOUT_OVERRIDE[k] = min(cd.TIMEOUT_OVERRIDE[k], limit)
    if mode in ("zccl", "zccl-as-gloo"):
        if os.environ.get("ZT_SUITE_ZCCL_IS_GLOO") == "1":
            _fake_zccl()
        else:
            import zccl_torch  # noqa: F401  (registers "zccl" for the CPU)
    if mode == "zccl":
        for feature in ("ddp", "subgroup", "plugin"):
            cd.DistTestCases.backend_feature[feature].add("zccl")
        # zccl records its ops for the profiler as Gloo does ("zccl:all_reduce"):
        # the tests check them as they check Gloo's.
        from torch.testing._internal.distributed import distributed_test as dt

        for lst in (dt.PROFILING_SUPPORTED_BACKENDS, dt.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):
            if "zccl" not in lst:
                lst.append("zccl")
    elif mode == "zccl-as-gloo":
        _standin_gloo()


def dist_gloo():
    import torch.distributed as dist

    return dist.Backend.GLOO


def _make_class():
    import torch
    from torch.testing._internal.distributed import distributed_test as dt
    from torch.testing._internal.distributed.distributed_test import (
        DistributedTest, TestDistBackend)

    if MODE == "zccl-as-gloo" and os.environ.get("STANDIN_PROFILER") == "off":
        # Not checked at all, as for zccl as a CPU backend: shows what else a
        # test checks after the op (its values) while zccl records no events.
        for lst in (dt.PROFILING_SUPPORTED_BACKENDS, dt.CUDA_PROFILING_SUPPORTED_BACKENDS,
                    dt.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):
            while dist_gloo() in lst:
                lst.remove(dist_gloo())
    elif MODE == "zccl-as-gloo" and not getattr(dt.get_profiling_event, "_zt_standin", False):
        # The suite looks for Gloo's profiler events ("gloo:all_reduce") and
        # some tests compare their names; the stand-in's are named for zccl:
        # the events found under zccl's name are renamed to what the suite
        # asked for (and found again under it), so the test checks that zccl
        # records each op as Gloo does, not what it is called.
        real_event = dt.get_profiling_event

        def get_profiling_event(event_name, *args, **kwargs):
            if not event_name.startswith("gloo:"):
                return real_event(event_name, *args, **kwargs)
            found = real_event("zccl:" + event_name[len("gloo:"):], *args, **kwargs)
            seen = {id(e) for e in found}
            found += [e for e in real_event(event_name, *args, **kwargs) if id(e) not in seen]
            for e in found:
                e.name = event_name
            return found

        get_profiling_event._zt_standin = True
        dt.get_profiling_event = get_profiling_event

    class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._spawn_processes()
            torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

    # Ranks get the class by name (pickled as __main__.<name>).
    TestDistBackendWithSpawn.__qualname__ = "TestDistBackendWithSpawn"
    TestDistBackendWithSpawn.__module__ = __name__
    return TestDistBackendWithSpawn


MODE = os.environ.get("ZT_SUITE_MODE")
if MODE:
    _setup(MODE)
    TestDistBackendWithSpawn = _make_class()


# --------------------------------------------------------------------------
# The child: run the selected tests, one CSV row each.

def first_error_line(text):
    """One line for an error: the first rank's exception with the line after it
    when it is short ("Scalars are not equal!" / "Expected 1 but got 0."), and
    the suite's line that raised it."""
    if not text:
        return ""
    m = re.search(r"Process \d+ exited with error code \d+ and exception:\n", text)
    if m:
        text = re.split(r"\nProcess \d+ exited with error code", text[m.end():])[0]
    lines = [ln.rstrip() for ln in text.splitlines()]
    where, exc = "", None
    for i, ln in enumerate(lines):
        f = re.match(r'\s*File "[^"]*/(distributed_test\.py|run_suite\.py)", line (\d+)', ln)
        if f and i + 1 < len(lines):
            where = "%s:%s %s" % (f.group(1), f.group(2), lines[i + 1].strip())
        if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Timeout)\b", ln):
            exc = i
    if exc is None:
        first = next((ln for ln in lines if ln.strip()), "")
        return first[:300]
    msg = lines[exc]
    rest = [ln.strip() for ln in lines[exc + 1:exc + 4] if ln.strip()]
    if rest and (msg.endswith(("!", ":")) or len(msg) < 40):
        msg += " " + rest[0]
    if where:
        msg += " [at %s]" % where
    return msg[:400]


def select(names, terms, subset):
    if subset == "ci":
        names = [n for n in names if n in CI_SUBSET]
    elif subset:
        raise SystemExit("unknown SUBSET %r (known: ci)" % subset)
    if terms:
        inc = [t for t in terms if not t.startswith("-")]
        exc = [t[1:] for t in terms if t.startswith("-")]

        def hit(n, t):
            return fnmatch.fnmatchcase(n, t) if any(c in t for c in "*?[") else t in n

        names = [n for n in names
                 if (not inc or any(hit(n, t) for t in inc)) and not any(hit(n, t) for t in exc)]
    return names


class Collector(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.rows = {}

    def _put(self, test, status, msg):
        name = test.id().split(".")[-1]
        self.rows[name] = (status, msg)

    def addSuccess(self, test):
        self._put(test, "passed", "")

    def addFailure(self, test, err):
        self._put(test, "failed", first_error_line(self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        self._put(test, "failed", first_error_line(self._exc_info_to_string(err, test)))

    def addSkip(self, test, reason):
        self._put(test, "skipped", str(reason).splitlines()[0][:200] if reason else "")

    def addExpectedFailure(self, test, err):
        self._put(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        self._put(test, "failed", "unexpected success")


def run_one(cls, name):
    """Runs one test of the class; (status, seconds, message)."""
    res = Collector()
    t0 = time.time()
    try:
        cls(name).run(res)
    except Exception:  # noqa: BLE001 - one broken test must not end the run
        res.rows[name] = ("failed", first_error_line(traceback.format_exc()))
    status, msg = res.rows.get(name, ("failed", "no result recorded"))
    return status, time.time() - t0, msg


def serve_main(args):
    """The child of one mode: prints the selected test names on one line, then
    runs each name read from stdin, answering one tab-separated line each."""
    cls = TestDistBackendWithSpawn
    names = sorted(unittest.TestLoader().getTestCaseNames(cls))
    names = select(names, args.tests.split() if args.tests else [], args.subset)
    out = sys.stdout
    sys.stdout = sys.stderr  # the tests' own prints go to the log
    out.write("NAMES\t%s\n" % " ".join(names))
    out.flush()
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        status, dt, msg = run_one(cls, name)
        out.write("DONE\t%s\t%s\t%.1f\t%s\n" % (name, status, dt, msg.replace("\t", " ")
                                                   .replace("\n", " ")))
        out.flush()


# --------------------------------------------------------------------------
# The parent: one child per (mode, world size), then the table.

def load(outdir):
    rows = {}
    for path in sorted(glob.glob(os.path.join(outdir, "*_np*.csv"))):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                rows.setdefault((r["mode"], int(r["world_size"])), {})[r["test"]] = r
    return rows


def table(outdir):
    rows = load(outdir)
    out = ["%-14s %3s %7s %7s %8s %7s %6s" % ("mode", "np", "passed", "failed", "skipped",
                                            "notrun", "total")]
    for (mode, ws) in sorted(rows, key=lambda k: (k[1], MODES.index(k[0]) if k[0] in MODES
                                                  else 9)):
        tests = rows[(mode, ws)]
        c = {s: 0 for s in STATUSES}
        for r in tests.values():
            c[r["status"]] = c.get(r["status"], 0) + 1
        out.append("%-14s %3d %7d %7d %8d %7d %6d" % (mode, ws, c["passed"], c["failed"],
                   c["skipped"], c["notrun"], len(tests)))
    regress = 0
    for (mode, ws) in sorted(rows):
        if mode == "gloo":
            continue
        ref = rows.get(("gloo", ws))
        tests = rows[(mode, ws)]
        if ref is None:
            bad = [(n, r) for n, r in sorted(tests.items()) if r["status"] == "failed"]
            head = "%s np%d: failed (no gloo run to compare with)" % (mode, ws)
        else:
            bad = [(n, tests[n]) for n, r in sorted(ref.items())
                   if r["status"] == "passed" and n in tests and tests[n]["status"] == "failed"]
            skipped = [n for n, r in sorted(ref.items())
                       if r["status"] == "passed" and n in tests
                       and tests[n]["status"] == "skipped"]
            head = "%s np%d: passes on gloo, fails on %s" % (mode, ws, mode)
        out.append("")
        out.append("%s: %d" % (head, len(bad)))
        for n, r in bad:
            out.append("  %-60s %s" % (n, r["message"]))
        if ref is not None and skipped:
            # Gated on the name "gloo" or on a feature set zccl is not in.
            out.append("  and %d skipped here that pass on gloo: %s" % (
                len(skipped), " ".join(skipped)))
        regress += len(bad)
    text = "\n".join(out) + "\n"
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return regress


def _killpg(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class ModeChild:
    """One mode's serving child (its own session: killed with its ranks)."""

    def __init__(self, mode, ws, args, outdir):
        env = dict(os.environ)
        env.update(ZT_SUITE_MODE=mode, WORLD_SIZE=str(ws),
                   BACKEND="zccl" if mode == "zccl" else "gloo",
                   DISTRIBUTED_TESTS_DEFAULT_TIMEOUT=str(args.test_timeout))
        env.setdefault("OMP_NUM_THREADS", "1")
        self.tmp = tempfile.mkdtemp(prefix="zt_suite_")
        env["TEMP_DIR"] = self.tmp
        os.makedirs(os.path.join(self.tmp, "barrier"), exist_ok=True)
        # As PyTorch's CI runs it with a file:// init: the tests gated on it
        # (the barrier timeouts) run too; each test's setUp then points it at a
        # fresh file. --init env is the env:// variant.
        env["INIT_METHOD"] = ("file://" + os.path.join(self.tmp, "init_dir", "shared_init_file")
                              if args.init == "file" else "env://")
        cmd = [sys.executable, os.path.abspath(__file__), "serve"]
        if args.tests:
            cmd += ["--tests", args.tests]
        if args.subset:
            cmd += ["--subset", args.subset]
        self.mode, self.ws = mode, ws
        self.log = open(os.path.join(outdir, "%s_np%d.log" % (mode, ws)), "w")
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, text=True, start_new_session=True)
        self.csvf = open(os.path.join(outdir, "%s_np%d.csv" % (mode, ws)), "w", newline="")
        self.csv = csv.writer(self.csvf)
        self.csv.writerow(["mode", "world_size", "test", "status", "seconds", "message"])
        self.dead = None
        self.dead_status = "notrun"  # of the tests after a child died or hung

    def names(self, limit_s):
        line = self._read(limit_s)
        if not line or not line.startswith("NAMES\t"):
            # A mode that cannot start (e.g. zccl_torch does not import) fails
            # every test, so the run cannot pass with nothing run.
            self.dead = "the %s child did not start (see its log)" % self.mode
            self.dead_status = "failed"
            return None
        return line.rstrip("\n").split("\t", 1)[1].split()

    def _read(self, limit_s):
        ready = select_mod.select([self.p.stdout], [], [], limit_s)[0]
        return self.p.stdout.readline() if ready else None

    def run(self, name, limit_s):
        if self.dead:
            return self.record(name, self.dead_status, 0, self.dead)
        t0 = time.time()
        try:
            self.p.stdin.write(name + "\n")
            self.p.stdin.flush()
            line = self._read(limit_s)
        except (BrokenPipeError, OSError):
            line = None
        if not line or not line.startswith("DONE\t"):
            self.dead = "the %s child died or hung at %s" % (self.mode, name)
            self.kill()
            return self.record(name, "failed", time.time() - t0, self.dead)
        _, got, status, dt, msg = line.rstrip("\n").split("\t", 4)
        return self.record(name, status, float(dt), msg)

    def record(self, name, status, dt, msg):
        self.csv.writerow([self.mode, self.ws, name, status, "%.1f" % dt, msg])
        self.csvf.flush()
        return status, dt, msg

    def kill(self):
        _killpg(self.p.pid)

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except Exception:  # noqa: BLE001
            self.kill()
        self.kill()
        self.csvf.close()
        self.log.close()
        subprocess.run(["rm", "-rf", self.tmp])


class Lock:
    """flock of $LOCK around each test (shared CPU-heavy work takes turns with
    it test by test instead of waiting for the whole run)."""

    def __init__(self, path):
        self.f = open(path, "a") if path else None

    def __enter__(self):
        if self.f:
            fcntl.flock(self.f.fileno(), fcntl.LOCK_EX)

    def __exit__(self, *exc):
        if self.f:
            fcntl.flock(self.f.fileno(), fcntl.LOCK_UN)


def all_main(args):
    """Per world size: one serving child per mode; each test runs in every mode
    in turn, so a run cut short by its time bound has the same tests in every
    mode."""
    os.makedirs(args.out, exist_ok=True)
    for m in args.modes:
        if m not in MODES:
            raise SystemExit("unknown mode %r (known: %s)" % (m, ", ".join(MODES)))
    t_end = time.time() + args.time_limit if args.time_limit else float("inf")
    lock = Lock(args.lock)
    children = []
    unstarted = []

    def stop(sig, frame):
        for c in children:
            c.kill()
        sys.exit(128 + sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    for ws in args.world_sizes:
        t0 = time.time()
        children = [ModeChild(m, ws, args, args.out) for m in args.modes]
        lists = [c.names(600) for c in children]
        names = next((n for n in lists if n is not None), [])
        unstarted += ["%s np%d" % (c.mode, ws) for c in children if c.dead]
        print("== world size %d: %d tests x %s" % (ws, len(names), " ".join(args.modes)),
              flush=True)
        for i, name in enumerate(names):
            cells = []
            on_gloo = None
            for c in children:
                if time.time() >= t_end:
                    c.record(name, "notrun", 0, "the run's time bound passed")
                    cells.append("notrun")
                    continue
                if args.follow_gloo and on_gloo == "skipped":
                    c.record(name, "notrun", 0, "skipped on gloo (--follow-gloo)")
                    cells.append("notrun")
                    continue
                with lock:
                    status, dt, msg = c.run(name, args.test_timeout + 120)
                if c.mode == "gloo":
                    on_gloo = status
                cells.append("%s %.0fs" % (status, dt))
            print("[np%d %d/%d] %-64s %s" % (ws, i + 1, len(names), name, " | ".join(cells)),
                  flush=True)
        for c in children:
            c.close()
        print("== world size %d done in %.0f s" % (ws, time.time() - t0), flush=True)
    print()
    regress = table(args.out)
    if unstarted:
        print("did not start (see their logs): %s" % ", ".join(unstarted))
    return 1 if regress or unstarted else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("all")
    a.add_argument("--modes", nargs="+", default=list(MODES))
    a.add_argument("--world-sizes", nargs="+", type=int, default=[2, 3])
    a.add_argument("--tests", default="", help="space-separated substrings or globs; -X excludes")
    a.add_argument("--subset", default="")
    a.add_argument("--out", required=True)
    a.add_argument("--test-timeout", type=int, default=120, help="seconds per test")
    a.add_argument("--time-limit", type=float, default=0, help="seconds for the whole run")
    a.add_argument("--lock", default="", help="a file to flock around each test")
    a.add_argument("--follow-gloo", action="store_true",
                   help="run a test on zccl only when gloo (listed first) did not skip it")
    a.add_argument("--init", choices=("file", "env"), default="file",
                   help="INIT_METHOD the suite sees (file:// also runs the timeout tests)")
    r = sub.add_parser("serve")
    r.add_argument("--tests", default="")
    r.add_argument("--subset", default="")
    t = sub.add_parser("table")
    t.add_argument("out")
    args = ap.parse_args()
    if args.cmd == "all":
        sys.exit(all_main(args))
    if args.cmd == "serve":
        if not MODE:
            raise SystemExit("serve: ZT_SUITE_MODE is not set (use `all`)")
        serve_main(args)
        return
    sys.exit(1 if table(args.out) else 0)


if __name__ == "__main__":
    main()
