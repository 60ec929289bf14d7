"""generate() runs without the GIL, stops promptly on Ctrl-C (or any signal handler that
raises) with the handler's exception, and leaves the LLM as good as new."""
import os
import signal
import threading
import time

import pytest
from conftest import TIED
from nanovllm import LLM, SamplingParams

# Long enough that it is still running when the signal comes (seconds on this model).
LONG = ([[7, 8, 9, 10 + i] for i in range(8)],
        SamplingParams(temperature=0.7, max_tokens=3000, ignore_eos=True, seed=1))
SHORT = (["Hello, my name is", [3, 4, 5]], SamplingParams(temperature=0.9, max_tokens=24, seed=5))


def send_later(signum, delay):
    timer = threading.Timer(delay, os.kill, (os.getpid(), signum))
    timer.start()
    return timer


def test_ctrl_c_raises_keyboard_interrupt_promptly_and_the_llm_stays_usable():
    llm = LLM(TIED, num_kvcache_blocks=16, kvcache_block_size=16)
    expected = LLM(TIED, num_kvcache_blocks=16, kvcache_block_size=16).generate(
        *SHORT, use_tqdm=False)
    send_later(signal.SIGINT, 1.0)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        llm.generate(*LONG, use_tqdm=False)
    elapsed = time.monotonic() - start
    assert elapsed < 5.0, elapsed  # the long run would take far longer
    # Every KV block came back: the same requests give what a fresh LLM gives.
    assert llm.generate(*SHORT, use_tqdm=False) == expected
    # And one sequence can still take the whole cache (16 blocks of 16 tokens).
    outputs = llm.generate([[1, 2, 3]], SamplingParams(max_tokens=253, ignore_eos=True),
                           use_tqdm=False)
    assert len(outputs[0]["token_ids"]) == 253


def test_a_signal_handler_that_raises_stops_generate_with_its_exception(tied_llm):
    class Deadline(Exception):
        pass

    def on_alarm(signum, frame):
        raise Deadline("too slow")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(Deadline, match="too slow"):
            tied_llm.generate(*LONG, use_tqdm=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert len(tied_llm.generate(*SHORT, use_tqdm=False)) == 2


def test_a_signal_whose_handler_returns_does_not_stop_generate(tied_llm):
    seen = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
    try:
        send_later(signal.SIGUSR1, 0.1)
        outputs = tied_llm.generate([[1, 2]], SamplingParams(max_tokens=200, ignore_eos=True),
                                    use_tqdm=False)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert seen == [signal.SIGUSR1]
    assert len(outputs[0]["token_ids"]) == 200


def test_the_gil_is_released_while_generating(tied_llm):
    ticks = []
    running = threading.Event()
    done = threading.Event()

    def count():
        running.set()
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    thread = threading.Thread(target=count)
    thread.start()
    running.wait()
    before = len(ticks)
    tied_llm.generate([[1, 2]], SamplingParams(max_tokens=300, ignore_eos=True), use_tqdm=False)
    during = len(ticks) - before
    done.set()
    thread.join()
    # With the GIL held the counter could not move during the call; it ticks every millisecond
    # or so without it (less on a busy machine) over a call of a second or more.
    assert during >= 10, (during, tied_llm.last_generate_stats()["seconds"])


def test_concurrent_generates_on_one_llm_run_one_after_the_other(tied_llm):
    expected = tied_llm.generate(*SHORT, use_tqdm=False)
    results = [None] * 4

    def worker(i):
        results[i] = tied_llm.generate(*SHORT, use_tqdm=False)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4
