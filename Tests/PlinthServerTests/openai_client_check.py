"""Drives a running `plinth serve` with the real `openai` Python client.

Run by OpenAIClientTests (Swift), which starts the server and passes its URL and pid:
    python openai_client_check.py BASE_URL PID
Every check raises on failure; the last line printed is a JSON summary.
"""
import asyncio
import json
import sys
import time
import urllib.request

import openai
from openai import AsyncOpenAI, OpenAI

BASE, PID = sys.argv[1], int(sys.argv[2])
SMOL, QWEN = "smollm2", "qwen"
client = OpenAI(base_url=BASE + "/v1", api_key="unused", max_retries=0)

CLAUSE_SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"enum": ["payment", "termination", "liability", "privacy", "other"]},
        "risk": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["category", "risk"],
    "additionalProperties": False,
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def valid_clause(text):
    value = json.loads(text)
    assert set(value) == {"category", "risk"}, value
    assert value["category"] in CLAUSE_SCHEMA["properties"]["category"]["enum"], value
    assert isinstance(value["risk"], int) and 1 <= value["risk"] <= 5, value
    return value


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def check_models():
    ids = [m.id for m in client.models.list().data]
    assert ids == ["SmolLM2-135M-Instruct", "Qwen2.5-Coder-0.5B-Instruct"], ids


def check_chat_and_stream():
    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name three colors."}]
    whole = client.chat.completions.create(model=SMOL, messages=messages, temperature=0, max_tokens=24)
    text = whole.choices[0].message.content
    assert text and whole.choices[0].finish_reason in ("stop", "length"), whole
    assert whole.usage.completion_tokens <= 24 and whole.usage.prompt_tokens > 0, whole.usage
    pieces, finish, usage = [], None, None
    for chunk in client.chat.completions.create(model=SMOL, messages=messages, temperature=0, max_tokens=24, stream=True,
                                                stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            pieces.append(c.delta.content or "")
            finish = c.finish_reason or finish
    assert "".join(pieces) == text, ("".join(pieces), text)
    assert finish == whole.choices[0].finish_reason and usage.completion_tokens == whole.usage.completion_tokens
    # The second identical request found the prompt in the prefix cache.
    assert usage.prompt_tokens_details.cached_tokens > 0, usage


def check_json_schema():
    fmt = {"type": "json_schema", "json_schema": {"name": "clause", "strict": True, "schema": CLAUSE_SCHEMA}}
    r = client.chat.completions.create(model=SMOL, temperature=1.0, seed=7, n=4, response_format=fmt,
                                       messages=[{"role": "user", "content": "Classify: The tenant pays rent monthly."}])
    values = [valid_clause(c.message.content) for c in r.choices]
    again = client.chat.completions.create(model=SMOL, temperature=1.0, seed=7, n=4, response_format=fmt,
                                           messages=[{"role": "user", "content": "Classify: The tenant pays rent monthly."}])
    assert [valid_clause(c.message.content) for c in again.choices] == values, "a seeded request repeats"
    obj = client.chat.completions.create(model=SMOL, temperature=0, response_format={"type": "json_object"}, max_tokens=60,
                                         messages=[{"role": "user", "content": "Give a JSON object about a cat."}])
    assert obj.choices[0].finish_reason == "stop" and isinstance(json.loads(obj.choices[0].message.content), dict)


def check_tools():
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = client.chat.completions.create(model=QWEN, messages=messages, tools=[WEATHER_TOOL], tool_choice="required", temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls, choice
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and "city" in json.loads(call.function.arguments), call
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 degrees Celsius."}]
    answer = client.chat.completions.create(model=QWEN, messages=messages, tools=[WEATHER_TOOL], temperature=0, max_tokens=60)
    assert answer.choices[0].message.content and not answer.choices[0].message.tool_calls, answer
    # Streamed calls arrive as tool_calls deltas.
    calls = []
    for chunk in client.chat.completions.create(model=QWEN, messages=messages[:1], tools=[WEATHER_TOOL], temperature=0, stream=True,
                                                tool_choice={"type": "function", "function": {"name": "get_weather"}}):
        for c in chunk.choices:
            calls += c.delta.tool_calls or []
    assert calls and calls[0].function.name == "get_weather" and json.loads(calls[0].function.arguments)["city"], calls


def check_errors():
    expect = [
        (openai.NotFoundError, dict(model="no-such-model", messages=[{"role": "user", "content": "hi"}])),
        (openai.BadRequestError, dict(model=SMOL, messages=[{"role": "user", "content": "hi"}], temperature=9)),
        (openai.BadRequestError, dict(model=SMOL, messages=[{"role": "user", "content": "hi"}], response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "format": "no-such-format"}}})),
        (openai.BadRequestError, dict(model=SMOL, messages=[{"role": "user", "content": "hi " * 5000}])),
    ]
    for error, kwargs in expect:
        try:
            client.chat.completions.create(**kwargs)
        except error as e:
            assert e.body and e.body.get("message"), e
        else:
            raise AssertionError(f"expected {error.__name__} for {kwargs}")


async def load_test(clients=64, each=3):
    """64 concurrent clients, each sending `each` short requests: no errors, every answer valid."""
    aclient = AsyncOpenAI(base_url=BASE + "/v1", api_key="unused", max_retries=0, timeout=600)
    fmt = {"type": "json_schema", "json_schema": {"name": "clause", "schema": CLAUSE_SCHEMA}}

    async def one(i):
        for j in range(each):
            if (i + j) % 2:
                r = await aclient.chat.completions.create(model=SMOL, temperature=0, max_tokens=16,
                                                          messages=[{"role": "user", "content": f"Say a word about {i}."}])
                assert r.choices[0].message.content is not None and r.usage.completion_tokens <= 16
            else:
                r = await aclient.chat.completions.create(model=SMOL, temperature=0, response_format=fmt,
                                                          messages=[{"role": "user", "content": f"Classify clause {i}: fees are due on day {j}."}])
                valid_clause(r.choices[0].message.content)

    await asyncio.gather(*(one(i) for i in range(clients)))
    await aclient.close()


def wait_until_loaded(seconds=300):
    deadline = time.time() + seconds
    while True:
        try:
            with urllib.request.urlopen(BASE + "/health") as r:
                if r.status == 200:
                    return
        except Exception:
            if time.time() > deadline:
                raise
        time.sleep(0.1)


def main():
    wait_until_loaded()
    started = time.time()
    check_models()
    check_chat_and_stream()
    check_json_schema()
    check_tools()
    check_errors()
    before = rss_kib(PID)
    asyncio.run(load_test())
    middle = rss_kib(PID)
    asyncio.run(load_test())
    after = rss_kib(PID)
    # A second round of the same load must not grow the server (no per-request leak).
    assert after <= middle * 1.10 + 8192, (before, middle, after)
    print(json.dumps({"ok": True, "seconds": round(time.time() - started, 1), "rss_kib": [before, middle, after],
                      "requests": 2 * 64 * 3}))


main()
