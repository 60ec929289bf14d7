#!/usr/bin/env python3
"""Tiny checkpoints of every served architecture (Qwen3, Qwen3-MoE, Qwen2, Llama) with random
weights and
golden outputs computed by transformers in fp32.

Run where torch and transformers are installed:
    python3 tools/make_model_fixtures.py --out tests/data/models [--only NAME ...]

Each model directory gets config.json, generation_config.json, safetensors weights and golden.json:
for every prompt (token ids) the top-k logits at every prompt position and a greedy continuation
(no EOS stop) with the top-k logits of each step and the top-1/top-2 margin, so a test can tell a
real mismatch from a near-tie.
"""
import argparse
import copy
import json
import os
import random

import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)

TOP_K = 8
NEW_TOKENS = 24
# Lengths around the block sizes the engine supports (16..256): shorter than a block, exactly a
# block, one past a block, and longer than a 256-token block.
PROMPT_LENGTHS = [1, 7, 16, 17, 100, 257, 520]

FAMILIES = {
    "qwen3": (Qwen3Config, Qwen3ForCausalLM,
              dict(attention_bias=False, use_sliding_window=False)),
    # q/k/v biases, no q/k norm; head_dim is hidden / heads.
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, dict(use_sliding_window=False)),
    "llama": (LlamaConfig, LlamaForCausalLM, dict(attention_bias=False, mlp_bias=False)),
    "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM,
                  dict(attention_bias=False, use_sliding_window=False)),
}

MODELS = {
    # Real Qwen3 vocabulary, so the checkpoint runs with the real tokenizer (README demo).
    # Tied embeddings, GQA group 2, bf16 weights, config.json in the older style
    # (top-level rope_theta and torch_dtype).
    "qwen3-tiny-tied": dict(
        config=dict(vocab_size=151936, hidden_size=16, intermediate_size=48, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=128,
                    tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151645),
        generation_eos=[151645, 151643], dtype=torch.bfloat16, old_style_config=True,
        shard_size=None, seed=1),
    # Small vocabulary, untied LM head, GQA group 4, fp16 weights in several shards, config.json
    # as current transformers writes it (rope_parameters, dtype).
    "qwen3-tiny-untied": dict(
        config=dict(vocab_size=2048, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=128,
                    tie_word_embeddings=False, bos_token_id=1, eos_token_id=2),
        generation_eos=[2, 3], dtype=torch.float16, old_style_config=False,
        shard_size="600KB", seed=2),
    # Qwen2.5's shape in small: biases on q/k/v (perturbed away from zero, so a loader that
    # skips them cannot pass), GQA group 2, head_dim 64, untied, bf16.
    "qwen2-tiny": dict(
        family="qwen2",
        config=dict(vocab_size=1024, hidden_size=256, intermediate_size=320, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                    bos_token_id=1, eos_token_id=2),
        generation_eos=[2], dtype=torch.bfloat16, old_style_config=True, shard_size=None,
        seed=3, rope_theta=1000000.0),
    # Llama 3.2's shape in small: tied embeddings, llama3 rotary scaling with a short original
    # context, so the table's frequencies fall in all three bands (kept, blended, divided).
    "llama-tiny": dict(
        family="llama",
        config=dict(vocab_size=1024, hidden_size=256, intermediate_size=384, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=1, head_dim=64,
                    tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, rms_norm_eps=1e-5),
        generation_eos=[2], dtype=torch.bfloat16, old_style_config=False, shard_size=None,
        seed=4, rope_theta=500000.0,
        rope_scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=256)),
    # Qwen3-30B-A3B's pattern in small: 8 experts, 3 per token, renormalized weights; layer 1
    # dense (mlp_only_layers). Layer 0's router is skewed (force_routing) so that expert 0 gets
    # every token and experts 6 and 7 none; layer 2 routes freely. Hub-style config.json
    # (num_experts, rope_theta, torch_dtype).
    "qwen3-moe-tiny": dict(
        family="qwen3_moe",
        config=dict(vocab_size=1024, hidden_size=64, intermediate_size=96,
                    moe_intermediate_size=40, num_hidden_layers=3, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=64, num_experts=8, num_experts_per_tok=3,
                    norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1],
                    tie_word_embeddings=False, bos_token_id=1, eos_token_id=2),
        generation_eos=[2], dtype=torch.bfloat16, old_style_config=True, shard_size=None,
        seed=5, force_routing=True),
}


def family_of(spec):
    return FAMILIES[spec.get("family", "qwen3")]


def make_config(spec):
    config_class, _, family_options = family_of(spec)
    common = dict(max_position_embeddings=4096, rms_norm_eps=1e-6, initializer_range=0.1,
                  hidden_act="silu")
    config = config_class(**{**common, **family_options, **spec["config"]})
    theta = spec.get("rope_theta", 1000000.0)
    scaling = spec.get("rope_scaling")
    rope = {"rope_type": "llama3", "rope_theta": theta, **scaling} if scaling else \
        {"rope_type": "default", "rope_theta": theta}
    # transformers 5 keeps theta (and scaling) in rope_parameters; older versions take
    # rope_theta and rope_scaling.
    if getattr(config, "rope_parameters", None) is not None:
        config.rope_parameters = rope
    else:
        config.rope_theta = theta
        if scaling:
            config.rope_scaling = {"rope_type": "llama3", **scaling}
    return config


def perturb_norms(model, generator):
    # Norm weights away from 1 and biases away from 0, so a loader that skips them cannot pass.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1.0 + 0.5 * torch.randn(param.shape, generator=generator))
            elif name.endswith(".bias"):
                param.copy_(0.5 * torch.randn(param.shape, generator=generator))


def force_routing(model):
    """Layer 0: expert 0 chosen by every token, experts 6 and 7 by none. A large constant in
    hidden dimension 0 (every embedding row) dominates layer 0's normalized MLP input (about 8
    there), and the router's column 0 turns it into a logit about 12 above the others for
    expert 0 and 12 below for 6 and 7 (not more: probabilities that underflow to 0 would tie).
    Experts 1 to 5 ignore that dimension, so they compete by token. Layer 2's router ignores it
    too (and is scaled up, so that its choices are far from ties): its routing follows the
    tokens."""
    layers = model.model.layers
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 3.0
        layers[0].post_attention_layernorm.weight[0] = 1.0
        router = layers[0].mlp.gate.weight
        router[0, 0] = 1.5
        router[1:6, 0] = 0.0
        router[6:8, 0] = -1.5
        router = layers[2].mlp.gate.weight
        router[:, 0] = 0.0
        router.mul_(5.0)


def routing_counts(model, prompts, layer):
    """Tokens per expert that layer `layer`'s router sends over every prompt."""
    counts = torch.zeros(model.config.num_experts, dtype=torch.long)

    def hook(_, __, output):
        counts.add_(torch.bincount(output[2].flatten(), minlength=counts.numel()))

    handle = model.model.layers[layer].mlp.gate.register_forward_hook(hook)
    with torch.no_grad():
        for prompt in prompts:
            model(torch.tensor([prompt]))
    handle.remove()
    return counts.tolist()


def top_k(logits):
    values, ids = torch.topk(logits, TOP_K)
    return {"ids": ids.tolist(), "logits": [float(v) for v in values]}


def use_eager_attention(model):
    # The plain softmax(QK^T)V path: the fused CPU attention kernels need not be fp32-exact.
    # Likewise the experts' plain loop (grouped_mm has no float64, which fp64_deviation needs).
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    else:
        model.config._attn_implementation = "eager"
    if getattr(model.config, "num_experts", 0) and hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    return model


def golden_for_prompt(model, prompt):
    with torch.no_grad():
        logits = model(torch.tensor([prompt])).logits[0].float()  # [len, vocab]
        prompt_topk = [dict(position=p, **top_k(logits[p])) for p in range(len(prompt))]
        tokens = list(prompt)
        steps = []
        for _ in range(NEW_TOKENS):
            last = model(torch.tensor([tokens])).logits[0, -1].float()
            best = top_k(last)
            best["margin"] = best["logits"][0] - best["logits"][1]
            steps.append(best)
            tokens.append(best["ids"][0])
    return {"token_ids": prompt, "prompt_topk": prompt_topk,
            "greedy_token_ids": tokens[len(prompt):], "greedy_steps": steps}


def fp64_deviation(model, golden):
    """Largest |fp32 - fp64| logit over every golden sequence: how exact the fp32 goldens are."""
    model64 = copy.deepcopy(model).to(torch.float64)
    worst = 0.0
    with torch.no_grad():
        for case in golden["prompts"]:
            ids = torch.tensor([case["token_ids"] + case["greedy_token_ids"]])
            diff = (model(ids).logits.double() - model64(ids).logits).abs().max().item()
            worst = max(worst, diff)
    return worst


def rewrite_config_old_style(path):
    with open(path) as f:
        config = json.load(f)
    rope = config.pop("rope_parameters", None) or {}
    config["rope_theta"] = rope.get("rope_theta", config.get("rope_theta", 1000000.0))
    if "dtype" in config:
        config["torch_dtype"] = config.pop("dtype")
    config.pop("layer_types", None)
    if "num_local_experts" in config:
        config["num_experts"] = config.pop("num_local_experts")
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")


def make_model(name, spec, out_dir):
    torch.manual_seed(spec["seed"])
    generator = torch.Generator().manual_seed(spec["seed"])
    config = make_config(spec)
    model_class = family_of(spec)[1]
    model = use_eager_attention(model_class(config).eval())
    perturb_norms(model, generator)
    if spec.get("force_routing"):
        force_routing(model)
    # Round the weights to the storage dtype, then compute the goldens in fp32 from exactly those.
    # Parameters only: the rotary inv_freq buffer stays fp32, as it is when a checkpoint loads.
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.to(spec["dtype"]).to(torch.float32))

    model_dir = os.path.join(out_dir, name)
    os.makedirs(model_dir, exist_ok=True)
    stored = model_class(config).eval()
    stored.load_state_dict(model.state_dict())
    stored = stored.to(spec["dtype"])
    kwargs = {"max_shard_size": spec["shard_size"]} if spec["shard_size"] else {}
    stored.save_pretrained(model_dir, **kwargs)
    with open(os.path.join(model_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": spec["config"]["bos_token_id"],
                   "eos_token_id": spec["generation_eos"]}, f, indent=2)
        f.write("\n")
    if spec["old_style_config"]:
        rewrite_config_old_style(os.path.join(model_dir, "config.json"))

    rng = random.Random(spec["seed"])
    vocab = spec["config"]["vocab_size"]
    prompts = [[rng.randrange(vocab) for _ in range(n)] for n in PROMPT_LENGTHS]
    # Shares its first 270 tokens with the 520-token prompt: prefix-cache hits across blocks.
    prompts.append(prompts[-1][:270] + [rng.randrange(vocab) for _ in range(30)])
    if spec.get("force_routing"):
        forced, free = routing_counts(model, prompts, 0), routing_counts(model, prompts, 2)
        tokens = sum(len(p) for p in prompts)
        assert forced[0] == tokens and forced[6] == forced[7] == 0, forced
        print(f"{name}: tokens per expert, layer 0 {forced}, layer 2 {free}", flush=True)
    golden = {"model": name, "transformers": transformers.__version__, "torch": torch.__version__,
              "dtype": "float32", "top_k": TOP_K, "eos_token_ids": spec["generation_eos"],
              "prompts": [golden_for_prompt(model, p) for p in prompts]}
    golden["fp64_max_abs_diff"] = fp64_deviation(model, golden)
    print(f"{name}: fp32 goldens within {golden['fp64_max_abs_diff']:.2e} of fp64", flush=True)
    with open(os.path.join(model_dir, "golden.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
    print(f"{name}: {sum(os.path.getsize(os.path.join(model_dir, x)) for x in os.listdir(model_dir))}"
          " bytes", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*", choices=sorted(MODELS),
                        help="make these fixtures only (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for name, spec in MODELS.items():
        if not args.only or name in args.only:
            make_model(name, spec, args.out)


if __name__ == "__main__":
    main()
