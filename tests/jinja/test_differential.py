"""Differential tests: the C++ engine against jinja2 (with transformers' environment) on
generated templates and popular chat templates, and against transformers' apply_chat_template
with the Qwen3 template on generated conversations. Outputs must match byte for byte; where the
reference raises, the engine must raise too."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import chat_templates  # noqa: E402
import conversation_gen  # noqa: E402
import template_gen  # noqa: E402
from driver_client import run_driver  # noqa: E402
from reference_env import render as reference_render  # noqa: E402

DATA_DIR = os.environ.get("NANOVLLM_TEST_DATA_DIR",
                          os.path.join(os.path.dirname(__file__), "..", "data"))
QWEN3_DIR = os.path.join(DATA_DIR, "qwen3-tokenizer")


def compare(label, expected, actual, failures):
    kind, text = expected
    if kind == "output" and actual == expected:
        return
    if kind == "error" and actual[0] == "error":
        return
    failures.append(f"{label}\n  reference: {kind}: {text!r}\n  engine:    {actual[0]}: {actual[1]!r}")


def report(failures, total):
    assert not failures, f"{len(failures)} of {total} differ:\n" + "\n".join(failures[:15])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_templates_match_jinja2(seed):
    cases = template_gen.generate(seed, 150)
    replies = run_driver([{"template": t, "context": c} for t, c in cases])
    failures = []
    rendered = 0
    for (t, c), actual in zip(cases, replies):
        expected = reference_render(t, c)
        rendered += expected[0] == "output"
        compare(f"template {t!r}\n  context {json.dumps(c, ensure_ascii=False)}", expected, actual,
                failures)
    report(failures, len(cases))
    # The generator is meant to exercise rendering, not only error paths.
    assert rendered > 0.8 * len(cases), f"only {rendered} of {len(cases)} templates rendered"


@pytest.mark.parametrize("name", sorted(chat_templates.TEMPLATES))
def test_popular_chat_templates_match_jinja2(name):
    template = chat_templates.TEMPLATES[name]
    cases = conversation_gen.generate_for_template(name, seed=7, count=120)
    requests = [{"chat_template": template, "messages": m, "add_generation_prompt": g, "kwargs": k}
                for m, g, k in cases]
    replies = run_driver(requests)
    failures = []
    errors = 0
    for (messages, gen_prompt, kwargs), actual in zip(cases, replies):
        context = dict(kwargs, messages=messages, add_generation_prompt=gen_prompt)
        context.setdefault("tools", None)
        context.setdefault("documents", None)
        expected = reference_render(template, context)
        errors += expected[0] == "error"
        compare(f"{name} messages {json.dumps(messages, ensure_ascii=False)} "
                f"add_generation_prompt={gen_prompt} kwargs={kwargs}", expected, actual, failures)
    report(failures, len(cases))
    assert errors < len(cases) / 2


def test_qwen3_template_matches_transformers_apply_chat_template():
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(QWEN3_DIR)
    with open(os.path.join(QWEN3_DIR, "tokenizer_config.json"), encoding="utf-8") as f:
        template = json.load(f)["chat_template"]
    cases = conversation_gen.generate_qwen3(seed=11, count=200)
    requests = []
    for messages, tools, gen_prompt, kwargs in cases:
        template_kwargs = dict(tokenizer.special_tokens_map, **kwargs)
        if tools is not None:
            template_kwargs["tools"] = tools
        requests.append({"chat_template": template, "messages": messages,
                         "add_generation_prompt": gen_prompt, "kwargs": template_kwargs})
    replies = run_driver(requests)
    failures = []
    for (messages, tools, gen_prompt, kwargs), actual in zip(cases, replies):
        try:
            expected = ("output", tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=gen_prompt, **kwargs))
        except Exception as e:  # the template itself may raise on odd inputs; then so must we
            expected = ("error", f"{type(e).__name__}: {e}")
        compare(f"messages {json.dumps(messages, ensure_ascii=False)} tools={tools is not None} "
                f"add_generation_prompt={gen_prompt} kwargs={kwargs}", expected, actual, failures)
    report(failures, len(cases))


def test_qwen3_reference_cases():
    with open(os.path.join(QWEN3_DIR, "reference_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)["chat_template"]
    with open(os.path.join(QWEN3_DIR, "tokenizer_config.json"), encoding="utf-8") as f:
        template = json.load(f)["chat_template"]
    replies = run_driver([{"chat_template": template, "messages": c["messages"],
                           "add_generation_prompt": True,
                           "kwargs": {"enable_thinking": c["enable_thinking"]}} for c in cases])
    for c, reply in zip(cases, replies):
        assert reply == ("output", c["text"])
