#!/usr/bin/env python3
"""Summarizes a kernel timeline (src/kernels/cuda/runtime/timeline.h) of decode steps.

A launch is a kernel's CTAs of one replay (a graph's kernel keeps its %gridid); where graphs were
replayed, only their launches count (eager prefill launches are left out). A step here runs
from one LM head launch (the launch with the most CTAs) to the next; where another kernel has
more CTAs (a mixture-of-experts model's gate_up at larger batches), from one of its launches to
the next: a layer. For the last complete step in the file it prints every launch in order, times
relative to the step's first CTA start, in microseconds:
  start0/startN  first and last CTA start (CTAs start once they fit on an SM)
  wait           median time at which a CTA's wait for the kernel before ended
  end0/endN      first and last CTA end; endN is when the kernel is done
  gap            endN of this launch minus endN of the launch before: its share of the step
  late           CTAs that started after the launch before had ended
then, for the layers (the launch pattern that repeats), each position's mean gap, the mean time
from the launch before's end to this one's wait ending, and the median CTA's time from its wait
to its end, and to each mark the kernel sets (NVLLM_TIMELINE_MARK).

With --ctas SIGNATURE (a launch column value, such as 512x128) it then shows that launch of
the step CTA by CTA: the CTAs by start time (5 us bins) with the median time from wait to end,
and how many ran, on how many SMs, every 5 us.

    usage: timeline_summary.py FILE [--step K] [--ctas SIGNATURE]
           (K counts back from the last step: 1 = last)
"""
import argparse
import statistics
import struct
import sys
from collections import defaultdict

MARKS = 4
# grid, start, wait, end (ns); cta, sm, ctas, threads; the marks (ns after start, 0: not set)
RECORD = struct.Struct(f"<QQQQIIII{MARKS}I")


def read_records(path):
    with open(path, "rb") as f:
        magic, count, marks = struct.unpack("<III", f.read(12))
        if magic != 0x4C54564E or marks != MARKS:
            sys.exit(f"{path} is not a timeline file of {MARKS} marks")
        data = f.read()
    if len(data) != count * RECORD.size:
        sys.exit(f"{path}: {count} records announced, {len(data) // RECORD.size} present")
    return [RECORD.unpack_from(data, i * RECORD.size) for i in range(count)]


class Launch:
    def __init__(self, grid, rows):
        self.grid = grid
        self.ctas = rows[0][6]
        self.threads = rows[0][7]
        self.starts = sorted(r[1] for r in rows)
        self.waits = sorted(r[2] for r in rows if r[2] != 0)
        self.ends = sorted(r[3] for r in rows)
        # Each waiting CTA's time from its wait to its end, and to each mark it set, in us.
        self.work = sorted((r[3] - r[2]) / 1000.0 for r in rows if r[2] != 0)
        self.marks = [sorted((r[1] + r[8 + i] - r[2]) / 1000.0 for r in rows
                             if r[2] != 0 and r[8 + i] != 0) for i in range(MARKS)]
        self.recorded = len(rows)
        self.rows = rows

    @property
    def signature(self):
        return f"{self.ctas}x{self.threads}"


# A graph's kernel keeps its %gridid over replays: its records split into launches where
# consecutive CTA starts lie further apart than this (a step takes about a millisecond; the
# CTAs of one launch start within its duration).
REPLAY_GAP_NS = 200_000


def launches_in_order(records):
    by_grid = defaultdict(list)
    for r in records:
        by_grid[r[0]].append(r)
    launches = []
    for grid, rows in by_grid.items():
        rows.sort(key=lambda r: r[1])
        begin = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or rows[i][1] - rows[i - 1][1] > REPLAY_GAP_NS:
                launches.append(Launch(grid, rows[begin:i]))
                begin = i
    launches.sort(key=lambda l: l.starts[0])
    return launches


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--step", type=int, default=1)
    parser.add_argument("--ctas")
    args = parser.parse_args()
    launches = launches_in_order(read_records(args.file))
    # Decode steps replay a graph, whose kernels keep their %gridid; eager launches (prefill)
    # have one launch a grid id. Keep the replayed ones where there are any.
    per_grid = defaultdict(int)
    for l in launches:
        per_grid[l.grid] += 1
    replayed = [l for l in launches if per_grid[l.grid] > 1]
    launches = replayed or launches
    most = max(l.ctas for l in launches)
    heads = [i for i, l in enumerate(launches) if l.ctas == most]
    if len(heads) < args.step + 1:
        sys.exit(f"only {len(heads) - 1} complete steps in {args.file}")
    first, last = heads[-args.step - 1] + 1, heads[-args.step]
    step = launches[first : last + 1]
    t0 = min(l.starts[0] for l in step)
    us = lambda ns: (ns - t0) / 1000.0

    print(f"step of {len(step)} launches, {us(step[-1].ends[-1]):.1f} us from the first CTA "
          f"start to the LM head's end")
    print(f"{'#':>3} {'launch':>10} {'start0':>8} {'startN':>8} {'wait':>8} {'end0':>8} "
          f"{'endN':>8} {'gap':>7} {'late':>5}")
    previous_end = None
    rows = []
    for i, l in enumerate(step):
        wait = statistics.median(l.waits) if l.waits else None
        gap = (l.ends[-1] - previous_end) / 1000.0 if previous_end is not None else None
        late = sum(1 for s in l.starts if previous_end is not None and s > previous_end)
        rows.append((l, wait, gap, late, previous_end))
        print(f"{i:>3} {l.signature:>10} {us(l.starts[0]):8.2f} {us(l.starts[-1]):8.2f} "
              f"{us(wait) if wait else float('nan'):8.2f} {us(l.ends[0]):8.2f} "
              f"{us(l.ends[-1]):8.2f} {gap if gap is not None else float('nan'):7.2f} "
              f"{late:>5}")
        previous_end = l.ends[-1]
    if args.ctas:
        print_ctas(step, args.ctas)

    # The layers: the longest run of a repeating pattern of signatures.
    signatures = [l.signature for l in step]
    best = None
    for period in range(2, 9):
        for begin in range(0, len(step) - 2 * period):
            n = 0
            while begin + (n + 1) * period <= len(step) and \
                    signatures[begin + n * period : begin + (n + 1) * period] == \
                    signatures[begin : begin + period]:
                n += 1
            if n >= 2 and (best is None or n * period > best[2] * best[1]):
                best = (begin, period, n)
    if best is None:
        return
    begin, period, n = best
    print(f"\nlayers: {n} repetitions of {period} launches from launch {begin}; per position, "
          f"means over the layers but the first (us):")
    print(f"{'pos':>3} {'launch':>10} {'gap':>7} {'to wait':>8} {'cta work':>9} {'late':>6}  "
          f"marks (median CTA, us after its wait)")
    total = 0.0
    for p in range(period):
        gaps, to_wait, work, late = [], [], [], []
        marks = [[] for _ in range(MARKS)]
        for layer in range(1, n):
            l, wait, gap, late_count, previous_end = rows[begin + layer * period + p]
            gaps.append(gap)
            late.append(late_count)
            if wait is not None:
                to_wait.append((wait - previous_end) / 1000.0)
            if l.work:
                work.append(statistics.median(l.work))
            for i in range(MARKS):
                if l.marks[i]:
                    marks[i].append(statistics.median(l.marks[i]))
        total += statistics.mean(gaps)
        mark_text = " ".join(f"{i}:{statistics.mean(m):.2f}" for i, m in enumerate(marks) if m)
        print(f"{p:>3} {signatures[begin + p]:>10} {statistics.mean(gaps):7.2f} "
              f"{statistics.mean(to_wait) if to_wait else float('nan'):8.2f} "
              f"{statistics.mean(work) if work else float('nan'):9.2f} "
              f"{statistics.mean(late):6.1f}  {mark_text}")
    print(f"a layer: {total:.2f} us")


def print_ctas(step, signature):
    picked = [l for l in step if l.signature == signature]
    if not picked:
        sys.exit(f"no {signature} launch in the step")
    l = picked[0]
    t0 = l.starts[0]
    # (start, end, work from the wait or the start, SM), us from the first CTA start
    ctas = [((r[1] - t0) / 1000.0, (r[3] - t0) / 1000.0, (r[3] - max(r[1], r[2])) / 1000.0, r[5])
            for r in l.rows]
    print(f"\n{signature}: {len(ctas)} CTAs over {max(c[1] for c in ctas):.1f} us")
    by_start = defaultdict(list)
    for start, _, work, _ in ctas:
        by_start[int(start // 5) * 5].append(work)
    for b in sorted(by_start):
        print(f"  started {b:4d} to {b + 5:<4d} us: {len(by_start[b]):4d} CTAs, from wait to end "
              f"{statistics.median(by_start[b]):6.1f} us (median)")
    for t in range(0, int(max(c[1] for c in ctas)) + 1, 5):
        running = [c for c in ctas if c[0] <= t < c[1]]
        print(f"  at {t:4d} us: {len(running):4d} running on {len({c[3] for c in running}):3d} SMs")


if __name__ == "__main__":
    main()
