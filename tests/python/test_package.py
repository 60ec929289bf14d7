"""What the installed package offers besides generation: type stubs and docstrings for the
whole public API, and the tokenizer against the `tokenizers` and `transformers` packages."""
import ast
import inspect
import os

import nanovllm
import pytest
from conftest import TIED
from nanovllm import LLM, SamplingParams, Tokenizer


def test_stubs_cover_the_native_module():
    package = os.path.dirname(nanovllm.__file__)
    assert os.path.exists(os.path.join(package, "py.typed"))
    with open(os.path.join(package, "_core.pyi")) as f:
        stub = ast.parse(f.read())
    classes = {node.name: node for node in stub.body if isinstance(node, ast.ClassDef)}
    assert set(classes) >= {"LLM", "Tokenizer"}
    for name, node in classes.items():
        stubbed = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        public = {n for n in vars(getattr(nanovllm._core, name)) if not n.startswith("_")}
        assert public <= stubbed, (name, public - stubbed)
    init = next(n for n in classes["LLM"].body if getattr(n, "name", "") == "__init__")
    keywords = [a.arg for a in init.args.kwonlyargs]
    assert keywords[:8] == ["max_num_batched_tokens", "max_num_seqs", "max_model_len",
                            "gpu_memory_utilization", "tensor_parallel_size", "enforce_eager",
                            "kvcache_block_size", "num_kvcache_blocks"]
    assert set(keywords[8:]) == {"device", "dtype", "enable_prefix_caching", "seed",
                                 "load_format", "async_scheduling"}


def test_public_api_has_docstrings():
    for obj in (LLM, LLM.generate, LLM.chat, LLM.__init__, SamplingParams, Tokenizer,
                Tokenizer.encode, Tokenizer.decode, Tokenizer.apply_chat_template):
        assert inspect.getdoc(obj), obj


def test_tokenizer_matches_the_tokenizers_package(tied_llm):
    from tokenizers import Tokenizer as Reference
    reference = Reference.from_file(os.path.join(TIED, "tokenizer.json"))
    ours = Tokenizer.from_pretrained(TIED)
    for text in ["Hello, world!", "  spaces\tand\nnewlines  ", "数字 123 和 emoji 🎉",
                 "<|im_start|>user\nhi<|im_end|>"]:
        ids = ours.encode(text)
        assert ids == reference.encode(text).ids
        assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids, skip_special_tokens=True) == reference.decode(ids)
    assert tied_llm.tokenizer.encode("abc") == ours.encode("abc")
    assert ours.eos_token_id == 151645 and ours.eos_token == "<|im_end|>"
    assert ours.vocab_size == reference.get_vocab_size(with_added_tokens=True)


def test_chat_template_matches_transformers():
    from transformers import AutoTokenizer
    reference = AutoTokenizer.from_pretrained(TIED)
    ours = Tokenizer.from_pretrained(TIED)
    conversation = [{"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "Name a prime."},
                    {"role": "assistant", "content": "7"},
                    {"role": "user", "content": "Another?"}]
    for kwargs in ({}, {"add_generation_prompt": True},
                   {"add_generation_prompt": True, "enable_thinking": False}):
        text = ours.apply_chat_template(conversation, tokenize=False, **kwargs)
        assert text == reference.apply_chat_template(conversation, tokenize=False, **kwargs)
        assert ours.apply_chat_template(conversation, **kwargs) == reference.encode(text)
