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
                ("gloo:all_reduce") are looked for by zccl's ("zccl:all_reduce").
                Torch's ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) still
                makes its own Gloo helper group for its checks.

Commands:
  run_suite.py all [--modes M..] [--world-sizes N..] [--tests F] [--subset ci] --out DIR
      one child per (mode, world size), each writing DIR/<mode>_np<N>.csv; then
      the table (DIR/table.txt). Exit status 1 when a test fails on a zccl mode
      that passes on Gloo in the same run, or (no gloo mode run) fails at all.
  run_suite.py run     (a child: reads ZT_SUITE_MODE, WORLD_SIZE, ...)
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
import os
import re
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
    elif mode == "zccl-as-gloo":
        _standin_gloo()


def _make_class():
    import torch
    from torch.testing._internal.distributed import distributed_test as dt
    from torch.testing._internal.distributed.distributed_test import (
        DistributedTest, TestDistBackend)

    if MODE == "zccl-as-gloo" and not getattr(dt.get_profiling_event, "_zt_standin", False):
        # The suite looks for Gloo's profiler events ("gloo:all_reduce"); the
        # stand-in's are named for zccl: the test then checks that zccl records
        # each op as Gloo does, not what it is called.
        real_event = dt.get_profiling_event

        def get_profiling_event(event_name, *args, **kwargs):
            if event_name.startswith("gloo:"):
                event_name = "zccl:" + event_name[len("gloo:"):]
            return real_event(event_name, *args, **kwargs)

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


def child_main(args):
    cls = TestDistBackendWithSpawn
    names = sorted(unittest.TestLoader().getTestCaseNames(cls))
    names = select(names, args.tests.split() if args.tests else [], args.subset)
    deadline = args.deadline or float("inf")
    mode, ws = os.environ["ZT_SUITE_MODE"], os.environ["WORLD_SIZE"]
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "world_size", "test", "status", "seconds", "message"])
        for i, name in enumerate(names):
            if time.time() >= deadline:
                w.writerow([mode, ws, name, "notrun", 0, "the run's time bound passed"])
                continue
            res = Collector()
            t0 = time.time()
            try:
                cls(name).run(res)
            except Exception:  # noqa: BLE001 - one broken test must not end the run
                res.rows[name] = ("failed", first_error_line(traceback.format_exc()))
            dt = time.time() - t0
            status, msg = res.rows.get(name, ("failed", "no result recorded"))
            w.writerow([mode, ws, name, status, "%.1f" % dt, msg])
            f.flush()
            print("[%s np%s %d/%d] %-70s %s %.1fs %s" % (mode, ws, i + 1, len(names), name,
                  status, dt, msg[:120] if status == "failed" else ""), flush=True)


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
                   if r["status"] == "passed" and n in tests
                   and tests[n]["status"] not in ("passed", "notrun")]
            head = "%s np%d: passes on gloo, not on %s" % (mode, ws, mode)
        out.append("")
        out.append("%s: %d" % (head, len(bad)))
        for n, r in bad:
            out.append("  %-60s %-8s %s" % (n, r["status"], r["message"]))
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


def all_main(args):
    os.makedirs(args.out, exist_ok=True)
    t_end = time.time() + args.time_limit if args.time_limit else None
    for ws in args.world_sizes:
        for mode in args.modes:
            if mode not in MODES:
                raise SystemExit("unknown mode %r (known: %s)" % (mode, ", ".join(MODES)))
            env = dict(os.environ)
            env.update(ZT_SUITE_MODE=mode, WORLD_SIZE=str(ws),
                       BACKEND="zccl" if mode == "zccl" else "gloo",
                       DISTRIBUTED_TESTS_DEFAULT_TIMEOUT=str(args.test_timeout))
            env.setdefault("OMP_NUM_THREADS", "1")
            tmp = tempfile.mkdtemp(prefix="zt_suite_")
            env["TEMP_DIR"] = tmp
            os.makedirs(os.path.join(tmp, "barrier"), exist_ok=True)
            # As PyTorch's CI runs it with a file:// init: the tests gated on it
            # (the barrier timeouts) run too; each test's setUp then points it
            # at a fresh file. --init env is the env:// variant.
            if args.init == "file":
                env["INIT_METHOD"] = "file://" + os.path.join(tmp, "init_dir", "shared_init_file")
            else:
                env["INIT_METHOD"] = "env://"
            csv_path = os.path.join(args.out, "%s_np%d.csv" % (mode, ws))
            cmd = [sys.executable, os.path.abspath(__file__), "run", "--csv", csv_path]
            if args.tests:
                cmd += ["--tests", args.tests]
            if args.subset:
                cmd += ["--subset", args.subset]
            if t_end:
                # The child stops starting tests at the bound; the parent kills
                # it a test's time later.
                cmd += ["--deadline", str(t_end)]
            print("== %s, world size %d -> %s" % (mode, ws, csv_path), flush=True)
            log = open(os.path.join(args.out, "%s_np%d.log" % (mode, ws)), "w")
            t0 = time.time()
            p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=log,
                                 text=True, start_new_session=True)
            # The child and its ranks are a session of their own: end them
            # with this process (timeout(1), ctest, ^C).
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, lambda s, f, pid=p.pid: (_killpg(pid), sys.exit(128 + s)))
            try:
                for line in p.stdout:
                    sys.stdout.write(line)
                    sys.stdout.flush()
                p.wait(timeout=(t_end - time.time() + args.test_timeout + 60) if t_end else None)
            except subprocess.TimeoutExpired:
                _killpg(p.pid)
                p.wait()
            finally:
                log.close()
                subprocess.run(["rm", "-rf", tmp])
            print("== %s np%d done in %.0f s (exit %s)" % (mode, ws, time.time() - t0,
                                                        p.returncode), flush=True)
    print()
    regress = table(args.out)
    return 1 if regress else 0


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
    a.add_argument("--init", choices=("file", "env"), default="file",
                   help="INIT_METHOD the suite sees (file:// also runs the timeout tests)")
    r = sub.add_parser("run")
    r.add_argument("--csv", required=True)
    r.add_argument("--tests", default="")
    r.add_argument("--subset", default="")
    r.add_argument("--deadline", type=float, default=0)
    t = sub.add_parser("table")
    t.add_argument("out")
    args = ap.parse_args()
    if args.cmd == "all":
        sys.exit(all_main(args))
    if args.cmd == "run":
        if not MODE:
            raise SystemExit("run: ZT_SUITE_MODE is not set (use `all`)")
        child_main(args)
        return
    sys.exit(1 if table(args.out) else 0)


if __name__ == "__main__":
    main()
