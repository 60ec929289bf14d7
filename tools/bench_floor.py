#!/usr/bin/env python3
"""The physical floor of `nanovllm bench` (bench.py's workload, and --batch-1) for a model's
config.json: the bytes decode must read at the copy bandwidth, plus prefill's FLOPs at the dense
bf16 peak.

    python3 tools/bench_floor.py CONFIG_JSON [--bandwidth TB/s] [--peak TFLOP/s] [--ranks N]
        [--in-series] [--bench-seconds S] [--batch1-tok-s T]

- Decode, per step: every weight a step reads once (the embedding table is looked up, not read;
  the LM head is) and every running sequence's KV cache so far, or, where it takes longer, the
  step's FLOPs at the peak (2 per active weight per row, attention's 4 * heads * head_dim per
  cached token per row and layer). A mixture of experts reads only
  the experts its tokens are routed to: with uniform routing a step of B tokens touches
  E * (1 - (1 - k / E)^B) of a layer's E experts (k a token), an expectation; batch-1 touches
  exactly k.
- --in-series: each decode step as its kernels run, one after another: every linear at the larger
  of its weight's bytes and its FLOPs, attention at its KV bytes (the floor above lets attention
  stream while the linears compute). With the sustained bandwidth and peak of a GPU held at its
  power limit (docs/BENCHMARKS.md, "The power limit") it is what such a GPU could reach.
- Prefill: 2 FLOP per active weight per prompt token, and causal attention's 2 * heads *
  head_dim * L^2 per layer for a prompt of L tokens.
- Over N tensor-parallel ranks each rank reads and computes 1/N of it (the all-reduces are not
  counted).
With measured figures it prints their ratio to the floor.
"""
import argparse
import json
import random


def bench_workload(num_seqs=256, max_input=1024, max_output=1024):
    """bench.py's prompts' lengths and output lengths (random.seed(0), as it draws them)."""
    random.seed(0)
    prompts = [len([random.randint(0, 10000) for _ in range(random.randint(100, max_input))])
               for _ in range(num_seqs)]
    outputs = [random.randint(100, max_output) for _ in range(num_seqs)]
    return prompts, outputs


class Model:
    def __init__(self, config):
        c = config
        self.layers = c["num_hidden_layers"]
        self.hidden = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c["num_key_value_heads"]
        self.head_dim = c.get("head_dim") or self.hidden // self.heads
        self.vocab = c["vocab_size"]
        self.experts = c.get("num_experts") or c.get("num_local_experts") or 0
        self.top_k = c.get("num_experts_per_tok", 0)
        dense_only = set(c.get("mlp_only_layers") or [])
        step = c.get("decoder_sparse_step") or 1
        self.sparse_layers = sum(1 for i in range(self.layers) if self.experts and
                                 i not in dense_only and (i + 1) % step == 0)
        qkv = self.hidden * self.head_dim * (self.heads + 2 * self.kv_heads)
        o = self.head_dim * self.heads * self.hidden
        attention = qkv + o
        gate_up = 2 * self.hidden * c["intermediate_size"]
        down = self.hidden * c["intermediate_size"]
        dense_mlp = gate_up + down
        self.expert = 3 * self.hidden * c.get("moe_intermediate_size", 0)  # one expert's weights
        router = self.experts * self.hidden
        dense_layers = self.layers - self.sparse_layers
        # Weights every step reads whatever its tokens: attention, dense MLPs, routers, LM head.
        self.fixed = (self.layers * attention + dense_layers * dense_mlp +
                      self.sparse_layers * router + self.vocab * self.hidden)
        # Weights one token computes with (prefill FLOPs).
        self.active = self.fixed + self.sparse_layers * self.top_k * self.expert
        self.kv_per_token = 2 * self.layers * self.kv_heads * self.head_dim  # elements
        # The linears a decode step runs (weight elements, count), the experts apart.
        self.linears = [(qkv, self.layers), (o, self.layers), (self.vocab * self.hidden, 1)]
        if dense_layers:
            self.linears += [(gate_up, dense_layers), (down, dense_layers)]
        if self.sparse_layers:
            self.linears.append((router, self.sparse_layers))

    def touched_experts(self, tokens):
        if not self.experts:
            return 0.0
        if tokens == 1:
            return self.top_k
        return self.experts * (1 - (1 - self.top_k / self.experts) ** tokens)

    def step_weights(self, tokens):
        """Weight elements a decode step of `tokens` rows reads."""
        return self.fixed + self.sparse_layers * self.touched_experts(tokens) * self.expert

    def step_seconds_in_series(self, contexts, bytes_per, bandwidth, peak):
        """A decode step's kernels one after another: each linear at the larger of its weight's
        bytes and its FLOPs, each layer's experts likewise, attention at its KV bytes."""
        rows = len(contexts)
        seconds = sum(count * max(size * bytes_per / bandwidth, 2 * rows * size / peak)
                      for size, count in self.linears)
        if self.sparse_layers:
            touched = self.touched_experts(rows) * self.expert
            seconds += self.sparse_layers * max(touched * bytes_per / bandwidth,
                                                2 * rows * self.top_k * self.expert / peak)
        return seconds + sum(contexts) * self.kv_per_token * bytes_per / bandwidth

    def decode_flops(self, contexts):
        """FLOPs of a decode step whose rows attend over `contexts` tokens each."""
        return sum(2 * self.active + 4 * self.heads * self.head_dim * c * self.layers
                   for c in contexts)

    def prefill_flops(self, prompt):
        return 2 * self.active * prompt + 2 * self.heads * self.head_dim * prompt ** 2 * self.layers


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--bandwidth", type=float, default=3.0, help="TB/s (H100's measured copy)")
    parser.add_argument("--peak", type=float, default=790.0,
                        help="TFLOP/s (a large bf16 GEMM on an H100)")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--num-seqs", type=int, default=256,
                        help="sequences of the workload (nanovllm bench --num-seqs)")
    parser.add_argument("--bytes", type=int, default=2, help="per weight and KV element (bf16)")
    parser.add_argument("--in-series", action="store_true",
                        help="decode steps as their kernels run, one after another")
    parser.add_argument("--bench-seconds", type=float, help="measured bench time")
    parser.add_argument("--batch1-tok-s", type=float, help="measured batch-1 tokens a second")
    parser.add_argument("--batch1-prompt", type=int, default=128)
    parser.add_argument("--batch1-output", type=int, default=1024)
    args = parser.parse_args()
    model = Model(json.load(open(args.config)))
    bandwidth = args.bandwidth * 1e12 * args.ranks
    peak = args.peak * 1e12 * args.ranks

    if args.num_seqs < 1:
        parser.error(f"--num-seqs must be at least 1, got {args.num_seqs}")
    prompts, outputs = bench_workload(args.num_seqs)
    weight_bytes = kv_bytes = decode = 0.0
    compute_bound = 0  # decode steps whose FLOPs outlast their bytes
    for step in range(1, max(outputs)):  # the first token of each comes from its prefill
        contexts = [p + step for p, o in zip(prompts, outputs) if o > step]
        step_weights = model.step_weights(len(contexts)) * args.bytes
        step_kv = sum(contexts) * model.kv_per_token * args.bytes
        weight_bytes += step_weights
        kv_bytes += step_kv
        reading = (step_weights + step_kv) / bandwidth
        computing = model.decode_flops(contexts) / peak
        compute_bound += computing > reading
        if args.in_series:
            decode += model.step_seconds_in_series(contexts, args.bytes, bandwidth, peak)
        else:
            decode += max(reading, computing)
    flops = sum(model.prefill_flops(p) for p in prompts)
    prefill = flops / peak
    floor = decode + prefill
    print(f"bench.py workload: {len(prompts)} prompts, {sum(prompts)} prompt and {sum(outputs)} "
          f"output tokens; decode reads {weight_bytes / 1e12:.2f} TB of weights and "
          f"{kv_bytes / 1e12:.2f} TB of KV ({decode:.2f} s"
          f"{', its kernels in series' if args.in_series else ''}; {compute_bound} steps bound by "
          f"FLOPs instead), prefill {flops / 1e15:.2f} PFLOP "
          f"({prefill:.2f} s): floor {floor:.2f} s, {sum(outputs) / floor:,.0f} tok/s")
    if args.bench_seconds:
        print(f"  measured {args.bench_seconds:.2f} s: {100 * floor / args.bench_seconds:.0f}% "
              "of the floor")

    context = args.batch1_prompt + args.batch1_output / 2  # the mean over the timed tokens
    token = (model.step_weights(1) + context * model.kv_per_token) * args.bytes / bandwidth
    print(f"batch-1: {model.step_weights(1) * args.bytes / 1e9:.2f} GB of weights a token: "
          f"floor {token * 1e3:.3f} ms a token, {1 / token:,.0f} tok/s")
    if args.batch1_tok_s:
        print(f"  measured {args.batch1_tok_s:,.1f} tok/s: {100 * args.batch1_tok_s * token:.0f}% "
              "of the floor")


if __name__ == "__main__":
    main()
