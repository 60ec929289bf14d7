#!/usr/bin/env python3
"""Summarizes a kernel trace (tools/kernel_trace/kernel_trace.cpp) of replayed decode graphs.

Every kernel of one graph replay carries that replay's correlation id. The graphs are listed
(replays, kernels, mean replay time), then the one that took the most GPU time in all is taken
(or --graph G); its first replay is left out (caches and clocks still cold). For each kernel of
a replay, in start order, in microseconds:
  start   its start after the replay's first kernel started
  dur     end minus start (with programmatic dependent launch this includes the time its CTAs
          waited for the kernel before)
  gap     its start minus the latest end among the kernels before it (negative: it started early)
  share   the latest end so far minus the latest end before it: its share of the replay
Printed for the median replay by length, then, where the kernel sequence repeats (the layers),
each position's mean dur, gap and share over the layers between the first and the last and
over all replays.

    usage: kernel_trace_summary.py FILE [--graph G]
"""
import argparse
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict


def demangle(names):
    if not shutil.which("c++filt"):
        return {n: n for n in names}
    names = sorted(names)
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out))


def short_name(name):
    """The function's own name without namespaces, template arguments or parameters."""
    depth, base = 0, []
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            base.append(ch)
    words = "".join(base).split()  # the last word: the name, past a return type
    return (words[-1] if words else name).split("::")[-1][:70]


def read(path):
    kernels = []
    with open(path) as f:
        for line in f:
            start, end, corr, graph, node, grid, block, name = line.rstrip("\n").split("\t")
            kernels.append((int(start), int(end), int(corr), int(graph), int(node), grid, block,
                            name))
    return kernels


def replay_rows(kernels):
    """(name, grid, start, dur, gap, share) in us for one replay's kernels."""
    kernels = sorted(kernels)
    first = kernels[0][0]
    rows, latest_end = [], None
    for start, end, _, _, _, grid, _, name in kernels:
        gap = 0.0 if latest_end is None else (start - latest_end) / 1e3
        new_end = end if latest_end is None else max(latest_end, end)
        share = (end - start) / 1e3 if latest_end is None else (new_end - latest_end) / 1e3
        rows.append((name, grid, (start - first) / 1e3, (end - start) / 1e3, gap, share))
        latest_end = new_end
    return rows


def period_of(names):
    """The shortest period with which the middle of the sequence repeats, or None."""
    n = len(names)
    for p in range(2, n // 3 + 1):
        middle = range(n // 4, n - n // 4 - p)
        if all(names[i] == names[i + p] for i in middle):
            return p
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--graph", type=int,
                        help="graph id (default: the one with the most GPU time in all)")
    args = parser.parse_args()
    kernels = read(args.file)
    replays = defaultdict(list)
    for k in kernels:
        if k[3] != 0:
            replays[(k[3], k[2])].append(k)
    if not replays:
        sys.exit(f"{args.file}: no graph kernels")
    spans = defaultdict(list)  # graph: each replay's time from first start to last end, us
    for (graph, _), kernels_of_replay in replays.items():
        spans[graph].append((max(k[1] for k in kernels_of_replay) -
                             min(k[0] for k in kernels_of_replay)) / 1e3)
    print(f"{'graph':>6} {'replays':>8} {'kernels':>8} {'mean us':>10}")
    for graph in sorted(spans):
        kernel_count = len(next(v for (g, _), v in replays.items() if g == graph))
        print(f"{graph:>6} {len(spans[graph]):>8} {kernel_count:>8} "
              f"{statistics.mean(spans[graph]):>10.1f}")
    graph = args.graph if args.graph is not None else max(spans, key=lambda g: sum(spans[g]))
    if graph not in spans:
        sys.exit(f"{args.file}: no graph {graph}")
    chosen = [replays[key] for key in sorted(replays) if key[0] == graph][1:]
    if not chosen:
        sys.exit(f"graph {graph}: fewer than two replays")
    names = demangle({k[7] for r in chosen for k in r})
    tables = [[(short_name(names[r[0]]),) + r[1:] for r in replay_rows(k)] for k in chosen]
    lengths = sorted(range(len(tables)), key=lambda i: tables[i][-1][2] + tables[i][-1][3])
    median = tables[lengths[len(lengths) // 2]]
    total = median[-1][2] + median[-1][3]
    print(f"graph {graph}: {len(chosen)} replays of {len(median)} kernels; "
          f"the median replay takes {total:.1f} us")
    print(f"{'#':>4} {'start':>9} {'dur':>8} {'gap':>7} {'share':>8}  {'grid':<14} kernel")
    for i, (name, grid, start, dur, gap, share) in enumerate(median):
        print(f"{i:>4} {start:>9.1f} {dur:>8.1f} {gap:>7.1f} {share:>8.1f}  {grid:<14} {name}")

    p = period_of([row[0] for row in median])
    if p is None:
        return
    # Layers: whole periods after the first one, before the last.
    first = next(i for i in range(len(median)) if all(
        median[j][0] == median[j + p][0] for j in range(i, i + p)))
    layer_starts = list(range(first + p, len(median) - 2 * p, p))
    print(f"\nlayers of {p} kernels, {len(layer_starts)} of them a replay, means over "
          f"{len(tables)} replays:")
    print(f"{'pos':>4} {'dur':>8} {'gap':>7} {'share':>8}  kernel")
    layer_total = 0.0
    for pos in range(p):
        rows = [t[s + pos] for t in tables for s in layer_starts if len(t) == len(median)]
        dur = statistics.mean(r[3] for r in rows)
        gap = statistics.mean(r[4] for r in rows)
        share = statistics.mean(r[5] for r in rows)
        layer_total += share
        print(f"{pos:>4} {dur:>8.1f} {gap:>7.1f} {share:>8.1f}  {rows[0][0]}")
    print(f"     the layer: {layer_total:.1f} us")


if __name__ == "__main__":
    main()
