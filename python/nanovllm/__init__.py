"""nano-vllm's offline API (LLM, SamplingParams) over this repository's C++ engine."""

from nanovllm._core import LLM, Tokenizer
from nanovllm.sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams", "Tokenizer"]
