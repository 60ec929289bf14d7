"""The official `openai` client against `nanovllm serve`: chat and completions, streamed and not,
give exactly what `nanovllm generate` gives for the same greedy or seeded requests; stop strings,
logprobs, usage, and the other endpoints."""
import httpx
import openai
import pytest

from server_process import MODEL_NAME, Server, generate, parse_metrics

MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name three colours."}]
NO_THINKING = {"enable_thinking": False}


@pytest.fixture(scope="module")
def server():
    # Small blocks, so that the shared system prompt fills cacheable blocks.
    with Server("--kvcache-block-size", "16") as s:
        yield s
        assert s.stop() == 0


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def chat_reference(max_tokens, **sampling):
    return generate([{"messages": MESSAGES, "chat_template_kwargs": NO_THINKING,
                      "max_tokens": max_tokens, "ignore_eos": True, **sampling}])[0]


def stream_text(chunks, kind):
    text, finish, usage = "", None, None
    for chunk in chunks:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            piece = choice.delta.content if kind == "chat" else choice.text
            text += piece or ""
            if choice.finish_reason is not None:
                assert finish is None, "two finishing chunks"
                finish = choice.finish_reason
    return text, finish, usage


def test_chat_greedy_equals_generate(client):
    expected = chat_reference(24, temperature=0)
    reply = client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, max_tokens=24, temperature=0,
        extra_body={"ignore_eos": True, "chat_template_kwargs": NO_THINKING})
    assert reply.object == "chat.completion"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content == expected["text"]
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.prompt_tokens == len(expected["prompt_token_ids"])
    assert reply.usage.completion_tokens == 24
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 24


def test_chat_seeded_stream_equals_generate(client):
    sampling = {"temperature": 1.0, "top_p": 0.9, "top_k": 50, "seed": 1234}
    expected = chat_reference(32, **sampling)
    stream = client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, max_completion_tokens=32, stream=True,
        temperature=1.0, top_p=0.9, seed=1234, stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "top_k": 50, "chat_template_kwargs": NO_THINKING})
    text, finish, usage = stream_text(stream, "chat")
    assert text == expected["text"]
    assert finish == "length"
    assert usage.completion_tokens == 32
    assert usage.prompt_tokens == len(expected["prompt_token_ids"])


def test_enable_thinking_changes_the_prompt(client):
    with_thinking = generate([{"messages": MESSAGES, "max_tokens": 1}])[0]
    reply = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=1)
    assert reply.usage.prompt_tokens == len(with_thinking["prompt_token_ids"])
    reply = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=1,
                                           extra_body={"chat_template_kwargs": NO_THINKING})
    assert reply.usage.prompt_tokens == len(chat_reference(1)["prompt_token_ids"])


@pytest.mark.parametrize("stream", [False, True])
def test_completions_text_ids_and_lists_equal_generate(client, stream):
    prompts = ["The capital of France is", [5, 6, 7, 8], "Hello"]
    expected = generate(
        [{("prompt" if isinstance(p, str) else "prompt_token_ids"): p, "max_tokens": 12,
          "temperature": 0.7, "seed": 99, "ignore_eos": True} for p in prompts])
    for prompt, want in zip(prompts, expected):
        kwargs = dict(model=MODEL_NAME, prompt=prompt, max_tokens=12, temperature=0.7, seed=99,
                      extra_body={"ignore_eos": True})
        if stream:
            text, finish, _ = stream_text(client.completions.create(stream=True, **kwargs), "text")
        else:
            reply = client.completions.create(**kwargs)
            text, finish = reply.choices[0].text, reply.choices[0].finish_reason
            assert reply.usage.prompt_tokens == len(want["prompt_token_ids"])
        assert text == want["text"]
        assert finish == "length"
    # All of them in one call: one choice per prompt, in order.
    reply = client.completions.create(model=MODEL_NAME, prompt=[prompts[0], prompts[2]],
                                      max_tokens=12, temperature=0.7, seed=99,
                                      extra_body={"ignore_eos": True})
    assert [c.index for c in reply.choices] == [0, 1]
    assert [c.text for c in reply.choices] == [expected[0]["text"], expected[2]["text"]]


def test_token_id_list_of_lists(client):
    prompts = [[5, 6, 7], [9, 10]]
    expected = generate([{"prompt_token_ids": p, "max_tokens": 6, "temperature": 0,
                          "ignore_eos": True} for p in prompts])
    stream = client.completions.create(model=MODEL_NAME, prompt=prompts, max_tokens=6,
                                       temperature=0, stream=True,
                                       extra_body={"ignore_eos": True})
    texts, finished = ["", ""], set()
    for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] += choice.text
            if choice.finish_reason:
                finished.add(choice.index)
    assert texts == [e["text"] for e in expected]
    assert finished == {0, 1}


def test_stop_string_never_streams(client):
    base = generate([{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0,
                      "ignore_eos": True}])[0]["text"]
    # A stop string from the middle of the greedy text, several characters long.
    stop = next(base[i:i + 4] for i in range(len(base) // 3, len(base) - 4)
                if base[i:i + 4].strip() and base.find(base[i:i + 4]) == i)
    expected = generate([{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0,
                          "ignore_eos": True, "stop": [stop]}])[0]
    assert expected["text"] == base[:base.find(stop)]
    stream = client.completions.create(model=MODEL_NAME, prompt="Once upon a time", max_tokens=40,
                                       temperature=0, stop=[stop], stream=True,
                                       extra_body={"ignore_eos": True})
    pieces, finish = [], None
    for chunk in stream:
        pieces.append(chunk.choices[0].text)
        finish = chunk.choices[0].finish_reason or finish
    assert "".join(pieces) == expected["text"]
    assert stop not in "".join(pieces)
    assert finish == "stop"


def test_logprobs_match_generate(client):
    expected = generate([{"prompt_token_ids": [5, 6, 7], "max_tokens": 5, "temperature": 0,
                          "ignore_eos": True, "logprobs": 3}])[0]["logprobs"]
    reply = client.completions.create(model=MODEL_NAME, prompt=[5, 6, 7], max_tokens=5,
                                      temperature=0, logprobs=3, extra_body={"ignore_eos": True})
    logprobs = reply.choices[0].logprobs
    assert logprobs.token_logprobs == pytest.approx([p["logprob"] for p in expected], abs=1e-5)
    assert [len(top) for top in logprobs.top_logprobs] == [3] * 5
    assert logprobs.text_offset[0] == 0
    stream = client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, max_tokens=5, temperature=0, logprobs=True,
        top_logprobs=2, stream=True, extra_body={"ignore_eos": True})
    content = [item for chunk in stream for choice in chunk.choices
               if choice.logprobs for item in choice.logprobs.content]
    assert len(content) == 5
    assert all(len(item.top_logprobs) == 2 for item in content)
    assert all(item.top_logprobs[0].logprob >= item.logprob - 1e-6 for item in content)


def test_models_health_tokenize_detokenize_metrics(server, client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL_NAME]
    assert httpx.get(server.url + "/health").status_code == 200
    from tokenizers import Tokenizer
    import os
    from server_process import TIED
    tokenizer = Tokenizer.from_file(os.path.join(TIED, "tokenizer.json"))
    tokens = httpx.post(server.url + "/tokenize", json={"prompt": "Hello, world"}).json()
    assert tokens["tokens"] == tokenizer.encode("Hello, world").ids
    assert tokens["count"] == len(tokens["tokens"])
    text = httpx.post(server.url + "/detokenize", json={"tokens": tokens["tokens"]}).json()
    assert text == {"prompt": "Hello, world"}
    chat = httpx.post(server.url + "/tokenize",
                      json={"messages": MESSAGES, "chat_template_kwargs": NO_THINKING}).json()
    assert chat["tokens"] == chat_reference(1)["prompt_token_ids"]
    response = httpx.get(server.url + "/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    metrics = parse_metrics(response.text)
    assert metrics[("nanovllm:num_requests_running", "")] == 0
    assert metrics[("nanovllm:generation_tokens_total", "")] > 0
    assert metrics[("nanovllm:prompt_tokens_total", "")] > 0
    assert metrics[("nanovllm:time_to_first_token_seconds_count", "")] > 0
    assert metrics[("nanovllm:time_per_output_token_seconds_count", "")] > 0
    assert metrics[("nanovllm:e2e_request_latency_seconds_count", "")] > 0
    assert metrics[("nanovllm:kv_cache_usage_perc", "")] == 0
    # MESSAGES was sent many times: its prefix blocks were found in the cache.
    assert 0 < metrics[("nanovllm:prefix_cache_hit_rate", "")] <= 1
