#!/usr/bin/env python3
"""Compares the engine on the GPU with Hugging Face transformers on one Qwen3 checkpoint.

Run where torch (with CUDA) and transformers are installed:
    python3 tools/hf_compare.py --model DIR --nanovllm build/apps/nanovllm [--dtype bfloat16]

The engine generates greedily (with 20 logprobs per step) for prompts of several lengths; the
first generated token comes from a prefill, the others from decode steps. transformers then
runs each prompt plus the engine's tokens in one forward pass, in float32 (the reference, TF32
off) and in the engine's dtype, and the engine's logprobs are compared with the reference:
- the engine's largest logprob error must be within twice the largest error of transformers
  itself in the same dtype (plus 1e-3), over the same tokens;
- wherever the engine's greedy token differs from the reference argmax, the reference's top-2
  margin must be below the tie threshold (four times transformers' own error in that dtype):
  a near-tie that rounding may resolve either way.
Prints one line per prompt and a verdict; exits 1 when a check fails.
"""
import argparse
import json
import random
import subprocess
import sys
import tempfile

import torch
from transformers import AutoModelForCausalLM

PROMPT_LENGTHS = [1, 13, 100, 300, 1000]


def reference_logprobs(model, sequences, first_positions):
    """log_softmax of the logits that predict each generated token: [steps, vocab] per request."""
    out = []
    with torch.no_grad():
        for tokens, first in zip(sequences, first_positions):
            ids = torch.tensor([tokens], device="cuda")
            logits = model(ids).logits[0, first - 1:len(tokens) - 1].float()
            out.append(torch.log_softmax(logits, dim=-1))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--nanovllm", required=True)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--report", help="write the figures as JSON here")
    parser.add_argument("engine_flags", nargs="*", help="extra flags for nanovllm generate")
    args = parser.parse_args()

    config = json.load(open(f"{args.model}/config.json"))
    rng = random.Random(0)
    prompts = [[rng.randrange(min(config["vocab_size"], 10000)) for _ in range(n)]
               for n in PROMPT_LENGTHS]

    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{tmp}/in.jsonl", "w") as f:
            for prompt in prompts:
                f.write(json.dumps({"prompt_token_ids": prompt, "max_tokens": args.max_tokens,
                                    "temperature": 0, "ignore_eos": True, "logprobs": 20}) + "\n")
        subprocess.run([args.nanovllm, "generate", "--model", args.model, "--device", "cuda",
                        "--dtype", args.dtype, "--input", f"{tmp}/in.jsonl", "--output",
                        f"{tmp}/out.jsonl", "--no-progress", *args.engine_flags], check=True)
        rows = [json.loads(line) for line in open(f"{tmp}/out.jsonl")]

    sequences = [row["prompt_token_ids"] + row["token_ids"] for row in rows]
    firsts = [len(row["prompt_token_ids"]) for row in rows]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = getattr(torch, args.dtype)
    reference = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).cuda()
    ref = reference_logprobs(reference, sequences, firsts)
    del reference
    same_dtype = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).cuda()
    hf = reference_logprobs(same_dtype, sequences, firsts)
    del same_dtype

    engine_error = 0.0
    hf_error = 0.0
    per_prompt = []
    for row, r, h in zip(rows, ref, hf):
        e_err = h_err = 0.0
        for step, position in enumerate(row["logprobs"]):
            for entry in position["top"]:
                token = entry["token_id"]
                e_err = max(e_err, abs(entry["logprob"] - r[step, token].item()))
                h_err = max(h_err, abs(h[step, token].item() - r[step, token].item()))
        engine_error = max(engine_error, e_err)
        hf_error = max(hf_error, h_err)
        per_prompt.append((len(row["prompt_token_ids"]), e_err, h_err))

    tie_threshold = 4 * hf_error
    failures = []
    agreeing = 0
    total = 0
    for row, r in zip(rows, ref):
        top2 = torch.topk(r, 2, dim=-1)
        for step, token in enumerate(row["token_ids"]):
            total += 1
            best = top2.indices[step, 0].item()
            if token == best:
                agreeing += 1
                continue
            margin = (top2.values[step, 0] - top2.values[step, 1]).item()
            if margin >= tie_threshold:
                failures.append(f"prompt of {len(row['prompt_token_ids'])}, step {step}: engine "
                                f"{token}, reference {best} with margin {margin:.4f}")

    bound = 2 * hf_error + 1e-3
    for length, e_err, h_err in per_prompt:
        print(f"prompt {length:5d} tokens: max |logprob error| engine {e_err:.4f}, "
              f"transformers {args.dtype} {h_err:.4f}")
    print(f"greedy tokens equal to the float32 reference: {agreeing}/{total}; "
          f"differences at near-ties only (margin < {tie_threshold:.4f}): {not failures}")
    ok = engine_error <= bound and not failures
    print(f"hf_compare {args.dtype}: engine max error {engine_error:.4f} (bound {bound:.4f}), "
          f"{'PASS' if ok else 'FAIL'}")
    for failure in failures:
        print("  " + failure)
    if args.report:
        json.dump({"dtype": args.dtype, "engine_max_error": engine_error,
                   "transformers_max_error": hf_error, "bound": bound,
                   "greedy_agreeing": agreeing, "greedy_total": total,
                   "failures": failures, "pass": ok}, open(args.report, "w"), indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
