"""Shared fixtures for the tests of the installed nanovllm package. The `nanovllm` command
(NANOVLLM_BIN) is the reference the Python outputs are compared with."""
import json
import os
import subprocess

import pytest

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
TIED = os.path.join(DATA, "models", "qwen3-tiny-tied")  # has the Qwen3 tokenizer
UNTIED = os.path.join(DATA, "models", "qwen3-tiny-untied")  # token ids only
QWEN2 = os.path.join(DATA, "models", "qwen2-tiny")  # Qwen2ForCausalLM, token ids only
LLAMA = os.path.join(DATA, "models", "llama-tiny")  # LlamaForCausalLM, token ids only
MOE = os.path.join(DATA, "models", "qwen3-moe-tiny")  # Qwen3MoeForCausalLM, token ids only


def golden(model_dir):
    with open(os.path.join(model_dir, "golden.json")) as f:
        return json.load(f)


def cli_generate(model_dir, requests, *flags):
    """Rows of `nanovllm generate` for JSON-lines requests, without the index."""
    binary = os.environ.get("NANOVLLM_BIN")
    assert binary, "set NANOVLLM_BIN to the nanovllm command (build/apps/nanovllm)"
    lines = "".join(json.dumps(request) + "\n" for request in requests)
    proc = subprocess.run([binary, "generate", "--model", model_dir, "--no-progress", *flags],
                          input=lines, capture_output=True, text=True, timeout=300, check=True)
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    for row in rows:
        del row["index"]
    return rows


@pytest.fixture(scope="session")
def tied_llm():
    from nanovllm import LLM
    return LLM(TIED)


@pytest.fixture(scope="session")
def untied_llm():
    from nanovllm import LLM
    return LLM(UNTIED)
