"""A cut-down copy of a tiny Qwen3 checkpoint for running nano-vllm's bench.py on the CPU: its
first layer with one attention head, and its vocabulary cut to the first `base_vocab` tokens
(plus the special tokens, renumbered after them).

bench.py generates 133,966 tokens from 142,827 prompt tokens. On the CPU the tiny checkpoint
spends its time per token in the 151,936-row LM head, in sampling over it and in attention (4
heads of 128), and needs a quarter of an hour for that; bench.py's prompts use ids up to 10,000
only, and this copy runs the same workload unchanged in a minute or two. The tokenizer stays
consistent: it keeps the byte alphabet and the merges whose parts and result are kept, so any
text still encodes.
"""
import json
import os
import struct

import numpy as np

_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}  # bf16 as raw bits


def _read_safetensors(path):
    with open(path, "rb") as f:
        header_size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_size))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name != "__metadata__":
            begin, end = info["data_offsets"]
            array = np.frombuffer(data[begin:end], dtype=_DTYPES[info["dtype"]])
            tensors[name] = (info["dtype"], array.reshape(info["shape"]))
    return tensors, header.get("__metadata__")


def _write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata} if metadata else {}
    offset, blobs = 0, []
    for name, (dtype, array) in tensors.items():
        blob = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def _cut_tokenizer(tokenizer, base_vocab):
    """Cuts tokenizer.json in place; returns the old -> new ids of the added tokens."""
    model = tokenizer["model"]
    vocab = {token: i for token, i in model["vocab"].items() if i < base_vocab}
    model["merges"] = [m for m in model["merges"]
                       if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
    model["vocab"] = vocab
    remap = {}
    for k, added in enumerate(tokenizer["added_tokens"]):
        remap[added["id"]] = added["id"] = base_vocab + k
    return remap


def _cut_weights(tensors, vocab_size, head_dim):
    kept = {}
    for name, (dtype, array) in tensors.items():
        if name.startswith("model.layers.") and not name.startswith("model.layers.0."):
            continue  # the first layer only
        if name == "model.embed_tokens.weight":
            array = array[:vocab_size]
        elif name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")):
            array = array[:head_dim]  # head 0's rows
        elif name.endswith("o_proj.weight"):
            array = array[:, :head_dim]
        kept[name] = (dtype, array)
    return kept


def make_bench_checkpoint(source, destination, base_vocab):
    os.makedirs(destination, exist_ok=True)

    def load(name):
        with open(os.path.join(source, name)) as f:
            return json.load(f)

    def save(name, value):
        with open(os.path.join(destination, name), "w") as f:
            json.dump(value, f, ensure_ascii=False, indent=1)

    tokenizer = load("tokenizer.json")
    remap = _cut_tokenizer(tokenizer, base_vocab)
    save("tokenizer.json", tokenizer)
    tokenizer_config = load("tokenizer_config.json")
    tokenizer_config["added_tokens_decoder"] = {
        str(remap[int(i)]): token for i, token in tokenizer_config["added_tokens_decoder"].items()}
    save("tokenizer_config.json", tokenizer_config)

    config, generation = load("config.json"), load("generation_config.json")
    for values in (config, generation):
        for key in ("bos_token_id", "eos_token_id"):
            ids = values.get(key)
            if ids is not None:
                values[key] = [remap[i] for i in ids] if isinstance(ids, list) else remap[ids]
    assert config["tie_word_embeddings"], "the LM head is the embedding, cut with it"
    config.update(vocab_size=base_vocab + len(remap), num_hidden_layers=1,
                  num_attention_heads=1, num_key_value_heads=1)
    save("config.json", config)
    save("generation_config.json", generation)

    tensors, metadata = _read_safetensors(os.path.join(source, "model.safetensors"))
    _write_safetensors(os.path.join(destination, "model.safetensors"),
                       _cut_weights(tensors, config["vocab_size"], config["head_dim"]), metadata)
    return destination
