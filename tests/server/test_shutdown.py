"""SIGINT / SIGTERM under load: the server stops accepting, every in-flight stream ends with an
error event and [DONE], waiting non-streamed requests get a 503, and the process exits 0."""
import asyncio
import json
import signal
import time

import httpx
import pytest

from server_process import MODEL_NAME, Server

STREAMS = 40


async def stream_until_end(client, url, started):
    body = {"model": MODEL_NAME, "prompt": "go", "max_tokens": 3500, "ignore_eos": True,
            "stream": True}
    events = []
    async with client.stream("POST", url + "/v1/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(line[len("data: "):])
                started.add(id(events))
    return events


async def load_then_signal(server, sig):
    limits = httpx.Limits(max_connections=STREAMS + 1)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        started = set()
        tasks = [asyncio.create_task(stream_until_end(client, server.url, started))
                 for _ in range(STREAMS)]
        while len(started) < STREAMS:
            await asyncio.sleep(0.02)
        server.proc.send_signal(sig)
        return await asyncio.gather(*tasks)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_ends_streams_with_an_error_event_and_exits_zero(sig):
    with Server() as server:
        start = time.monotonic()
        results = asyncio.run(load_then_signal(server, sig))
        for events in results:
            assert events[-1] == "[DONE]"
            error = json.loads(events[-2])["error"]
            assert "shutting down" in error["message"]
            assert error["code"] == 503
            # Every earlier event is an ordinary chunk.
            assert all("choices" in json.loads(e) for e in events[:-2])
        assert server.proc.wait(timeout=20) == 0
        print(f"\n{STREAMS} streams ended and the server exited in "
              f"{time.monotonic() - start:.2f} s")
        with pytest.raises(httpx.ConnectError):
            httpx.get(server.url + "/health")
