#!/usr/bin/env python3
"""One line per rate of a guidellm JSON report (scripts/serve-bench.sh writes one): the rate
asked for, the completed requests per second, output tokens per second, time to first token and
inter-token latency percentiles over the completed requests, and how many requests completed
and failed in the measured window. Only the standard library, so it runs where guidellm does not.

    python3 tools/guidellm_summary.py REPORT.json
"""
import json
import sys


def percentiles(metric, names=("p50", "p90", "p99")):
    values = metric["successful"]["percentiles"]
    return "/".join(f"{values[name]:.1f}" for name in names)


def summary_lines(report):
    for benchmark in report["benchmarks"]:
        metrics = benchmark["metrics"]
        totals = metrics["request_totals"]  # requests cancelled at the window's end are left out
        rate = benchmark["config"]["strategy"].get("rate")
        yield (f"rate {rate:g} req/s: {metrics['requests_per_second']['successful']['mean']:.1f} "
               f"req/s done, {metrics['output_tokens_per_second']['successful']['mean']:.0f} "
               f"out tok/s; TTFT p50/p90/p99 {percentiles(metrics['time_to_first_token_ms'])} "
               f"ms; ITL p50/p90/p99 {percentiles(metrics['inter_token_latency_ms'])} ms; "
               f"{totals['successful']} completed, {totals['errored']} errored")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        report = json.load(f)
    for line in summary_lines(report):
        print(line)


if __name__ == "__main__":
    main()
