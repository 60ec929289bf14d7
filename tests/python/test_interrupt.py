"""generate() runs without the GIL, stops promptly on Ctrl-C (or any signal handler that
raises) with the handler's exception, and leaves the LLM as good as new."""
import os
import signal
import threading

import pytest
from conftest import TIED
from nanovllm import LLM, SamplingParams

# One request that finishes at its first token, and others that run on for thousands of steps:
# the first output arrives while generate() has far more to do.
FIRST_DONE = SamplingParams(max_tokens=1, ignore_eos=True)
LONG_RUNNING = SamplingParams(temperature=0.7, max_tokens=3000, ignore_eos=True, seed=1)
LONG = ([[5, 6]] + [[7, 8, 9, 10 + i] for i in range(7)], [FIRST_DONE] + [LONG_RUNNING] * 7)
SHORT = (["Hello, my name is", [3, 4, 5]], SamplingParams(temperature=0.9, max_tokens=24, seed=5))


class SignalOnFirstOutput:
    """A tqdm-like progress bar (generate's use_tqdm takes a callable that makes one, as vLLM's
    does) that sends `signum` to this process, from another thread, when the first request
    finishes: the signal comes while generate() runs, whatever the machine's speed."""

    def __init__(self, signum):
        self.signum = signum
        self.sender = None
        self.updates = 0
        self.closed = False

    def __call__(self, total, desc):
        assert total >= 1 and desc
        return self

    def update(self, n):
        self.updates += n
        if self.sender is None:
            self.sender = threading.Thread(target=os.kill, args=(os.getpid(), self.signum))
            self.sender.start()

    def close(self):
        self.closed = True

    def join(self):
        if self.sender is not None:
            self.sender.join()


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raising KeyboardInterrupt, as in an interactive Python: a process started in the
    background by a non-interactive shell inherits SIGINT ignored, and Python then keeps it so."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_raises_keyboard_interrupt_promptly_and_the_llm_stays_usable(ctrl_c_raises):
    llm = LLM(TIED, num_kvcache_blocks=16, kvcache_block_size=16)
    expected = LLM(TIED, num_kvcache_blocks=16, kvcache_block_size=16).generate(
        *SHORT, use_tqdm=False)
    bar = SignalOnFirstOutput(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        llm.generate(*LONG, use_tqdm=bar)
    bar.join()
    # Stopped after the first request, long before the others' 3,000 tokens: within a step of the
    # signal, and with the bar closed.
    assert bar.updates == 1 and bar.closed
    assert llm.last_generate_stats()["decode_tokens"] < 7 * 3000
    # Every KV block came back: the same requests give what a fresh LLM gives.
    assert llm.generate(*SHORT, use_tqdm=False) == expected
    # And one sequence can still take the whole cache (16 blocks of 16 tokens).
    outputs = llm.generate([[1, 2, 3]], SamplingParams(max_tokens=253, ignore_eos=True),
                           use_tqdm=False)
    assert len(outputs[0]["token_ids"]) == 253


def test_an_exception_from_the_progress_bar_stops_generate_with_it(tied_llm):
    class Deadline(Exception):
        pass

    class RaisingBar(SignalOnFirstOutput):
        def update(self, n):
            raise Deadline("too slow")

    bar = RaisingBar(None)
    with pytest.raises(Deadline, match="too slow"):
        tied_llm.generate(*LONG, use_tqdm=bar)
    assert bar.closed
    assert len(tied_llm.generate(*SHORT, use_tqdm=False)) == 2
    with pytest.raises(TypeError, match="use_tqdm must be a bool or a callable"):
        tied_llm.generate(*SHORT, use_tqdm="yes")


def test_a_signal_handler_that_raises_stops_generate_with_its_exception(tied_llm):
    class Deadline(Exception):
        pass

    def on_alarm(signum, frame):
        raise Deadline("too slow")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    bar = SignalOnFirstOutput(signal.SIGALRM)
    try:
        with pytest.raises(Deadline, match="too slow"):
            tied_llm.generate(*LONG, use_tqdm=bar)
        bar.join()
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert len(tied_llm.generate(*SHORT, use_tqdm=False)) == 2


def test_a_signal_whose_handler_returns_does_not_stop_generate(tied_llm):
    seen = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.set())
    bar = SignalOnFirstOutput(signal.SIGUSR1)
    try:
        outputs = tied_llm.generate([[1, 2], [3, 4]],
                                    [FIRST_DONE, SamplingParams(max_tokens=200, ignore_eos=True)],
                                    use_tqdm=bar)
        bar.join()
        # The handler runs in the main thread: by the time the sender is joined it has run, during
        # generate() or at the latest here.
        assert seen.wait(timeout=60)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert bar.updates == 2 and bar.closed
    assert len(outputs[1]["token_ids"]) == 200


def test_the_gil_is_released_while_generating(tied_llm):
    # Another thread, woken when the first request finishes, must get to run before the second
    # one finishes: with the GIL held between the two, it could not.
    first_done = threading.Event()
    ran = threading.Event()
    seen_at_the_end = []

    class Bar(SignalOnFirstOutput):
        def update(self, n):
            self.updates += n
            if self.updates == 1:
                first_done.set()
            else:
                seen_at_the_end.append(ran.is_set())

    thread = threading.Thread(target=lambda: (first_done.wait(), ran.set()))
    thread.start()
    bar = Bar(None)
    tied_llm.generate([[1, 2], [3, 4]],
                      [FIRST_DONE, SamplingParams(max_tokens=300, ignore_eos=True)], use_tqdm=bar)
    thread.join()
    assert seen_at_the_end == [True]


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
