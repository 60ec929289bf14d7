"""Random conversations for the chat-template differential tests."""

import json
import random

TEXTS = [
    "Hello!", "What's the weather in Paris?", "  leading and trailing spaces  ",
    "multi\nline\n\ncontent\n", "\nstarts with a newline", "ünïcödé ✓ — “quotes”",
    "日本語で答えてください。", "emoji 😀🎉 and ZWJ 👩‍💻", "<b>markup</b> & {{ braces }} {% tags %}",
    "tabs\tand\\backslashes", "", "x", "Ελληνικά και русский", "math: 2 < 3 > 1",
    "line sep\u2028para sep\u2029nbsp\u00a0",
]
REASONING = ["", "Let me think.", "step 1\nstep 2\n", "\nthinking with newlines\n", "考虑一下 🤔"]
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather — in °C",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                        "days": {"type": "integer"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web 🔎",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}},
]


def _text(r):
    return r.choice(TEXTS)


def _tool_call(r):
    args = r.choice([{"city": "Paris"}, {"city": "東京", "days": 3}, {}, {"query": "a \"quoted\" q"},
                     {"nested": {"list": [1, 2.5, None, True]}}])
    if r.random() < 0.3:
        args = json.dumps(args, ensure_ascii=False)  # arguments given as a JSON string
    call = {"name": r.choice(["get_weather", "search"]), "arguments": args}
    if r.random() < 0.8:
        return {"type": "function", "function": call}
    return call  # some clients send the function fields directly


def _assistant(r, allow_tools=True):
    msg = {"role": "assistant"}
    style = r.random()
    if style < 0.3:
        msg["content"] = _text(r)
    elif style < 0.5:
        msg["content"] = f"<think>{r.choice(REASONING)}</think>\n\n{_text(r)}"
    elif style < 0.7:
        msg["content"] = _text(r)
        msg[r.choice(["reasoning_content", "reasoning_content", "thinking", "reasoning"])] = \
            r.choice(REASONING)
    elif style < 0.78:
        msg["content"] = _text(r)
        msg["reasoning_content"] = None
    else:
        msg["content"] = _text(r)
    if allow_tools and r.random() < 0.25:
        msg["tool_calls"] = [_tool_call(r) for _ in range(r.randint(1, 2))]
        if r.random() < 0.3:
            msg["content"] = ""
        elif r.random() < 0.1:
            msg["content"] = None  # OpenAI-style; the Qwen3 template fails on it, so must we
    return msg


def _user(r):
    if r.random() < 0.1:
        return {"role": "user", "content": "<tool_response>\n" + _text(r) + "\n</tool_response>"}
    return {"role": "user", "content": _text(r)}


def generate_qwen3(seed, count):
    """(messages, tools, add_generation_prompt, kwargs) tuples for the Qwen3 template."""
    r = random.Random(seed)
    cases = []
    for _ in range(count):
        messages = []
        if r.random() < 0.4:
            messages.append({"role": "system", "content": _text(r)})
        for _turn in range(r.randint(1, 4)):
            messages.append(_user(r))
            if r.random() < 0.85:
                assistant = _assistant(r)
                messages.append(assistant)
                if "tool_calls" in assistant:
                    for _ in range(r.randint(1, len(assistant["tool_calls"]) + 1)):
                        messages.append({"role": "tool", "content": _text(r)})
                    if r.random() < 0.7:
                        messages.append(_assistant(r, allow_tools=False))
        if r.random() < 0.05:
            messages.append({"role": "system", "content": "late system " + _text(r)})
        tools = r.sample(TOOLS, r.randint(1, 2)) if r.random() < 0.3 else None
        kwargs = {}
        choice = r.random()
        if choice < 0.4:
            kwargs["enable_thinking"] = False
        elif choice < 0.7:
            kwargs["enable_thinking"] = True
        cases.append((messages, tools, r.random() < 0.6, kwargs))
    return cases


def generate_for_template(name, seed, count):
    """(messages, add_generation_prompt, kwargs) tuples; some break the role rules on purpose."""
    r = random.Random(f"{name}-{seed}")
    cases = []
    for _ in range(count):
        messages = []
        if r.random() < 0.3:
            messages.append({"role": "system", "content": _text(r)})
        for i in range(r.randint(1, 5)):
            role = "user" if i % 2 == 0 else "assistant"
            if r.random() < 0.08:
                role = r.choice(["user", "assistant", "tool"])  # may break alternation
            if role == "assistant":
                msg = {"role": role, "content": r.choice([_text(r), "<think>hm</think>" + _text(r)])}
                if name == "llama3" and r.random() < 0.2:
                    msg["tool_calls"] = [_tool_call(r)]
                    if isinstance(msg["tool_calls"][0].get("arguments"), str):
                        msg["tool_calls"] = [{"function": {"name": "search", "arguments": {"q": 1}}}]
                    elif "function" not in msg["tool_calls"][0]:
                        msg["tool_calls"] = [{"function": msg["tool_calls"][0]}]
                messages.append(msg)
            else:
                messages.append({"role": role, "content": _text(r)})
        kwargs = {"bos_token": "<s>", "eos_token": "</s>"}
        if name == "llama3":
            if r.random() < 0.3:
                kwargs["tools"] = r.sample(TOOLS, r.randint(1, 2))
                kwargs["tools_in_user_message"] = r.random() < 0.5
            if r.random() < 0.5:
                kwargs["date_string"] = "01 Jan 2025"
        cases.append((messages, r.random() < 0.5, kwargs))
    return cases
