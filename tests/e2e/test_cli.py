"""The `nanovllm` command as a user runs it: the JSON-lines contracts of generate and tokenize,
bench's output lines, per-request errors, exit statuses. The binary comes from NANOVLLM_BIN."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

BIN = os.environ["NANOVLLM_BIN"]
DATA = os.path.join(os.path.dirname(__file__), "..", "data")
TIED = os.path.join(DATA, "models", "qwen3-tiny-tied")
UNTIED = os.path.join(DATA, "models", "qwen3-tiny-untied")


def run(args, stdin=""):
    proc = subprocess.run([BIN, *args], input=stdin, capture_output=True, text=True, timeout=120)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, rows, proc.stderr


def golden(model_dir):
    with open(os.path.join(model_dir, "golden.json")) as f:
        return json.load(f)


def test_generate_token_id_prompts_reproduce_transformers_greedy():
    cases = golden(UNTIED)["prompts"][:4]
    lines = "".join(json.dumps({"prompt_token_ids": c["token_ids"], "max_tokens": 12,
                                "temperature": 0, "ignore_eos": True}) + "\n" for c in cases)
    code, rows, err = run(["generate", "--model", UNTIED, "--no-progress"], lines)
    assert code == 0, err
    assert [r["index"] for r in rows] == list(range(len(cases)))
    for row, case in zip(rows, cases):
        assert list(row) == ["index", "prompt_token_ids", "token_ids", "text", "finish_reason"]
        assert row["prompt_token_ids"] == case["token_ids"]
        assert row["token_ids"] == case["greedy_token_ids"][:12]
        assert row["finish_reason"] == "length"
        assert row["text"] == ""  # this checkpoint has no tokenizer


def test_generate_text_and_chat_prompts_use_the_tokenizer():
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(TIED, "tokenizer.json"))
    lines = (json.dumps({"prompt": "Hello, my name is", "max_tokens": 5, "temperature": 0}) + "\n" +
             json.dumps({"messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 3,
                         "chat_template_kwargs": {"enable_thinking": False}}) + "\n")
    code, rows, err = run(["generate", "--model", TIED, "--no-progress", "--ignore-eos"], lines)
    assert code == 0, err
    assert rows[0]["prompt_token_ids"] == tokenizer.encode("Hello, my name is").ids
    assert len(rows[0]["token_ids"]) == 5
    assert rows[0]["text"] == tokenizer.decode(rows[0]["token_ids"], skip_special_tokens=True)
    chat = "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert rows[1]["prompt_token_ids"] == tokenizer.encode(chat).ids
    assert len(rows[1]["token_ids"]) == 3


def test_generate_repeatable_prompt_flag():
    code, rows, err = run(["generate", "--model", TIED, "--prompt", "a", "--prompt", "b c",
                           "--max-tokens", "2", "--no-progress"])
    assert code == 0, err
    assert [r["index"] for r in rows] == [0, 1]
    assert all(len(r["token_ids"]) <= 2 for r in rows)


def test_same_seed_same_output_and_sampling_flags():
    line = json.dumps({"prompt_token_ids": [5, 6, 7], "max_tokens": 16, "temperature": 1.0,
                       "top_k": 50, "top_p": 0.9, "seed": 1234, "ignore_eos": True}) + "\n"
    _, first, _ = run(["generate", "--model", UNTIED, "--no-progress"], line * 2)
    _, second, _ = run(["generate", "--model", UNTIED, "--no-progress"], line)
    assert first[0]["token_ids"] == first[1]["token_ids"] == second[0]["token_ids"]


def test_logprobs_report_the_sampled_token_and_the_top_k():
    line = json.dumps({"prompt_token_ids": [5, 6, 7], "max_tokens": 6, "temperature": 0,
                       "logprobs": 3, "ignore_eos": True}) + "\n"
    code, rows, err = run(["generate", "--model", UNTIED, "--no-progress"], line)
    assert code == 0, err
    positions = rows[0]["logprobs"]
    assert len(positions) == len(rows[0]["token_ids"]) == 6
    for token, position in zip(rows[0]["token_ids"], positions):
        assert position["token_id"] == token and position["rank"] == 1  # greedy: the best one
        assert len(position["top"]) == 3 and position["top"][0]["token_id"] == token
        values = [entry["logprob"] for entry in position["top"]]
        assert values == sorted(values, reverse=True) and values[0] <= 0.0
        assert position["logprob"] == values[0]


BAD_REQUESTS = [
    ("not json", "invalid JSON"),
    ('{"prompt": ""}', "empty"),
    ('{"prompt_token_ids": []}', "empty"),
    ('{"prompt_token_ids": [1, -3]}', "-3"),
    ('{"prompt_token_ids": [1, 2048]}', "2048"),
    ('{"prompt_token_ids": [1], "temperature": -1}', "temperature"),
    ('{"prompt_token_ids": [1], "top_p": 1.5}', "top_p"),
    ('{"prompt_token_ids": [1], "top_p": 0}', "top_p"),
    ('{"prompt_token_ids": [1], "max_tokens": 0}', "max_tokens"),
    ('{"prompt_token_ids": [1], "max_tokens": "many"}', "max_tokens"),
    # Integers that do not fit are named, never wrapped around.
    ('{"prompt_token_ids": [1], "max_tokens": 99999999999}', "max_tokens"),
    ('{"prompt_token_ids": [18446744073709551615]}', "18446744073709551615"),
    ('{"prompt_token_ids": [1], "temperature": 1e999}', "out of range"),
    ('{"prompt_token_ids": [1], "colour": 1}', "colour"),
    ('{"prompt_token_ids": [1], "logprobs": 99}', "logprobs"),
    ('{"prompt": "text without a tokenizer"}', "tokenizer"),
    ('{"prompt_token_ids": [1], "prompt": "both"}', "exactly one"),
    (json.dumps({"prompt_token_ids": [1] * 5000}), "max_model_len"),
    # Nesting is refused while parsing, before anything recurses over it.
    ('{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}", "deeper than 128 levels"),
    ('{"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"a": '
     + "[" * 100_000 + "]" * 100_000 + "}}", "deeper than 128 levels"),
]


@pytest.mark.parametrize("line,needle", BAD_REQUESTS)
def test_a_bad_request_fails_alone(line, needle):
    good = json.dumps({"prompt_token_ids": [3, 4], "max_tokens": 2}) + "\n"
    code, rows, _ = run(["generate", "--model", UNTIED, "--no-progress"],
                        good + line + "\n" + good)
    assert code == 1
    assert [r["index"] for r in rows] == [0, 1, 2]
    assert "error" in rows[1] and needle in rows[1]["error"], rows[1]
    assert rows[0]["finish_reason"] == rows[2]["finish_reason"] == "length"


def test_bad_chat_messages_fail_alone():
    lines = [json.dumps({"prompt": "ok", "max_tokens": 2}), json.dumps({"messages": []}),
             json.dumps({"messages": [{"content": "no role"}]}),
             json.dumps({"messages": [{"role": "user", "content": "x"}],
                         "chat_template_kwargs": [1]})]
    code, rows, _ = run(["generate", "--model", TIED, "--no-progress"], "\n".join(lines) + "\n")
    assert code != 0
    assert "error" not in rows[0]
    assert "non-empty" in rows[1]["error"]
    assert "role" in rows[2]["error"]
    assert "chat_template_kwargs" in rows[3]["error"]


def test_two_thousand_sampled_requests_all_get_rows(tmp_path):
    # At temperature 1.0 this random-weight model samples ids past the tokenizer's vocabulary
    # (Qwen3 pads its embedding to 151,936 rows): they add no text and fail nothing.
    line = json.dumps({"prompt": "hi", "max_tokens": 2}) + "\n"
    (tmp_path / "many.jsonl").write_text(line * 2000)
    proc = subprocess.run([BIN, "generate", "--model", TIED, "--input",
                           str(tmp_path / "many.jsonl"), "--output", str(tmp_path / "out.jsonl"),
                           "--no-progress"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["index"] for r in rows] == list(range(2000))
    assert all("error" not in r and len(r["token_ids"]) in (1, 2) for r in rows)
    padding = [t for r in rows for t in r["token_ids"] if t >= 151669]
    assert padding, "no padding id was sampled: the case this test is about did not happen"


def test_bad_model_directory_is_a_clear_error(tmp_path):
    code, rows, err = run(["generate", "--model", str(tmp_path), "--prompt", "x"])
    assert code == 2 and rows == []
    assert "config.json" in err
    (tmp_path / "config.json").write_text("{not json")
    code, _, err = run(["generate", "--model", str(tmp_path), "--prompt", "x"])
    assert code == 2 and "config.json" in err


def test_bad_engine_flag_is_a_clear_error():
    code, _, err = run(["generate", "--model", UNTIED, "--kvcache-block-size", "0", "--prompt", "x"])
    assert code == 2 and "block" in err


@pytest.mark.parametrize("args,needle", [
    (["generate", "--prompt", "x"], "--model"),  # a required flag missing
    (["generate", "--model", UNTIED, "--max-num-seqs", "many"], "--max-num-seqs"),
    (["generate", "--model", UNTIED, "--no-such-flag"], "--no-such-flag"),
    ([], "subcommand"),
])
def test_a_bad_command_line_is_bad_setup(args, needle):
    code, rows, err = run(args)
    assert code == 2 and rows == [], err
    assert needle in err, err


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_tensor_parallel_ranks_on_the_cpu_generate_what_one_rank_does(ranks):
    # The untied model's 8 heads and 2 KV heads split over 2, 4 and 8 ranks.
    lines = "".join(json.dumps(r) + "\n" for r in [
        {"prompt_token_ids": [9, 1000, 17], "max_tokens": 12, "temperature": 0},
        {"prompt_token_ids": [5, 6, 7, 8], "max_tokens": 12, "temperature": 0.8, "top_k": 20,
         "top_p": 0.9, "seed": 3, "logprobs": 2},
    ])
    args = ["generate", "--model", UNTIED, "--device", "cpu", "--no-progress"]
    code, one, err = run(args, lines)
    assert code == 0, err
    code, sharded, err = run(args + ["--tensor-parallel-size", str(ranks)], lines)
    assert code == 0, err
    assert [r["token_ids"] for r in sharded] == [r["token_ids"] for r in one]
    assert [len(r["logprobs"]) for r in sharded[1:]] == [12]


def test_a_model_that_does_not_split_over_the_ranks_is_bad_setup():
    code, rows, err = run(["generate", "--model", TIED, "--device", "cpu", "--prompt", "x",
                           "--tensor-parallel-size", "3"])
    assert code == 2 and rows == [], err
    assert "the 4 attention heads do not split over 3 ranks" in err, err


def interruptible_requests(num_short, num_long):
    """Short requests first, then ones that run for a long while on the CPU (the tied model's
    151,936-row LM head and vocabulary make every step slow)."""
    short = [{"prompt_token_ids": [5, 6, 7], "max_tokens": 2, "seed": i, "ignore_eos": True}
             for i in range(num_short)]
    long = [{"prompt_token_ids": [8, 9], "max_tokens": 4000, "seed": i, "ignore_eos": True}
            for i in range(num_long)]
    return short + long


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_leaves_finished_rows_and_an_error_row_per_unfinished_request(
        tmp_path, signal_number):
    requests = interruptible_requests(10, 20)
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([BIN, "generate", "--model", TIED, "--input",
                             str(tmp_path / "in.jsonl"), "--output", str(out), "--max-num-seqs",
                             "8", "--no-progress"], stderr=subprocess.PIPE, text=True)
    # Rows go out in input order as soon as the earlier ones have: the short ones come first.
    deadline = time.monotonic() + 120
    while (not out.exists() or len(out.read_text().splitlines()) < 10) and proc.poll() is None:
        assert time.monotonic() < deadline, "the short requests never reached the output"
        time.sleep(0.05)
    proc.send_signal(signal_number)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal_number, err
    name = signal.Signals(signal_number).name
    assert f"interrupted by {name}" in err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["index"] for r in rows] == list(range(len(requests)))
    # The finished rows are those of an uninterrupted run; every other row names the signal.
    code, expected, err = run(["generate", "--model", TIED, "--no-progress"],
                              "".join(json.dumps(r) + "\n" for r in requests[:10]))
    assert code == 0, err
    assert rows[:10] == expected
    assert rows[10:] == [{"index": i, "error": f"interrupted by {name}"}
                         for i in range(10, len(requests))]


def test_dummy_load_format_needs_only_the_config(tmp_path):
    with open(os.path.join(UNTIED, "config.json")) as f:
        (tmp_path / "config.json").write_text(f.read())
    code, rows, err = run(["generate", "--model", str(tmp_path), "--load-format", "dummy",
                           "--no-progress"], json.dumps({"prompt_token_ids": [1, 2, 3],
                                                          "max_tokens": 4}) + "\n")
    assert code == 0, err
    assert len(rows[0]["token_ids"]) <= 4


def test_tokenize_contract():
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(TIED, "tokenizer.json"))
    text = "Hello wörld 你好 🤗"
    lines = [json.dumps({"text": text}), json.dumps({"ids": tokenizer.encode(text).ids}),
             json.dumps({"messages": [{"role": "user", "content": "Hi"}],
                         "add_generation_prompt": True,
                         "chat_template_kwargs": {"enable_thinking": False}}),
             # Past the tokenizer's 151,669 ids but inside the model's 151,936: no text.
             json.dumps({"ids": [9707, 151850]}),
             json.dumps({"ids": [-1]}), json.dumps({"ids": [2**32]}), "{}",
             '{"ids": ' + "[" * 100_000 + "]" * 100_000 + "}"]
    code, rows, _ = run(["tokenize", "--model", TIED], "\n".join(lines) + "\n")
    assert code != 0  # the last three lines are errors
    assert rows[0] == {"ids": tokenizer.encode(text).ids}
    assert rows[1] == {"text": text}
    chat = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert rows[2] == {"text": chat, "ids": tokenizer.encode(chat).ids}
    assert rows[3] == {"text": tokenizer.decode([9707, 151850])} == {"text": "Hello"}
    assert "-1" in rows[4]["error"] and "4294967296" in rows[5]["error"]
    assert "error" in rows[6]
    assert "deeper than 128 levels" in rows[7]["error"]




def test_chat_rendering_keeps_key_order_like_transformers():
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(TIED)
    tools = [{"type": "function", "function": {"name": "lookup", "description": "z before a",
                                               "parameters": {"zeta": {"type": "string"},
                                                              "alpha": {"type": "integer"}}}}]
    messages = [{"role": "user", "content": "find it"},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"type": "function", "function": {
                     "name": "lookup", "arguments": {"zeta": "x", "alpha": 1}}}]},
                {"role": "tool", "content": "found"}]
    expected = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                             add_generation_prompt=True)
    line = json.dumps({"messages": messages, "add_generation_prompt": True,
                       "chat_template_kwargs": {"tools": tools}})
    code, rows, err = run(["tokenize", "--model", TIED], line + "\n")
    assert code == 0, err
    assert rows[0]["text"] == expected


# `nanovllm bench`: a shrunken bench.py workload on the CPU; Python's own `random` rebuilds it.
BENCH_KEYS = ["mode", "prompt_tokens", "output_tokens", "seconds", "output_tok_s",
              "prefill_seconds", "prefill_tokens", "prefill_steps", "decode_seconds",
              "decode_steps", "steps", "mean_decode_batch_size", "host_ms_per_step",
              "device_wait_seconds", "peak_memory_bytes", "startup_seconds", "device", "dtype",
              "settings"]
SMALL_BENCH = ["--num-seqs", "4", "--min-input-len", "10", "--max-input-len", "40",
               "--min-output-len", "4", "--max-output-len", "12", "--max-token-id", "2047"]


def run_bench(args):
    proc = subprocess.run([BIN, "bench", "--device", "cpu", *args], capture_output=True,
                          text=True, timeout=120)
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def bench_py_workload(num_seqs, min_in, max_in, min_out, max_out, max_token_id, seed=0):
    import random
    random.seed(seed)
    prompts = [[random.randint(0, max_token_id) for _ in range(random.randint(min_in, max_in))]
               for _ in range(num_seqs)]
    return prompts, [random.randint(min_out, max_out) for _ in range(num_seqs)]


def check_startup_line(line):
    match = re.fullmatch(r"start-up \(process start to ready\): (\d+\.\d\d) s", line)
    assert match, line
    return float(match.group(1))


@pytest.mark.parametrize("model", [UNTIED, TIED])  # token-id and text ("Benchmark: ") warm-up
def test_bench_runs_the_bench_py_workload(model):
    code, lines, err = run_bench(["--model", model, *SMALL_BENCH])
    assert code == 0, err
    assert len(lines) == 3, lines
    check_startup_line(lines[0])
    match = re.fullmatch(r"Total: (\d+)tok, Time: (\d+\.\d\d)s, Throughput: (\d+\.\d\d)tok/s",
                         lines[1])
    assert match, lines[1]
    prompts, max_tokens = bench_py_workload(4, 10, 40, 4, 12, 2047)
    assert int(match.group(1)) == sum(max_tokens)
    details = json.loads(lines[2])
    assert list(details) == BENCH_KEYS + ["num_seqs"]
    assert details["mode"] == "throughput" and details["num_seqs"] == 4
    assert details["prompt_tokens"] == details["prefill_tokens"] == sum(map(len, prompts))
    assert details["output_tokens"] == sum(max_tokens)  # ignore_eos: every request runs to the end
    # One prefill step for all four prompts, then one decode step per further token.
    assert details["prefill_steps"] == 1
    assert details["decode_steps"] == max(max_tokens) - 1
    assert details["steps"] == details["prefill_steps"] + details["decode_steps"]
    assert details["mean_decode_batch_size"] == pytest.approx(
        sum(m - 1 for m in max_tokens) / (max(max_tokens) - 1))
    assert details["host_ms_per_step"] > 0 and details["device_wait_seconds"] == 0
    assert details["peak_memory_bytes"] == 0  # the CPU backend reports no device memory
    assert (details["device"], details["dtype"]) == ("cpu", "float32")
    assert details["startup_seconds"] == pytest.approx(check_startup_line(lines[0]), abs=0.01)
    assert details["settings"]["temperature"] == pytest.approx(0.6)
    assert details["settings"]["max_input_len"] == 40


def test_bench_batch_1_decode():
    code, lines, err = run_bench(["--model", UNTIED, "--batch-1", "--batch-1-output-len", "16",
                                  "--batch-1-warmup-tokens", "4", "--max-token-id", "2047"])
    assert code == 0, err
    assert len(lines) == 3, lines
    check_startup_line(lines[0])
    assert re.fullmatch(r"batch-1 decode: 16 tokens in \d+\.\d{3} s = \d+\.\d tok/s", lines[1])
    details = json.loads(lines[2])
    assert list(details) == BENCH_KEYS + ["ms_per_token"]
    assert details["mode"] == "batch-1"
    assert details["prompt_tokens"] == 128 and details["output_tokens"] == 16
    assert details["decode_steps"] == 15 and details["mean_decode_batch_size"] == 1


BAD_BENCH_FLAGS = [
    (["--num-seqs", "0"], "--num-seqs"),
    (["--max-input-len", "50"], "--max-input-len"),  # below the default --min-input-len 100
    (["--min-output-len", "0"], "--min-output-len"),
    (["--temperature", "-1"], "temperature"),
    (["--batch-1", "--batch-1-output-len", "0"], "--batch-1-output-len"),
    (["--max-token-id", "-1"], "--max-token-id"),
    # Token ids up to 10000 (bench.py's) do not fit this model's vocabulary of 2048.
    (["--num-seqs", "1", "--max-input-len", "100", "--max-output-len", "100"], "vocabulary"),
]


@pytest.mark.parametrize("flags,needle", BAD_BENCH_FLAGS)
def test_bad_bench_flags_are_clear_errors(flags, needle):
    code, lines, err = run_bench(["--model", UNTIED, *flags])
    assert code == 2, (lines, err)
    assert needle in err, err
    assert not any(line.startswith("Total") for line in lines)



if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
