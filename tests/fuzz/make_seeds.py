"""Writes the seed corpora in tests/fuzz/corpus/ from the repository's fixtures and small
hand-made inputs, one directory per fuzz target. Run it again after changing it; libFuzzer
grows its own corpus from these in a scratch directory, so only the seeds are kept here."""
import json
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, os.path.join(ROOT, "tests", "jinja"))
from chat_templates import TEMPLATES  # noqa: E402


def write(target, name, content):
    path = os.path.join(HERE, "corpus", target, name)
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode())


def read(*parts):
    with open(os.path.join(DATA, *parts), encoding="utf-8") as f:
        return f.read()


def safetensors_bytes(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, data bytes)] packed in order."""
    header, offset, data = {}, 0, b""
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(payload)]}
        offset += len(payload)
        data += payload
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    write("safetensors", "f32_matrix.safetensors", safetensors_bytes([("w", "F32", [2, 2], f32)]))
    write("safetensors", "mixed_dtypes.safetensors", safetensors_bytes(
        [("a", "BF16", [3], b"\x80\x3f" * 3), ("b", "F16", [1, 2], b"\x00\x3c" * 2),
         ("c", "I32", [2], struct.pack("<2i", 7, -7)), ("d", "I64", [1], struct.pack("<q", 9))],
        metadata={"format": "pt"}))
    write("safetensors", "empty_and_scalar.safetensors", safetensors_bytes(
        [("empty", "F32", [0, 4], b""), ("scalar", "F32", [], struct.pack("<f", 1.5))]))
    write("safetensors", "no_tensors.safetensors", safetensors_bytes([], metadata={}))
    write("safetensors", "unpadded.safetensors",
          safetensors_bytes([("x", "F16", [2], b"\x00\x3c\x00\x40")], pad=False))
    write("safetensors", "overlap.safetensors",
          struct.pack("<Q", 96) + json.dumps({
              "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}).encode().ljust(96)
          + b"\x00" * 12)
    write("safetensors", "header_too_long.safetensors", struct.pack("<Q", 1 << 40) + b"{}")
    write("safetensors", "short.safetensors", b"\x02\x00\x00")


def index_seeds():
    shard1, shard2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    valid = {"metadata": {"total_size": 16}, "weight_map": {"a": shard1, "b": shard1, "c": shard2}}
    write("safetensors_index", "valid.json", json.dumps(valid, indent=2))
    write("safetensors_index", "missing_tensor.json",
          json.dumps({"weight_map": {"a": shard1, "c": shard2}}))
    write("safetensors_index", "wrong_shard.json",
          json.dumps({"weight_map": {"a": shard2, "b": shard1, "c": shard2}}))
    write("safetensors_index", "outside_dir.json",
          json.dumps({"weight_map": {"a": "../" + shard1, "b": "/" + shard1, "c": shard2}}))
    write("safetensors_index", "absent_shard.json", json.dumps({"weight_map": {"a": "nope"}}))
    write("safetensors_index", "untied_fixture.json",
          read("models", "qwen3-tiny-untied", "model.safetensors.index.json"))


def config_seeds():
    for model in ("qwen3-tiny-tied", "qwen3-tiny-untied", "qwen2-tiny", "llama-tiny",
                  "qwen3-moe-tiny"):
        write("model_config", f"{model}.json", read("models", model, "config.json"))
        write("model_config", f"{model}-generation.json",
              read("models", model, "generation_config.json"))
    qwen3_06b = json.loads(read("models", "qwen3-tiny-tied", "config.json"))
    qwen3_06b.update({"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
                      "num_attention_heads": 16, "num_key_value_heads": 8,
                      "max_position_embeddings": 40960,
                      "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                       "original_max_position_embeddings": 32768},
                      "eos_token_id": [151645, 151643]})
    write("model_config", "qwen3-0.6b-yarn.json", json.dumps(qwen3_06b, indent=2))
    write("model_config", "generation-sampling.json", json.dumps(
        {"do_sample": True, "eos_token_id": [151645, 151643], "temperature": 0.6, "top_k": 20,
         "top_p": 0.95}))


def base_tokenizer():
    return {
        "version": "1.0",
        "added_tokens": [
            {"id": 5, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": 6, "content": "</s>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False,
                  "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "c": 4}, "merges": ["a b"]},
    }


def tokenizer_seeds():
    base = base_tokenizer()
    # tokenizer_files_fuzz.cpp loads this one as the valid tokenizer.json of its second case.
    write("tokenizer_files", "bpe_byte_level.json", json.dumps(base, indent=1))
    qwen = json.loads(read("qwen3-tokenizer", "tokenizer.json"))
    split = dict(base, pre_tokenizer=qwen["pre_tokenizer"], normalizer=None)
    split["model"] = dict(base["model"], merges=[["a", "b"]], ignore_merges=True)
    write("tokenizer_files", "split_regex_pairs.json", json.dumps(split))
    template = dict(base, post_processor={
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}})
    template["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "NFD"}]}
    write("tokenizer_files", "template_processing.json", json.dumps(template))
    plain = dict(base, pre_tokenizer={"type": "Split", "pattern": {"String": " "},
                                       "behavior": "Removed", "invert": False}, decoder=None)
    plain["model"] = dict(base["model"], unk_token="c", fuse_unk=True)
    write("tokenizer_files", "plain_bpe_with_unk.json", json.dumps(plain))
    write("tokenizer_files", "qwen3_tokenizer_config.json",
          read("qwen3-tokenizer", "tokenizer_config.json"))
    write("tokenizer_files", "config_flags.json", json.dumps({
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
        "eos_token": {"content": "</s>", "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "__type": "AddedToken"},
        "pad_token": None, "added_tokens_decoder": {"5": {"content": "<s>", "special": True}},
        "chat_template": "{% for m in messages %}{{ bos_token + m['content'] }}{% endfor %}"}))


def codec_seeds():
    texts = ["Hello, my name is", "Hello wörld 你好 🤗", "  leading spaces\n\n\ttabs\r\n",
             "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
             "e\u0301 A\u030a \ufb01 \u00bd ①", "don't WE'LL 12345 3.14 #$%^&*",
             "Ελληνικά Русский עברית العربية हिन्दी 日本語 한국어"]
    for i, text in enumerate(texts):
        write("tokenizer_codec", f"text_{i}", b"\x00" + text.encode())
    write("tokenizer_codec", "invalid_utf8", b"\x00abc\xff\xfe\xc3(")
    ids = [9707, 11, 847, 829, 374, 151644, 151645, 151669, 151850, 151935, 30, 0]
    write("tokenizer_codec", "ids", b"\x01" + b"".join(struct.pack("<I", i)[:3] for i in ids))
    byte_tokens = [136, 241, 253, 222, 109]  # pieces of multi-byte characters
    write("tokenizer_codec", "byte_ids", b"\x01" + b"".join(struct.pack("<I", i)[:3] for i in byte_tokens))


def chat_template_seeds():
    config = json.loads(read("qwen3-tokenizer", "tokenizer_config.json"))
    write("chat_template", "qwen3.jinja", config["chat_template"])
    for name, source in TEMPLATES.items():
        write("chat_template", f"{name}.jinja", source)
    features = {
        "macro_call.jinja": "{% macro m(x, y=2) %}{{ x ~ y ~ caller() }}{% endmacro %}"
                            "{% call m(1) %}[{{ messages|length }}]{% endcall %}",
        "loop_controls.jinja": "{% for m in messages if m.role != 'tool' %}{% if loop.index > 3 %}"
                               "{% break %}{% endif %}{{ loop.index0 }}:{{ m.role|upper }} "
                               "{% else %}none{% endfor %}",
        "filters.jinja": "{{ tools|tojson(indent=2) }}{{ messages|map(attribute='role')|join(',') }}"
                         "{{ 'a b c'.split()|reverse|list }}{{ '%s=%d'|format('x', 3) }}"
                         "{{ range(3)|sum }}{{ {'b': 1, 'a': 2}|dictsort }}",
        "namespace_set.jinja": "{% set ns = namespace(n=0) %}{% for m in messages %}"
                               "{% set ns.n = ns.n + m.content|length %}{% endfor %}{{ ns.n }}"
                               "{% set x %}block{% endset %}{{ x|trim }}",
        "expressions.jinja": "{{ (1 + 2 * 3) // 2 ** 2 % 5 }}{{ 'x' if true else 'y' }}"
                             "{{ [1, 2][::-1] }}{{ (1, 'a') }}{{ 7 is divisibleby 7 }}"
                             "{{ messages[0]['content'][:5] }}{{ none is none and not false }}",
        "strings.jinja": "{{ 'Hello'.startswith('He') }}{{ ' x '.strip() }}{{ 'a-b'.replace('-', '+') }}"
                         "{{ '{} {}'.format(1, 2) }}{{ 'abc'|center(9) }}{{ 'x' * 3 }}",
        "raise.jinja": "{% if messages|length > 100 %}{{ raise_exception('too many') }}{% endif %}"
                       "{{ strftime_now('%Y') }}",
        "whitespace.jinja": "  {%- if true -%}  a  {%+ endif %}\n{# comment #}{% raw %}{{ x }}{% endraw %}",
        "generation.jinja": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
                            "{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}",
    }
    for name, source in features.items():
        write("chat_template", name, source)


def request_seeds():
    requests = [
        {"prompt": "Hello, my name is", "max_tokens": 16, "temperature": 0},
        {"prompt_token_ids": [1, 2, 3], "max_tokens": 4, "ignore_eos": True, "seed": 7},
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Hi!"}],
         "chat_template_kwargs": {"enable_thinking": False}, "max_tokens": 8},
        {"messages": [{"role": "user", "content": "Weather?"},
                      {"role": "assistant", "content": "",
                       "tool_calls": [{"type": "function",
                                       "function": {"name": "w", "arguments": {"city": "Paris"}}}]},
                      {"role": "tool", "content": "sunny"}],
         "chat_template_kwargs": {"tools": [{"type": "function", "function": {"name": "w"}}]}},
        {"prompt": "x", "temperature": 0.7, "top_k": 20, "top_p": 0.9, "stop": ["\n", "END"],
         "stop_token_ids": [151645], "logprobs": 5},
        {"prompt": "x", "stop": "once", "max_tokens": 2147483647},
    ]
    for i, request in enumerate(requests):
        write("request_json", f"request_{i}.json", json.dumps(request, ensure_ascii=False))
    bad = ['{"prompt": ""}', '{"prompt_token_ids": [1, -3]}', '{"prompt_token_ids": [1], "top_p": 1.5}',
           '{"prompt": "x", "colour": 1}', 'not json', '[1, 2]',
           '{"prompt": "x", "max_tokens": 99999999999}', '{"messages": []}']
    for i, line in enumerate(bad):
        write("request_json", f"bad_{i}.json", line)


def http_request(method, path, body=None, headers=(), version="1.1", chunked=False):
    lines = [f"{method} {path} HTTP/{version}", "Host: localhost", *headers]
    payload = b""
    if body is not None:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        if chunked:
            lines.append("Transfer-Encoding: chunked")
            half = len(payload) // 2
            payload = b"".join(b"%x\r\n%s\r\n" % (len(part), part)
                               for part in (payload[:half], payload[half:]) if part) + b"0\r\n\r\n"
        else:
            lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def http_seeds():
    key = "Authorization: Bearer key"
    chat = {"model": "fuzz", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "max_tokens": 2, "chat_template_kwargs": {"enable_thinking": False}}
    requests = {
        "health": http_request("GET", "/health"),
        "metrics": http_request("GET", "/metrics", version="1.0"),
        "models": http_request("GET", "/v1/models", headers=[key]),
        "completion": http_request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 3,
                                                              "seed": 7, "temperature": 0.5},
                                   headers=[key]),
        "completion_ids_stream": http_request(
            "POST", "/v1/completions", {"prompt": [[1, 2], "x"], "stream": True,
                                        "stream_options": {"include_usage": True}},
            headers=[key, "Expect: 100-continue"]),
        "chat_chunked": http_request("POST", "/v1/chat/completions", chat, headers=[key], chunked=True),
        "chat_without_key": http_request("POST", "/v1/chat/completions", chat),
        "tokenize": http_request("POST", "/tokenize", {"prompt": "Hello", "add_special_tokens": False}),
        "tokenize_messages": http_request("POST", "/tokenize", {"messages": chat["messages"],
                                                                "chat_template_kwargs": {"x": [1]}}),
        "detokenize": http_request("POST", "/detokenize", {"tokens": [9707, 11]}),
        "wrong_method": http_request("GET", "/tokenize"),
        "gzip_chunked": http_request("POST", "/tokenize", b"{}",
                                     headers=["Transfer-Encoding: gzip, chunked"]),
    }
    for name, content in requests.items():
        write("http_request", name + ".http", content)


def main():
    for target in ("safetensors", "safetensors_index", "model_config", "tokenizer_files",
                   "tokenizer_codec", "chat_template", "request_json", "http_request"):
        shutil.rmtree(os.path.join(HERE, "corpus", target), ignore_errors=True)
        os.makedirs(os.path.join(HERE, "corpus", target))
    safetensors_seeds()
    index_seeds()
    config_seeds()
    tokenizer_seeds()
    codec_seeds()
    chat_template_seeds()
    request_seeds()
    http_seeds()


if __name__ == "__main__":
    main()
