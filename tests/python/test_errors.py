"""Bad arguments raise TypeError or ValueError naming the argument (and the request's index)
before any work starts; the LLM stays usable after every exception."""
import os

import pytest
from conftest import TIED, UNTIED
from nanovllm import LLM, SamplingParams, Tokenizer


@pytest.mark.parametrize("kwargs, error, needle", [
    ({"temperature": -1.0}, ValueError, "temperature must be a finite number >= 0"),
    ({"temperature": float("nan")}, ValueError, "temperature"),
    ({"temperature": "hot"}, TypeError, "SamplingParams.temperature must be a float, got str"),
    ({"max_tokens": 0}, ValueError, "max_tokens must be at least 1"),
    ({"max_tokens": 2.5}, TypeError, "SamplingParams.max_tokens must be an int, got float"),
    ({"max_tokens": 2**40}, ValueError, "SamplingParams.max_tokens is out of range"),
    ({"ignore_eos": 1}, TypeError, "SamplingParams.ignore_eos must be a bool, got int"),
    ({"top_k": -2}, ValueError, "top_k must be -1 or 0"),
    ({"top_p": 0.0}, ValueError, "top_p must be in (0, 1]"),
    ({"seed": -1}, ValueError, "SamplingParams.seed must be in [0, 2**64)"),
    ({"stop": [""]}, ValueError, "stop strings must not be empty"),
    ({"stop": [1]}, TypeError, "SamplingParams.stop[0] must be a str, got int"),
    ({"stop": 5}, TypeError, "SamplingParams.stop must be a str or a list of str"),
    ({"stop_token_ids": [-3]}, ValueError, "stop_token_ids must be token ids >= 0"),
    ({"stop_token_ids": "1"}, TypeError, "SamplingParams.stop_token_ids must be a list of ints"),
    ({"logprobs": 21}, ValueError, "logprobs must be in [0, 20]"),
    ({"unknown": 1}, TypeError, "unexpected keyword argument 'unknown'"),
])
def test_bad_sampling_params_fail_on_construction(kwargs, error, needle):
    with pytest.raises(error) as info:
        SamplingParams(**kwargs)
    assert needle in str(info.value)


def test_sampling_params_keep_nano_vllms_defaults_and_positions():
    params = SamplingParams()
    assert (params.temperature, params.max_tokens, params.ignore_eos) == (1.0, 64, False)
    assert SamplingParams(0.6, 256, True) == SamplingParams(temperature=0.6, max_tokens=256,
                                                             ignore_eos=True)
    assert SamplingParams(stop="x").stop == "x"  # one string is one stop string


@pytest.mark.parametrize("kwargs, error, needle", [
    ({"bogus": 1}, TypeError, "LLM() got an unexpected keyword argument 'bogus'"),
    ({"max_num_seqs": "8"}, TypeError, "max_num_seqs must be an int, got str"),
    ({"enforce_eager": "yes"}, TypeError, "enforce_eager must be a bool, got str"),
    ({"gpu_memory_utilization": None}, TypeError, "gpu_memory_utilization must be a float"),
    ({"device": 0}, TypeError, "device must be a str, got int"),
    ({"max_num_seqs": 0}, ValueError, "max_num_seqs must be at least 1"),
    ({"gpu_memory_utilization": 1.5}, ValueError, "gpu_memory_utilization must be in (0, 1]"),
    ({"tensor_parallel_size": 9}, ValueError, "tensor_parallel_size must be in [1, 8]"),
    ({"device": "tpu"}, ValueError, "device must be 'cpu', 'cuda' or 'auto'"),
    ({"dtype": "int8"}, ValueError, "dtype must be"),
    ({"load_format": "gguf"}, ValueError, "load_format must be"),
    ({"seed": -5}, ValueError, "seed must be in [0, 2**64)"),
    ({"device": "cpu", "dtype": "bfloat16"}, ValueError, "computes in float32 only"),
])
def test_bad_engine_keywords(kwargs, error, needle):
    with pytest.raises(error) as info:
        LLM(TIED, **kwargs)
    assert needle in str(info.value)


def test_bad_model_directory_raises_with_the_reason(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LLM(str(tmp_path / "missing"))
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        LLM(tmp_path / "file")  # os.PathLike is accepted
    with pytest.raises(ValueError, match="cannot load the model .*config.json"):
        LLM(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json"):
        LLM(tmp_path)
    with pytest.raises(TypeError, match="model must be a str or os.PathLike, got int"):
        LLM(3)
    with pytest.raises(ValueError, match="cannot load a tokenizer"):
        Tokenizer.from_pretrained(tmp_path)


@pytest.mark.parametrize("prompts, params, error, needle", [
    ("hello", None, TypeError, "prompts must be a list of str or of token-id lists, got str"),
    ([b"hi"], None, TypeError, "prompts[0] must be a str or a list of int token ids, got bytes"),
    ([[1, 2], [3, "4"]], None, TypeError, "prompts[1][1] must be an int, got str"),
    ([[1, 2], [3, True]], None, TypeError, "prompts[1][1] must be an int, got bool"),
    ([[1], [2**40]], None, ValueError, "prompts[1][0] is out of range"),
    (["ok", ""], None, ValueError, "prompts[1]: the prompt is empty"),
    ([[1], []], None, ValueError, "prompts[1]: the prompt is empty"),
    ([[1], [1, 200000]], None, ValueError,
     "prompts[1]: prompt token 200000 at position 1 is outside the vocabulary"),
    ([[1], [-1]], None, ValueError, "prompts[1]: prompt token -1 at position 0 is outside"),
    ([[1], [1] * 5000], None, ValueError, "prompts[1]: the prompt has 5000 tokens"),
    ([[1]], "greedy", TypeError, "sampling_params must be a SamplingParams or a list of them"),
    ([[1], [2]], [None, None], TypeError, "sampling_params[0] must be a SamplingParams"),
    ([[1], [2]], [SamplingParams()], ValueError, "sampling_params has 1 entries for 2 prompts"),
])
def test_bad_generate_arguments_name_the_request(tied_llm, prompts, params, error, needle):
    tied_llm.generate([[1, 2]], SamplingParams(max_tokens=2), use_tqdm=False)
    stats = tied_llm.last_generate_stats()
    with pytest.raises(error) as info:
        tied_llm.generate(prompts, params, use_tqdm=False)
    assert needle in str(info.value)
    assert tied_llm.last_generate_stats() == stats  # nothing ran
    # ...and the next call works.
    [output] = tied_llm.generate([[1, 2]], SamplingParams(max_tokens=2), use_tqdm=False)
    assert len(output["token_ids"]) <= 2


def test_sampling_params_changed_after_construction_are_checked_again(tied_llm):
    params = [SamplingParams(), SamplingParams()]
    params[1].top_p = 2.0
    with pytest.raises(ValueError, match=r"sampling_params\[1\]: invalid sampling params: top_p"):
        tied_llm.generate([[1], [2]], params, use_tqdm=False)
    params[1].max_tokens = "many"
    with pytest.raises(TypeError, match=r"sampling_params\[1\].max_tokens must be an int"):
        tied_llm.generate([[1], [2]], params, use_tqdm=False)


def test_requests_the_model_cannot_run(untied_llm):
    with pytest.raises(ValueError, match=r"prompts\[0\]: text prompts need tokenizer.json"):
        untied_llm.generate(["hello"], use_tqdm=False)
    with pytest.raises(ValueError, match=r"prompts\[1\]: stop strings need a text decoder"):
        untied_llm.generate([[1], [2]], [SamplingParams(), SamplingParams(stop="x")],
                            use_tqdm=False)
    with pytest.raises(ValueError, match=r"messages\[0\]: chat messages need a tokenizer"):
        untied_llm.chat([{"role": "user", "content": "hi"}], use_tqdm=False)
    assert untied_llm.tokenizer is None and untied_llm.get_tokenizer() is None


@pytest.mark.parametrize("messages, kwargs, error, needle", [
    ("hi", None, TypeError, "messages must be a list of message dicts"),
    ([], None, ValueError, "messages is empty"),
    ([[{"role": "user", "content": "hi"}], "x"], None, TypeError,
     "messages[1] must be a list of message dicts"),
    ([{"role": "user", "content": object()}], None, TypeError, "messages[0]['content'] must be"),
    ([{"role": "user", "content": "hi"}], [1], TypeError, "chat_template_kwargs must be a dict"),
    ([[{"role": "user", "content": "hi"}], [{"content": "no role"}]], None, ValueError,
     "messages[1]:"),
])
def test_bad_chat_arguments(tied_llm, messages, kwargs, error, needle):
    with pytest.raises(error) as info:
        tied_llm.chat(messages, use_tqdm=False, chat_template_kwargs=kwargs)
    assert needle in str(info.value)


def nested_list(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


def self_holding_dict():
    value = {}
    value["again"] = value
    return value


@pytest.mark.parametrize("kwargs", [{"deep": nested_list(100_000)}, self_holding_dict()])
def test_nesting_past_the_limit_is_a_value_error_not_a_crash(tied_llm, kwargs):
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match="nested deeper than 128 levels"):
        tied_llm.chat(messages, use_tqdm=False, chat_template_kwargs=kwargs)
    with pytest.raises(ValueError, match="nested deeper than 128 levels"):
        tied_llm.tokenizer.apply_chat_template(messages, **kwargs)
    assert tied_llm.chat(messages, SamplingParams(max_tokens=2), use_tqdm=False)[0]["token_ids"]


def test_tokenizer_argument_errors(tied_llm):
    tokenizer = tied_llm.tokenizer
    with pytest.raises(TypeError, match="text must be a str, got int"):
        tokenizer.encode(5)
    # An id no token has adds no text, as in Hugging Face's decode (not an error).
    assert tokenizer.decode([10**6]) == ""
    with pytest.raises(TypeError, match=r"token_ids\[0\] must be an int"):
        tokenizer.decode(["a"])
    with pytest.raises(ValueError, match="apply_chat_template:"):
        tokenizer.apply_chat_template([{"content": "no role"}])
