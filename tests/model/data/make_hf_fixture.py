#!/usr/bin/env python3
"""Writes the reference checkpoint and config interpretations the loader tests compare against.

Everything here comes from the Hugging Face libraries themselves, not from this project:
  tiny-qwen3-hf/      config.json and generation_config.json saved by transformers, four
                      safetensors shards saved by the safetensors library, the index built by
                      huggingface_hub's shard splitter; tied embeddings, head_dim 8 != 8 / 2.
  tiny-qwen3-hf-expected.json
                      every tensor's values as float32, and as ml_dtypes rounds them to bfloat16
                      and float16 (round to nearest even).
  config-variants.json
                      config.json variants and the values transformers' Qwen3Config resolves
                      from them (head_dim, kv heads, rope theta, tied embeddings, eos ids).

Requires: pip install transformers safetensors huggingface_hub numpy ml_dtypes (no torch).
Run from anywhere: python3 tests/model/data/make_hf_fixture.py
"""

import json
import os
import shutil

import ml_dtypes
import numpy as np
from huggingface_hub.serialization import split_state_dict_into_shards_factory
from safetensors.numpy import save_file
from transformers import GenerationConfig, Qwen3Config

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKPOINT = os.path.join(HERE, "tiny-qwen3-hf")


def tensors_for(config):
    """Qwen3ForCausalLM's state dict names and shapes, tied: no lm_head."""
    h, i = config.hidden_size, config.intermediate_size
    d, q, kv = config.head_dim, config.num_attention_heads, config.num_key_value_heads
    shapes = {"model.embed_tokens.weight": (config.vocab_size, h), "model.norm.weight": (h,)}
    for layer in range(config.num_hidden_layers):
        p = f"model.layers.{layer}."
        shapes.update({
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (q * d, h),
            p + "self_attn.k_proj.weight": (kv * d, h),
            p + "self_attn.v_proj.weight": (kv * d, h),
            p + "self_attn.o_proj.weight": (h, q * d),
            p + "self_attn.q_norm.weight": (d,),
            p + "self_attn.k_norm.weight": (d,),
            p + "mlp.gate_proj.weight": (i, h),
            p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i),
        })
    return shapes


def storage_dtype(name):
    # A mix, as converted checkpoints sometimes have: norms in float32, o/down in float16.
    if name.endswith("norm.weight"):
        return np.float32
    if "o_proj" in name or "down_proj" in name:
        return np.float16
    return ml_dtypes.bfloat16


def write_checkpoint():
    shutil.rmtree(CHECKPOINT, ignore_errors=True)
    os.makedirs(CHECKPOINT)
    config = Qwen3Config(
        vocab_size=32, hidden_size=8, intermediate_size=12, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=True, eos_token_id=3, bos_token_id=1,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, dtype="bfloat16")
    config.save_pretrained(CHECKPOINT)
    GenerationConfig(eos_token_id=[3, 4], bos_token_id=1, do_sample=True, temperature=0.6).save_pretrained(CHECKPOINT)

    rng = np.random.default_rng(0)
    state = {}
    for name, shape in tensors_for(config).items():
        values = rng.normal(0.0, 1.0, size=shape).astype(np.float32)
        if name == "model.norm.weight":
            # float32 values halfway between bfloat16 neighbours: ties must go to even.
            values[:4] = [1.00390625, 1.01171875, -1.00390625, 3.0517578125e-05 * 1.0078125]
        state[name] = values.astype(storage_dtype(name))

    split = split_state_dict_into_shards_factory(
        state, get_storage_size=lambda array: array.nbytes,
        filename_pattern="model{suffix}.safetensors", max_shard_size=1200)
    assert split.is_sharded and len(split.filename_to_tensors) >= 3, split.filename_to_tensors
    for filename, names in split.filename_to_tensors.items():
        save_file({n: state[n] for n in names}, os.path.join(CHECKPOINT, filename),
                  metadata={"format": "pt"})
    index = {"metadata": split.metadata, "weight_map": split.tensor_to_filename}
    with open(os.path.join(CHECKPOINT, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)

    def as_list(array):
        return [float(x) for x in array.astype(np.float32).reshape(-1)]

    expected = {
        "float32": {n: as_list(a) for n, a in state.items()},
        "bfloat16": {n: as_list(a.astype(np.float32).astype(ml_dtypes.bfloat16))
                     for n, a in state.items()},
        "float16": {n: as_list(a.astype(np.float32).astype(np.float16)) for n, a in state.items()},
    }
    with open(os.path.join(HERE, "tiny-qwen3-hf-expected.json"), "w") as f:
        json.dump(expected, f)


QWEN3_0_6B = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}


def write_config_variants():
    def variant(label, **changes):
        config = dict(QWEN3_0_6B)
        for key, value in changes.items():
            if value is ...:
                config.pop(key)
            else:
                config[key] = value
        return label, config

    variants = [
        variant("released_qwen3_0_6b"),
        variant("no_head_dim", head_dim=...),
        variant("null_kv_heads", num_key_value_heads=None),
        variant("no_rope_theta", rope_theta=...),
        variant("rope_parameters", rope_theta=..., rope_scaling=...,
                rope_parameters={"rope_type": "default", "rope_theta": 2500000.0}),
        variant("rope_parameters_over_top_level", rope_theta=1000,
                rope_parameters={"rope_type": "default", "rope_theta": 7000.0}),
        variant("default_rope_scaling_dict", rope_scaling={"rope_type": "default"}),
        variant("rope_scaling_dict_with_theta", rope_scaling={"type": "default", "rope_theta": 300.0}),
        variant("rope_scaling_over_rope_parameters",
                rope_scaling={"rope_type": "default", "rope_theta": 111.0},
                rope_parameters={"rope_type": "default", "rope_theta": 222.0}),
        variant("untied", tie_word_embeddings=False),
        variant("no_tie_field", tie_word_embeddings=...),
        variant("eos_list", eos_token_id=[151645, 151643]),
        variant("no_eos", eos_token_id=...),
        variant("dtype_field", torch_dtype=..., dtype="float16"),
    ]
    out = []
    for label, config in variants:
        resolved = Qwen3Config.from_dict(dict(config))
        eos = resolved.eos_token_id
        eos = [] if eos is None else (list(eos) if isinstance(eos, (list, tuple)) else [eos])
        out.append({
            "label": label,
            "config": config,
            "resolved": {
                "head_dim": resolved.head_dim,
                "num_key_value_heads": resolved.num_key_value_heads,
                "rope_theta": float(resolved.rope_parameters["rope_theta"]),
                "tie_word_embeddings": bool(resolved.tie_word_embeddings),
                "eos_token_ids": eos,
            },
        })
    with open(os.path.join(HERE, "config-variants.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    write_checkpoint()
    write_config_variants()
