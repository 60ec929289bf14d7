#!/usr/bin/env python3
"""Measures the Hugging Face `tokenizers` package encoding the benchmark text on one thread,
the same way tokenizer_bench measures this project: the whole text with Tokenizer.encode, and
line by line; first encode (fresh tokenizer) and the median of the repeats after it, by wall
clock and by the thread's CPU time. Prints one JSON line per mode, with a hash of the ids that
must equal tokenizer_bench's.

    RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \\
        python3 tools/tokenizer_bench_hf.py --model DIR --input FILE [--repeat 3]
"""

import argparse
import json
import os
import statistics
import time

# One thread: set before tokenizers starts its thread pool.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Tokenizer  # noqa: E402

FNV_OFFSET = 1469598103934665603
FNV_PRIME = 1099511628211
MASK = (1 << 64) - 1


def hash_ids(ids, h=FNV_OFFSET):
    """FNV-1a over the ids as little-endian 32-bit integers (as tokenizer_bench does)."""
    for id_ in ids:
        for byte in (id_ & 0xFFFFFFFF).to_bytes(4, "little"):
            h = ((h ^ byte) * FNV_PRIME) & MASK
    return h


def measure(mode, nbytes, repeat, encode):
    runs, cpu = [], []
    for _ in range(1 + repeat):
        cpu_start = time.thread_time()
        start = time.perf_counter()
        ids_list = encode()
        runs.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - cpu_start)
        if len(runs) == 1:
            tokens = sum(len(ids) for ids in ids_list)
            h = FNV_OFFSET
            for ids in ids_list:
                h = hash_ids(ids, h)
    median = statistics.median(runs[1:] if repeat else runs)
    median_cpu = statistics.median(cpu[1:] if repeat else cpu)
    mb = nbytes / 1e6
    return {"impl": "tokenizers", "mode": mode, "bytes": nbytes, "tokens": tokens,
            "ids_fnv1a": h, "first_s": runs[0], "median_s": median, "median_cpu_s": median_cpu,
            "first_mb_per_s": mb / runs[0], "median_mb_per_s": mb / median,
            "median_cpu_mb_per_s": mb / median_cpu}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="directory with tokenizer.json")
    parser.add_argument("--input", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with open(args.input, encoding="utf-8", newline="") as f:
        text = f.read()
    nbytes = len(text.encode())
    path = os.path.join(args.model, "tokenizer.json")

    tok = Tokenizer.from_file(path)
    print(json.dumps(measure("text", nbytes, args.repeat,
                             lambda: [tok.encode(text, add_special_tokens=False).ids])), flush=True)
    tok = Tokenizer.from_file(path)
    lines = text.split("\n")
    print(json.dumps(measure("lines", nbytes, args.repeat,
                             lambda: [tok.encode(line, add_special_tokens=False).ids
                                      for line in lines])), flush=True)


if __name__ == "__main__":
    main()
