#!/usr/bin/env python3
"""The table and the PNG of scripts/bench_peers.sh, from its peers.csv.

peers.txt: per rank count and dtype, one table with a row per size and, per peer, the time
per AllReduce (us) and busbw (GB/s, nccl-tests': 2(n-1)/n * bytes / time); "-" where the peer
did not run, its reason listed under the table. peers.png (gnuplot): latency and busbw against
size, a line per peer, a panel pair per rank count and dtype.

Usage: peers_report.py peers.csv peers.txt peers.png
"""
import csv
import shutil
import subprocess
import sys


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def blocks(rows):
    """(np, dtype) in the run's order, the peers in theirs."""
    keys, peers = [], []
    for r in rows:
        k = (int(r["np"]), r["dtype"])
        if k not in keys:
            keys.append(k)
        if r["peer"] not in peers:
            peers.append(r["peer"])
    return keys, peers


COLOURS = ["#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#17becf", "#bcbd22", "#000000"]


def busbw(nbytes, us, n):
    return 2.0 * (n - 1) / n * nbytes / (us * 1e-6) / 1e9


def size_name(b):
    for unit, shift in (("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d%s" % (b >> shift, unit)
    return str(b)


def table(rows):
    keys, peers = blocks(rows)
    out = ["# AllReduce SUM in place: time per op (us, best of the timed rounds, slowest rank) "
           "and busbw (GB/s); '-': did not run (reasons below each table)"]
    for n, dtype in keys:
        sel = [r for r in rows if int(r["np"]) == n and r["dtype"] == dtype]
        sizes = sorted({int(r["bytes"]) for r in sel})
        cell = {(r["peer"], int(r["bytes"])): r for r in sel}
        w = max(9, max(len(p) for p in peers) + 1)
        head = "%-6s |" % "bytes" + "".join("%*s" % (w, p) for p in peers)
        lat, bw = [], []
        for b in sizes:
            ls, bs = [], []
            for p in peers:
                r = cell.get((p, b))
                us = float(r["us"]) if r is not None and r["us"] else None
                ls.append("%*s" % (w, "-") if us is None else
                          "%*.2f" % (w, us) if us < 1e5 else "%*.0f" % (w, us))
                bs.append("%*s" % (w, "-") if us is None else "%*.3f" % (w, busbw(b, us, n)))
            lat.append("%-6s |" % size_name(b) + "".join(ls))
            bw.append("%-6s |" % size_name(b) + "".join(bs))
        out += ["", "## np %d, %s: time per op (us)" % (n, dtype), head] + lat
        out += ["## np %d, %s: busbw (GB/s)" % (n, dtype), head] + bw
        notes = {}
        for r in sel:
            if not r["us"] and r["note"]:
                notes.setdefault((r["peer"], r["note"]), []).append(size_name(int(r["bytes"])))
        for (p, note), bs in notes.items():
            out.append("  %s (%s): %s" % (p, "all sizes" if len(bs) == len(sizes) else
                                          ",".join(bs), note))
    return "\n".join(out) + "\n"


def plot(csv_path, png, rows):
    if not shutil.which("gnuplot"):
        print("peers_report: gnuplot not found, no PNG")
        return
    keys, peers = blocks(rows)
    cmds = ['set terminal pngcairo size 1800,%d font ",9"' % (380 * len(keys)),
            'set output "%s"' % png, 'set datafile separator ","', "set logscale x 2",
            "set grid", "set key top left font \",8\"", 'set format x "%.0b%B"',
            "set multiplot layout %d,2" % len(keys)]
    for n, dtype in keys:
        for what in ("latency", "busbw"):
            cmds.append('set title "AllReduce np %d %s: %s"' % (n, dtype, what))
            cmds.append('set xlabel "bytes"')
            if what == "latency":
                cmds += ["set logscale y", 'set ylabel "us per op"']
                y = "$5"
            else:
                cmds += ["unset logscale y", 'set ylabel "busbw (GB/s)"']
                y = "(2.0*%d/%d*$4/$5/1e3)" % (n - 1, n)
            parts = []
            for i, p in enumerate(peers):
                sel = '(strcol(1) eq "%s" && strcol(2) eq "%s" && $3 == %d && strcol(5) ne "" ? %s : 1/0)' % (
                    p, dtype, n, y)
                parts.append('"%s" every ::1 using 4:%s with linespoints lw %d pt %d lc rgb "%s" '
                             'title "%s"' % (csv_path, sel, 3 if p == "zccl" else 2, i + 1,
                                             COLOURS[i % len(COLOURS)], p))
            cmds.append("plot " + ", ".join(parts))
    cmds.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(cmds).encode(), check=True)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: peers_report.py peers.csv peers.txt peers.png")
    rows = load(sys.argv[1])
    text = table(rows)
    with open(sys.argv[2], "w") as f:
        f.write(text)
    sys.stdout.write(text)
    plot(sys.argv[1], sys.argv[3], rows)


if __name__ == "__main__":
    main()
