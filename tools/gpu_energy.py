#!/usr/bin/env python3
"""Runs a command on a GPU machine and reports what the GPUs spent over its timed workload.

NVML (nvidia-ml-py's pynvml) is read every --interval-ms on another thread: the energy counter,
the power, the SM clock and the clock-event reasons. The workload is the S seconds before the
command's line `Total: N tok, Time: S s` reached this script (bench.py's, `nanovllm bench`'s and
../shared/peer/workload.py's line; the command must flush it when it is measured), so both
engines are measured the same way, from outside. The command's output passes through, then:

  energy LABEL: 14.45 s, 9,965 J, 690 W mean (p10 / p50 / p90 688 / 694 / 696 W), SM 1,560 MHz
  p50, power-capped in 95% of samples, 13.44 output tokens a joule

and, with --json FILE, the same figures as JSON. Energy and power are summed over the GPUs
(--gpus, default every GPU NVML sees); clocks and reasons are pooled over them.
  usage: tools/gpu_energy.py [--label NAME] [--gpus 0,1] [--interval-ms 20] [--json FILE] -- CMD...
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import threading
import time

import pynvml

WORKLOAD_LINE = re.compile(r"Total: (\d+)\s*tok, Time: ([0-9.]+)\s*s")
POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap


def clock_event_reasons(handle):
    # Named "throttle reasons" before driver 535.
    read = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons")
    return read(handle)


class Sampler(threading.Thread):
    """Samples (t, joules summed, watts summed, [SM MHz], [reasons]) until stopped."""

    def __init__(self, handles, interval):
        super().__init__(daemon=True)
        self.handles, self.interval = handles, interval
        self.samples = []
        self.done = threading.Event()

    def read(self):
        joules = watts = 0.0
        clocks, reasons = [], []
        for h in self.handles:
            joules += pynvml.nvmlDeviceGetTotalEnergyConsumption(h) * 1e-3
            watts += pynvml.nvmlDeviceGetPowerUsage(h) * 1e-3
            clocks.append(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
            reasons.append(clock_event_reasons(h))
        return time.monotonic(), joules, watts, clocks, reasons

    def run(self):
        while not self.done.is_set():
            self.samples.append(self.read())
            self.done.wait(self.interval)
        self.samples.append(self.read())


def energy_at(samples, t):
    """The energy counter at time t, linear between the samples around it."""
    for (t0, e0, *_), (t1, e1, *_) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            return e0 + (e1 - e0) * (t - t0) / (t1 - t0) if t1 > t0 else e0
    raise ValueError(f"no samples around t = {t:.3f} s (sampled {samples[0][0]:.3f} to "
                     f"{samples[-1][0]:.3f} s): the workload line names more time than the run had")


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summarize(samples, start, end, tokens):
    window = [s for s in samples if start <= s[0] <= end]
    if len(window) < 2:
        raise ValueError(f"only {len(window)} samples in a {end - start:.3f} s window")
    joules = energy_at(samples, end) - energy_at(samples, start)
    watts = [s[2] for s in window]
    clocks = [c for s in window for c in s[3]]
    reasons = [r for s in window for r in s[4]]
    summary = {
        "seconds": end - start,
        "joules": joules,
        "mean_watts": joules / (end - start),
        "watts_p10": percentile(watts, 0.1),
        "watts_p50": percentile(watts, 0.5),
        "watts_p90": percentile(watts, 0.9),
        "sm_mhz_p50": statistics.median(clocks),
        "power_capped_share": sum(1 for r in reasons if r & POWER_CAP) / len(reasons),
        "samples": len(window),
    }
    if tokens is not None:
        summary["output_tokens"] = tokens
        summary["tokens_per_joule"] = tokens / joules
    return summary


def describe(label, s):
    line = (f"energy {label}: {s['seconds']:.2f} s, {s['joules']:,.0f} J, {s['mean_watts']:.0f} W "
            f"mean (p10 / p50 / p90 {s['watts_p10']:.0f} / {s['watts_p50']:.0f} / "
            f"{s['watts_p90']:.0f} W), SM {s['sm_mhz_p50']:,.0f} MHz p50, power-capped in "
            f"{100 * s['power_capped_share']:.0f}% of samples")
    if "tokens_per_joule" in s:
        line += f", {s['tokens_per_joule']:.2f} output tokens a joule"
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="run")
    parser.add_argument("--gpus", help="comma-separated NVML indices (default: all)")
    parser.add_argument("--interval-ms", type=float, default=20.0)
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    if args.interval_ms <= 0:
        parser.error(f"--interval-ms must be positive, got {args.interval_ms}")

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        indices = [int(i) for i in args.gpus.split(",")] if args.gpus else list(range(count))
        bad = [i for i in indices if not 0 <= i < count]
        if bad:
            parser.error(f"--gpus {bad} not among the {count} GPUs NVML sees")
        sampler = Sampler([pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices],
                          args.interval_ms * 1e-3)
        sampler.start()
        workload = None  # (end time, seconds, tokens) of the last workload line
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1) as child:
            for line in child.stdout:
                now = time.monotonic()
                sys.stdout.write(line)
                sys.stdout.flush()
                match = WORKLOAD_LINE.search(line)
                if match:
                    workload = (now, float(match.group(2)), int(match.group(1)))
        sampler.done.set()
        sampler.join()
    finally:
        pynvml.nvmlShutdown()

    try:
        report = {"label": args.label, "command": command, "exit_code": child.returncode,
                  "whole_run": summarize(sampler.samples, sampler.samples[0][0],
                                         sampler.samples[-1][0], None)}
        if workload:
            end, seconds, tokens = workload
            report["workload"] = summarize(sampler.samples, end - seconds, end, tokens)
            print(describe(args.label, report["workload"]))
        else:
            print(f"energy {args.label}: no 'Total: N tok, Time: S s' line; the whole run below")
        print(describe(f"{args.label}, whole run", report["whole_run"]))
    except ValueError as e:
        print(f"gpu_energy: {e}", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
