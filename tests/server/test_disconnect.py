"""Clients that leave mid-stream: their requests are aborted and their KV blocks freed at once,
/metrics shows nothing running and an empty KV cache, and the server goes on answering."""
import asyncio
import json
import socket
import time

import httpx

from server_process import MODEL_NAME, Server, parse_metrics

DROPPED = 100


def metrics(server):
    return parse_metrics(httpx.get(server.url + "/metrics").text)


async def drop_after_first_chunk(client, url, i):
    body = {"model": MODEL_NAME, "prompt": [7 + i, 8, 9], "max_tokens": 3000,
            "ignore_eos": True, "stream": True}
    async with client.stream("POST", url + "/v1/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                return  # leaving the block closes the connection mid-stream


async def drop_all(server):
    # No keep-alive pool: leaving the stream closes its connection.
    limits = httpx.Limits(max_connections=DROPPED, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        await asyncio.gather(*(drop_after_first_chunk(client, server.url, i)
                               for i in range(DROPPED)))


def wait_until_idle(server, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        values = metrics(server)
        if (values[("nanovllm:num_requests_running", "")] == 0
                and values[("nanovllm:num_requests_waiting", "")] == 0
                and values[("nanovllm:kv_cache_usage_perc", "")] == 0):
            return values
        assert time.monotonic() < deadline, f"still busy: {values}"
        time.sleep(0.05)


def test_dropped_streams_are_aborted_and_free_their_blocks():
    with Server() as server:
        start = time.monotonic()
        asyncio.run(drop_all(server))
        values = wait_until_idle(server)
        print(f"\n{DROPPED} dropped streams aborted, cache empty after "
              f"{time.monotonic() - start:.2f} s")
        assert values[("nanovllm:request_success_total", 'finished_reason="abort"')] == DROPPED
        # None ran to its 3000 tokens.
        assert values[("nanovllm:generation_tokens_total", "")] < DROPPED * 3000
        reply = httpx.post(server.url + "/v1/completions",
                           json={"prompt": "still there?", "max_tokens": 4}, timeout=30)
        assert reply.status_code == 200
        assert reply.json()["choices"][0]["finish_reason"] in ("stop", "length")
        assert server.stop() == 0


def test_non_streaming_client_that_leaves_is_aborted():
    with Server() as server:
        host, port = server.url[len("http://"):].split(":")
        body = json.dumps({"prompt": "x", "max_tokens": 4000, "ignore_eos": True}).encode()
        conn = socket.create_connection((host, int(port)))
        conn.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        deadline = time.monotonic() + 10
        while metrics(server)[("nanovllm:num_requests_running", "")] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        conn.close()
        values = wait_until_idle(server)
        assert values[("nanovllm:request_success_total", 'finished_reason="abort"')] == 1
        assert server.stop() == 0
