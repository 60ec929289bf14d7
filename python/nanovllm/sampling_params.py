"""SamplingParams: nano-vllm's dataclass with this engine's extra fields."""

from __future__ import annotations

from dataclasses import dataclass

from nanovllm import _core

# The engine's defaults (nano-vllm's for the fields it has).
_DEFAULTS = _core.sampling_params_defaults()


@dataclass(slots=True)
class SamplingParams:
    """How one request samples and when it stops.

    temperature: 0 samples greedily. top_k: keep the k most likely tokens (0 or -1: all).
    top_p: nucleus sampling, in (0, 1]. seed: this request's own random stream (the same
    seed gives the same tokens whatever else is in the batch). stop: a string or strings that
    end the output (cut before them). stop_token_ids: ids that end it. logprobs: report the
    sampled token's logprob and this many most likely tokens per position (0 to 20).

    The values are checked by the engine on construction (TypeError or ValueError naming the
    field) and again by generate(), since fields can be changed afterwards.
    """

    temperature: float = _DEFAULTS["temperature"]
    max_tokens: int = _DEFAULTS["max_tokens"]
    ignore_eos: bool = _DEFAULTS["ignore_eos"]
    top_k: int = _DEFAULTS["top_k"]
    top_p: float = _DEFAULTS["top_p"]
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    logprobs: int | None = None

    def __post_init__(self) -> None:
        _core.check_sampling_params(self)
