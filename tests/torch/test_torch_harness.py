"""The test launcher fails fast: when one rank raises or exits badly while
another is blocked (here in a sleep no timeout of zccl's ends), the parent
kills the blocked rank after its short grace and reports the failed rank's
error, long before the launcher's own time limit; a run whose ranks all
return reports nothing. Usage: test_torch_harness.py [NRANKS] (2)
"""
import os
import sys
import time

import torch.distributed as dist

import zt_harness

LIMIT_S = 600  # the launcher's limit: failing fast means far below it
BLOCK_S = 3600


def raises(rank, n):
    if rank == n - 1:
        raise RuntimeError("rank %d broke on purpose" % rank)
    time.sleep(BLOCK_S)


def dies(rank, n):
    if rank == n - 1:
        os._exit(3)
    time.sleep(BLOCK_S)


def passes(rank, n):
    dist.barrier()


def expect(name, bad, dt, needles):
    problems = []
    text = "\n".join(bad)
    for want in needles:
        if want not in text:
            problems.append("%s: report lacks %r; report:\n%s" % (name, want, text))
    # Spawning and importing torch take seconds on a loaded 2-core box; a
    # hang would take the whole LIMIT_S.
    if dt >= LIMIT_S / 4:
        problems.append("%s: took %.1f s (the launcher's limit is %d s)" % (name, dt, LIMIT_S))
    return problems


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    last = n - 1
    blocked = ["rank %d killed" % r for r in range(last)]
    cases = [
        ("raises", raises, ["rank %d exit status 1" % last, "rank %d raised" % last,
                            "rank %d broke on purpose" % last] + blocked),
        ("dies", dies, ["rank %d exit status 3" % last] + blocked),
    ]
    problems = []
    for name, fn, needles in cases:
        t0 = time.time()
        bad = zt_harness.launch(fn, n, limit_s=LIMIT_S)
        dt = time.time() - t0
        problems += expect(name, bad, dt, needles)
        print("%s: reported in %.1f s: %s" % (name, dt, "; ".join(b.splitlines()[0] for b in bad)))
    t0 = time.time()
    bad = zt_harness.launch(passes, n, limit_s=LIMIT_S)
    if bad:
        problems.append("passes: a clean run reported:\n" + "\n".join(bad))
    print("passes: %.1f s" % (time.time() - t0))
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("harness: fails fast and reports the failed rank")


if __name__ == "__main__":
    main()
