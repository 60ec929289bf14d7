"""Bad input gets an OpenAI-style error ({"error": {"message", "type", "param", "code"}}) with
the right status, nothing crashes, and the server goes on serving everyone else."""
import asyncio
import json
import socket
import time

import httpx
import pytest

from server_process import MODEL_NAME, Server, parse_metrics

API_KEY = "sk-test-key"
MAX_BODY = 20000
CONTEXT = 512


@pytest.fixture(scope="module")
def server():
    with Server("--api-key", API_KEY, "--max-request-body-bytes", str(MAX_BODY),
                "--max-model-len", str(CONTEXT)) as s:
        yield s
        assert s.stop() == 0


def post(server, path, body=None, content=None, key=API_KEY, headers=None):
    headers = dict(headers or {})
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(server.url + path, json=body, content=content, headers=headers, timeout=30)


def expect_error(response, status, param=None, words=()):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == status
    assert isinstance(error["message"], str) and error["message"]
    if param is not None:
        assert error["param"] == param, error
    for word in words:
        assert word in error["message"], error
    return error


CHAT = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
COMPLETION = {"model": MODEL_NAME, "prompt": "hi", "max_tokens": 2}

BAD_FIELDS = [
    # (endpoint, changes, param, words in the message)
    ("/v1/completions", {"max_tokens": "ten"}, "max_tokens", ["32-bit integer"]),
    ("/v1/completions", {"max_tokens": 0}, "max_tokens", ["at least 1"]),
    ("/v1/completions", {"max_tokens": 2 ** 40}, "max_tokens", []),
    ("/v1/completions", {"temperature": "hot"}, "temperature", ["number"]),
    ("/v1/completions", {"temperature": -1}, "temperature", []),
    ("/v1/completions", {"top_p": 0}, "top_p", []),
    ("/v1/completions", {"top_p": 1.5}, "top_p", []),
    ("/v1/completions", {"top_k": -2}, "top_k", []),
    ("/v1/completions", {"seed": -1}, "seed", []),
    ("/v1/completions", {"seed": "x"}, "seed", []),
    ("/v1/completions", {"logprobs": 21}, "logprobs", []),
    ("/v1/completions", {"stop": ""}, "stop", []),
    ("/v1/completions", {"stop": [1]}, "stop", []),
    ("/v1/completions", {"stream": "yes"}, "stream", []),
    ("/v1/completions", {"stream_options": {"include_usage": True}}, "stream_options", []),
    ("/v1/completions", {"prompt": {"text": "hi"}}, "prompt", []),
    ("/v1/completions", {"prompt": ""}, "prompt", ["empty"]),
    ("/v1/completions", {"prompt": []}, "prompt", []),
    ("/v1/completions", {"prompt": [1, "a"]}, "prompt", []),
    ("/v1/completions", {"prompt": [-1, 5]}, "prompt", ["vocabulary"]),
    ("/v1/completions", {"prompt": [10 ** 6]}, "prompt", ["vocabulary"]),
    ("/v1/completions", {"prompt": [5] * CONTEXT}, "prompt", ["context length"]),
    ("/v1/completions", {"prompt": [5] * 10, "max_tokens": CONTEXT}, "max_tokens",
     ["context length"]),
    ("/v1/completions", {"n": 2}, "n", ["not supported"]),
    ("/v1/completions", {"best_of": 3}, "best_of", []),
    ("/v1/completions", {"echo": True}, "echo", []),
    ("/v1/completions", {"presence_penalty": 0.5}, "presence_penalty", []),
    ("/v1/completions", {"logit_bias": {"5": 1}}, "logit_bias", []),
    ("/v1/completions", {"model": 5}, "model", []),
    ("/v1/chat/completions", {"messages": "hi"}, "messages", []),
    ("/v1/chat/completions", {"messages": []}, "messages", []),
    ("/v1/chat/completions", {"messages": [{"content": "no role"}]}, "messages", ["role"]),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, "messages", []),
    ("/v1/chat/completions",
     {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "messages", ["text"]),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": " ".join(map(str, range(600)))}]},
     "messages", ["context length"]),
    ("/v1/chat/completions", {"n": 4}, "n", []),
    ("/v1/chat/completions", {"top_logprobs": 3}, "top_logprobs", ["logprobs"]),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 30}, "logprobs", []),
    ("/v1/chat/completions", {"max_completion_tokens": -5}, "max_completion_tokens", []),
    ("/v1/chat/completions", {"chat_template_kwargs": [1]}, "chat_template_kwargs", []),
    ("/v1/chat/completions", {"tools": [{"type": "function"}]}, "tools", []),
    ("/v1/chat/completions", {"response_format": {"type": "json_object"}}, "response_format", []),
]


@pytest.mark.parametrize("path,changes,param,words", BAD_FIELDS)
def test_bad_fields_are_named(server, path, changes, param, words):
    body = dict(CHAT if "chat" in path else COMPLETION)
    body.update(changes)
    expect_error(post(server, path, body), 400, param, words)


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_malformed_json_and_non_objects(server, path):
    expect_error(post(server, path, content=b'{"prompt": "hi",'), 400, words=["JSON"])
    expect_error(post(server, path, content=b"[1, 2]"), 400, words=["object"])
    expect_error(post(server, path, content=b"\xff\xfe"), 400)
    expect_error(post(server, path, content=b""), 400)


def test_unknown_model_is_404(server):
    expect_error(post(server, "/v1/completions", {**COMPLETION, "model": "gpt-4"}), 404, "model",
                 ["gpt-4"])
    expect_error(post(server, "/v1/chat/completions", {**CHAT, "model": "nope"}), 404, "model")


def test_api_key(server):
    expect_error(post(server, "/v1/completions", COMPLETION, key=None), 401)
    expect_error(post(server, "/v1/completions", COMPLETION, key="sk-wrong"), 401)
    expect_error(post(server, "/v1/completions", COMPLETION, key=API_KEY + "x"), 401)
    expect_error(post(server, "/v1/chat/completions", CHAT,
                      headers={"Authorization": API_KEY}, key=None), 401)
    response = httpx.get(server.url + "/v1/models")
    expect_error(response, 401)
    assert post(server, "/v1/completions", COMPLETION).status_code == 200
    assert httpx.get(server.url + "/health").status_code == 200  # no key needed


def test_oversized_body_is_413(server):
    body = {**COMPLETION, "prompt": "x" * (MAX_BODY + 1)}
    expect_error(post(server, "/v1/completions", body), 413, words=[str(MAX_BODY)])
    # Chunked, so the size is only known while reading.
    chunks = iter([b'{"prompt": "', b"y" * (MAX_BODY + 10), b'"}'])
    expect_error(post(server, "/v1/completions", content=chunks), 413)


def test_unknown_paths_and_methods(server):
    expect_error(httpx.get(server.url + "/v1/nothing"), 404)
    expect_error(httpx.get(server.url + "/v1/completions",
                           headers={"Authorization": f"Bearer {API_KEY}"}), 405)
    expect_error(httpx.post(server.url + "/health"), 405)


def test_tokenize_and_detokenize_errors(server):
    expect_error(post(server, "/tokenize", {"prompt": 5}), 400, "prompt")
    expect_error(post(server, "/tokenize", {}), 400)
    expect_error(post(server, "/tokenize", {"prompt": "x", "model": "other"}), 404, "model")
    expect_error(post(server, "/detokenize", {"tokens": "abc"}), 400, "tokens")
    expect_error(post(server, "/detokenize", {"tokens": [-3]}), 400, "tokens")
    expect_error(post(server, "/detokenize", {"tokens": [2 ** 40]}), 400, "tokens")


def test_garbage_on_the_socket_and_the_server_still_serves(server):
    host, port = server.url[len("http://"):].split(":")
    for garbage in [b"\x00\x01\x02 not http\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
                    b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n"]:
        with socket.create_connection((host, int(port))) as conn:
            conn.sendall(garbage)
            conn.settimeout(10)
            reply = conn.recv(65536)
            assert reply.startswith(b"HTTP/1.1 4"), reply
    with socket.create_connection((host, int(port))) as conn:
        conn.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        conn.shutdown(socket.SHUT_WR)  # a truncated body, then gone
    reply = post(server, "/v1/completions", COMPLETION)
    assert reply.status_code == 200
    assert reply.json()["usage"]["completion_tokens"] <= 2


def test_bad_requests_beside_good_ones(server):
    async def run():
        async with httpx.AsyncClient(timeout=60,
                                     headers={"Authorization": f"Bearer {API_KEY}"}) as client:
            good = [client.post(server.url + "/v1/completions",
                                json={"prompt": [5, 6, i], "max_tokens": 6, "temperature": 0,
                                      "ignore_eos": True}) for i in range(20)]
            bad = [client.post(server.url + "/v1/completions", content=b"{" * i)
                   for i in range(1, 21)]
            return await asyncio.gather(*good), await asyncio.gather(*bad)
    good, bad = asyncio.run(run())
    assert all(r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 6 for r in good)
    assert all(r.status_code == 400 for r in bad)
    values = parse_metrics(httpx.get(server.url + "/metrics").text)
    assert values[("nanovllm:num_requests_running", "")] == 0


def wait_for(server, running, waiting, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        values = parse_metrics(httpx.get(server.url + "/metrics").text)
        if (values[("nanovllm:num_requests_running", "")] == running
                and values[("nanovllm:num_requests_waiting", "")] == waiting):
            return
        assert time.monotonic() < deadline, values
        time.sleep(0.02)


def test_full_queue_is_503_at_once():
    with Server("--max-num-seqs", "1", "--max-pending-requests", "2") as server:
        host, port = server.url[len("http://"):].split(":")
        body = json.dumps({"prompt": "x", "max_tokens": 4000, "ignore_eos": True,
                           "stream": True}).encode()
        request = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                   + str(len(body)).encode() + b"\r\n\r\n" + body)
        held = []
        for running, waiting in [(1, 0), (1, 1), (1, 2)]:  # one runs, two wait
            conn = socket.create_connection((host, int(port)))
            conn.sendall(request)
            assert conn.recv(12) == b"HTTP/1.1 200"
            held.append(conn)
            wait_for(server, running, waiting)
        response = httpx.post(server.url + "/v1/completions", json={"prompt": "x"}, timeout=5)
        expect_error(response, 503, words=["max-pending-requests"])
        values = parse_metrics(httpx.get(server.url + "/metrics").text)
        assert values[("nanovllm:request_rejected_total", "")] == 1
        for conn in held:
            conn.close()
        assert server.stop() == 0
