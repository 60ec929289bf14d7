"""What the Python layer costs per engine step: `nanovllm bench --batch-1` (the C++ LLM) against
the same warm-up and timed generate through the installed nanovllm package, in alternating runs.

Run with the interpreter that has the package installed, e.g.
    .venv-package/bin/python tools/python_layer_overhead.py --bin build/apps/nanovllm \
        --model tests/data/models/qwen3-tiny-untied
Prints one JSON line: medians over the runs of the seconds per step from C++ and from Python,
their difference, and the part of Python's time spent outside the engine's own generate loop.
"""
import argparse
import json
import random
import statistics
import subprocess
import time

from nanovllm import LLM, SamplingParams


def cpp_run(args):
    proc = subprocess.run(
        [args.bin, "bench", "--model", args.model, "--batch-1", "--device", "cpu",
         "--batch-1-prompt-len", str(args.prompt_len), "--batch-1-output-len",
         str(args.output_len), "--temperature", str(args.temperature), "--max-token-id",
         str(args.max_token_id)],
        capture_output=True, text=True, check=True)
    details = json.loads(proc.stdout.splitlines()[-1])
    return details["seconds"], details["steps"]


def python_run(args):
    # bench --batch-1's prompt: Python's random stream, as the C++ side reproduces it.
    random.seed(0)
    prompt = [random.randint(0, args.max_token_id) for _ in range(args.prompt_len)]
    llm = LLM(args.model, device="cpu")

    def params(max_tokens):
        return SamplingParams(temperature=args.temperature, ignore_eos=True,
                              max_tokens=max_tokens)

    llm.generate([prompt], params(32), use_tqdm=False)  # bench's warm-up
    start = time.perf_counter()
    llm.generate([prompt], params(args.output_len), use_tqdm=False)
    seconds = time.perf_counter() - start
    stats = llm.last_generate_stats()
    return seconds, stats["steps"], seconds - stats["seconds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="the nanovllm command")
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=1024)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-token-id", type=int, default=2047,
                        help="prompt ids are uniform in [0, this] (qwen3-tiny-untied: 2048 ids)")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    cpp, python, outside = [], [], []
    for _ in range(args.runs):
        seconds, steps = cpp_run(args)
        cpp.append(seconds / steps)
        seconds, py_steps, outside_seconds = python_run(args)
        assert py_steps == steps, (py_steps, steps)
        python.append(seconds / steps)
        outside.append(outside_seconds)
    print(json.dumps({
        "steps": steps,
        "runs": args.runs,
        "cpp_us_per_step": 1e6 * statistics.median(cpp),
        "python_us_per_step": 1e6 * statistics.median(python),
        "python_minus_cpp_us_per_step": 1e6 * (statistics.median(python) - statistics.median(cpp)),
        "python_outside_engine_us_per_generate": 1e6 * statistics.median(outside),
        "cpp_us_per_step_all": [round(1e6 * s, 1) for s in cpp],
        "python_us_per_step_all": [round(1e6 * s, 1) for s in python],
    }))


if __name__ == "__main__":
    main()
