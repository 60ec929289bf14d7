"""generate() and chat() give what the engine gives: the goldens for greedy decoding, and the
same rows as `nanovllm generate` for the same requests."""
import nanovllm
import pytest
from conftest import LLAMA, MOE, QWEN2, TIED, UNTIED, cli_generate, golden
from nanovllm import LLM, SamplingParams


def test_the_package_is_the_installed_one():
    assert "site-packages" in nanovllm.__file__, nanovllm.__file__


def test_greedy_reproduces_the_transformers_goldens(untied_llm):
    cases = golden(UNTIED)["prompts"]
    params = [SamplingParams(temperature=0, ignore_eos=True, max_tokens=len(c["greedy_token_ids"]))
              for c in cases]
    outputs = untied_llm.generate([c["token_ids"] for c in cases], params, use_tqdm=False)
    assert [o["token_ids"] for o in outputs] == [c["greedy_token_ids"] for c in cases]
    assert all(o["finish_reason"] == "length" for o in outputs)


@pytest.mark.parametrize("model", [QWEN2, LLAMA, MOE], ids=["qwen2", "llama", "qwen3_moe"])
def test_other_families_reproduce_their_transformers_goldens(model):
    cases = golden(model)["prompts"]
    llm = LLM(model)
    # Each case up to its first near-tie, which float32 sums in another order may resolve
    # either way.
    lengths = [next((i for i, step in enumerate(c["greedy_steps"]) if step["margin"] < 1e-4),
                    len(c["greedy_steps"])) for c in cases]
    params = [SamplingParams(temperature=0, ignore_eos=True, max_tokens=max(n, 1)) for n in lengths]
    outputs = llm.generate([c["token_ids"] for c in cases], params, use_tqdm=False)
    for output, case, n in zip(outputs, cases, lengths):
        assert output["token_ids"][:n] == case["greedy_token_ids"][:n]


def test_greedy_reproduces_the_goldens_with_the_tokenizer(tied_llm):
    cases = golden(TIED)["prompts"]
    outputs = tied_llm.generate(
        [c["token_ids"] for c in cases],
        SamplingParams(temperature=0, ignore_eos=True, max_tokens=8), use_tqdm=False)
    assert [o["token_ids"] for o in outputs] == [c["greedy_token_ids"][:8] for c in cases]
    assert [o["text"] for o in outputs] == [
        tied_llm.tokenizer.decode(o["token_ids"], skip_special_tokens=True) for o in outputs]


def test_outputs_equal_the_command_line_for_the_same_requests(tied_llm):
    requests = [
        {"prompt": "Hello, my name is", "max_tokens": 12, "temperature": 0.8, "seed": 7},
        {"prompt_token_ids": [5, 6, 7, 8], "max_tokens": 9, "temperature": 0},
        {"prompt": "The capital of France is", "max_tokens": 16, "top_k": 20, "top_p": 0.9,
         "seed": 3, "ignore_eos": True, "logprobs": 2},
        {"prompt": "a b c", "max_tokens": 30, "temperature": 0, "stop": ["the"],
         "stop_token_ids": [11]},
    ]
    prompts = [r.get("prompt", r.get("prompt_token_ids")) for r in requests]
    params = [SamplingParams(**{k: v for k, v in r.items()
                                if k not in ("prompt", "prompt_token_ids")}) for r in requests]
    outputs = tied_llm.generate(prompts, params, use_tqdm=False)
    assert outputs == cli_generate(TIED, requests)
    assert list(outputs[0]) == ["prompt_token_ids", "token_ids", "text", "finish_reason"]
    assert "logprobs" in outputs[2]


def test_unseeded_sampling_follows_the_engine_seed_like_the_command_line():
    requests = [{"prompt": "Once upon a time", "max_tokens": 10}] * 3
    llm = LLM(TIED, seed=11)
    outputs = llm.generate([r["prompt"] for r in requests], SamplingParams(max_tokens=10),
                           use_tqdm=False)
    # `nanovllm generate` seeds its engine with 0; the same seed here gives the same rows.
    assert LLM(TIED).generate([r["prompt"] for r in requests], SamplingParams(max_tokens=10),
                              use_tqdm=False) == cli_generate(TIED, requests)
    assert outputs != cli_generate(TIED, requests)


def test_chat_equals_generate_on_the_rendered_prompt_and_the_command_line(tied_llm):
    conversation = [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi!"}]
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    kwargs = {"enable_thinking": False}
    [chat] = tied_llm.chat(conversation, params, use_tqdm=False, chat_template_kwargs=kwargs)
    text = tied_llm.tokenizer.apply_chat_template(conversation, tokenize=False,
                                                  add_generation_prompt=True, **kwargs)
    [plain] = tied_llm.generate([text], params, use_tqdm=False)
    assert chat == plain
    [row] = cli_generate(TIED, [{"messages": conversation, "chat_template_kwargs": kwargs,
                                 "max_tokens": 6, "temperature": 0, "ignore_eos": True}])
    assert chat == row
    # A list of conversations gives one output each, in order.
    both = tied_llm.chat([conversation, conversation[1:]], params, use_tqdm=False)
    assert len(both) == 2 and both[0]["prompt_token_ids"] != both[1]["prompt_token_ids"]


def test_one_sampling_params_or_one_per_prompt_or_none(untied_llm):
    prompts = [[1, 2, 3], [4, 5]]
    one = untied_llm.generate(prompts, SamplingParams(temperature=0, max_tokens=3),
                              use_tqdm=False)
    each = untied_llm.generate(prompts, [SamplingParams(temperature=0, max_tokens=3)] * 2,
                               use_tqdm=False)
    assert one == each
    default = untied_llm.generate(prompts, use_tqdm=False)  # nano-vllm's defaults: 64 tokens
    assert all(len(o["token_ids"]) <= 64 for o in default)
    assert untied_llm.generate([], SamplingParams(), use_tqdm=False) == []


def test_progress_line_on_stderr(untied_llm, capfd):
    untied_llm.generate([[1, 2, 3]], SamplingParams(max_tokens=4))
    err = capfd.readouterr().err
    assert "Generating: 1/1" in err and "Prefill=" in err and "Decode=" in err
    untied_llm.generate([[1, 2, 3]], SamplingParams(max_tokens=4), use_tqdm=False)
    assert capfd.readouterr().err == ""


def test_last_generate_stats_count_the_steps(untied_llm):
    untied_llm.generate([[1, 2, 3]], SamplingParams(max_tokens=5, ignore_eos=True),
                        use_tqdm=False)
    stats = untied_llm.last_generate_stats()
    assert stats["prefill_steps"] == 1 and stats["decode_steps"] == 4 and stats["steps"] == 5


def test_tensor_parallel_ranks_on_the_cpu_reproduce_the_goldens():
    # nano-vllm's keyword; the untied model's 8 heads split over 2, 4 and 8 ranks.
    reference = golden(UNTIED)["prompts"][0]
    # Up to the first near-tie, which float32 sums in another order may resolve either way.
    length = next((i for i, step in enumerate(reference["greedy_steps"]) if step["margin"] < 1e-4),
                  len(reference["greedy_steps"]))
    expected = reference["greedy_token_ids"][:length]
    for ranks in (2, 4, 8):
        llm = LLM(UNTIED, tensor_parallel_size=ranks, device="cpu")
        [output] = llm.generate([reference["token_ids"]],
                                SamplingParams(temperature=0.0, max_tokens=length, ignore_eos=True),
                                use_tqdm=False)
        assert output["token_ids"] == expected, ranks
    with pytest.raises(ValueError, match="the 4 attention heads do not split over 3 ranks"):
        LLM(TIED, tensor_parallel_size=3, device="cpu")
