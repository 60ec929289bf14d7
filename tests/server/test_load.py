"""Many concurrent streaming clients (asyncio + httpx), each with its own prompt: every
stream completes with exactly the text `nanovllm generate` gives for its request, none lost or
mixed up. Records the server's peak memory and thread count; a slow reader stalls nobody."""
import asyncio
import json
import os
import socket
import ssl
import time

import httpx

from server_process import MODEL_NAME, Server, generate, parse_metrics

CLIENTS = int(os.environ.get("NANOVLLM_LOAD_CLIENTS", "1000"))
MAX_TOKENS = 8


def request_of(i):
    return {"prompt_token_ids": [1000 + i, 2000 + (i * 7) % 5000, 300 + i % 11],
            "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}


async def stream_one(tls, url, i, peaks, server):
    # A client of its own per stream: httpx's shared connection pool rescans every connection
    # on each request's start and end, which at 1,000 streams costs more CPU than the server.
    client = httpx.AsyncClient(verify=tls, timeout=120)
    body = {"model": MODEL_NAME, "prompt": request_of(i)["prompt_token_ids"],
            "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    text, finish, usage, done = "", None, None, False
    async with client, client.stream("POST", url + "/v1/completions", json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                continue
            chunk = json.loads(line[len("data: "):])
            assert "error" not in chunk, chunk
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk["choices"]:
                assert choice["index"] == 0
                text += choice["text"]
                finish = choice["finish_reason"] or finish
            if i == 0:  # sample the server while every stream is open
                peaks["threads"] = max(peaks.get("threads", 0), server.threads())
    return text, finish, usage, done


async def run_clients(server, count):
    tls = ssl.create_default_context()  # unused over http, but each client would load its own
    peaks = {}
    results = await asyncio.gather(
        *(stream_one(tls, server.url, i, peaks, server) for i in range(count)))
    return results, peaks


def raise_client_file_limit():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def test_concurrent_streams_complete_and_match_generate():
    raise_client_file_limit()
    expected = generate([request_of(i) for i in range(CLIENTS)])
    with Server() as server:
        idle_threads = server.threads()
        start = time.monotonic()
        results, peaks = asyncio.run(run_clients(server, CLIENTS))
        seconds = time.monotonic() - start
        for i, ((text, finish, usage, done), want) in enumerate(zip(results, expected)):
            assert done, f"stream {i} did not end with [DONE]"
            assert text == want["text"], f"stream {i}"
            assert finish == "length", f"stream {i}"
            assert usage["completion_tokens"] == MAX_TOKENS
            assert usage["prompt_tokens"] == 3
        metrics = parse_metrics(httpx.get(server.url + "/metrics").text)
        assert metrics[("nanovllm:request_success_total", 'finished_reason="length"')] == CLIENTS
        assert metrics[("nanovllm:generation_tokens_total", "")] == CLIENTS * MAX_TOKENS
        peak_rss = server.peak_rss_mib()
        print(f"\n{CLIENTS} concurrent streams of {MAX_TOKENS} tokens in {seconds:.2f} s; "
              f"server threads idle {idle_threads}, peak {peaks['threads']}; "
              f"peak RSS {peak_rss:.0f} MiB")
        # No thread per connection: the engine, the I/O thread and the CPU kernels' workers.
        assert peaks["threads"] < 8 + os.cpu_count()
        assert server.stop() == 0


def test_slow_reader_stalls_nobody():
    with Server() as server:
        host, port = server.url[len("http://"):].split(":")
        slow = socket.create_connection((host, int(port)))
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = json.dumps({"model": MODEL_NAME, "prompt": "x", "max_tokens": 3000,
                           "ignore_eos": True, "stream": True, "logprobs": 5}).encode()
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                     b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        # It runs, and never reads.
        deadline = time.monotonic() + 60
        while parse_metrics(httpx.get(server.url + "/metrics").text)[
                ("nanovllm:num_requests_running", "")] < 1:
            assert time.monotonic() < deadline, "the stalled reader's request never ran"
            time.sleep(0.02)
        start = time.monotonic()
        results, _ = asyncio.run(run_clients(server, 50))
        assert all(done and finish == "length" for _, finish, _, done in results)
        elapsed = time.monotonic() - start
        slow.close()
        print(f"\n50 streams beside a stalled reader in {elapsed:.2f} s")
        assert elapsed < 60
        assert server.stop() == 0
