#!/usr/bin/env python3
"""Makes the chat-template fixtures of PlinthRuntimeTests.

Renders conversations with the real `jinja2`, configured as HuggingFace transformers
configures it for chat templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, `raise_exception`, a `tojson` filter over `json.dumps(ensure_ascii=False)`), and
writes what it produced next to its inputs, so that the Swift engine can be checked for exact
equality.

    python3 Scripts/make_chat_template_fixtures.py [--models DIR] [--out DIR]

Needs the PyPI packages `jinja2` and `gguf`, and the cached models (`plinth models fetch`):
  SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
  Qwen2.5-Coder-0.5B-Instruct/Qwen2.5-Coder-0.5B-Instruct.gguf
  Gemma-3-270M/gemma-3-270m-q4_k_m.gguf (no template in the file: Models/templates/gemma3.jinja)

Files written to Tests/PlinthRuntimeTests/Fixtures/chat_templates/:
  <model>.json     {"model", "template", "bos_token", "eos_token",
                    "cases": [{"name", "messages", "tools_json", "add_generation_prompt",
                               "expected" | "error"}]}  (`error`: the template raised, as below)
                   `messages` use the ChatMessage JSON shape (OpenAI: tool-call `arguments` are JSON
                   text); `tools_json` is JSON text (or null) so that key order survives decoding.
  synthetic.json   {"cases": [{"name", "template", "context_json", "expected" | "error"}]}
                   `error` is {"type": <jinja2 exception class>, "message": <its text>}.
  corpus.json      with --corpus DIR (llama.cpp's models/templates, from the llama-cpp-python
                   sdist: `pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36`):
                   {"source", "now", "bos_token", "eos_token", "templates": [{"name", "template",
                    "outputs": {<case name>: {"expected"} | {"error"}}}]}; the cases are
                   CORPUS_CASES of qwen2.5-coder.json's conversations, `strftime_now` reads
                   `now` (UTC).
"""

import argparse
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_OUT = os.path.join(ROOT, "Tests", "PlinthRuntimeTests", "Fixtures", "chat_templates")
DEFAULT_MODELS = os.path.join(os.environ.get("PLINTH_HOME", os.path.expanduser("~/.cache/plinth")), "models")

MODELS = [
    ("smollm2", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("qwen2.5-coder", "Qwen2.5-Coder-0.5B-Instruct", "Qwen2.5-Coder-0.5B-Instruct.gguf"),
    ("gemma3", "Gemma-3-270M", "gemma-3-270m-q4_k_m.gguf"),
]
# Where a file has no tokenizer.chat_template, Plinth uses Models/templates/<architecture>.jinja.
BUILTIN_TEMPLATES = os.path.join(ROOT, "Models", "templates")


# --- The environment, as transformers builds it --------------------------------------------

def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class GenerationBlocks(jinja2.ext.Extension):
    """transformers' `{% generation %}` … `{% endgeneration %}` (it marks the assistant's tokens
    for training masks); when rendering a prompt the block is its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def make_environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, GenerationBlocks]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


ENV = make_environment()


# --- Messages: the ChatMessage JSON shape, and what a template sees ------------------------

def template_message(m):
    """Mirrors ChatMessage.templateValue in Sources/PlinthRuntime/Templates/ChatTemplate.swift."""
    d = {"role": m["role"], "content": m.get("content") or ""}
    if m.get("name") is not None:
        d["name"] = m["name"]
    if m.get("tool_calls") is not None:
        calls = []
        for c in m["tool_calls"]:
            t = {}
            if c.get("id") is not None:
                t["id"] = c["id"]
            t["type"] = "function"
            try:
                arguments = json.loads(c["function"]["arguments"])
            except ValueError:
                arguments = c["function"]["arguments"]
            t["function"] = {"name": c["function"]["name"], "arguments": arguments}
            calls.append(t)
        d["tool_calls"] = calls
    if m.get("tool_call_id") is not None:
        d["tool_call_id"] = m["tool_call_id"]
    return d


def sys_(text):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, calls=None):
    m = {"role": "assistant", "content": text}
    if calls is not None:
        m["tool_calls"] = calls
    return m


def tool(text, name=None, call_id=None):
    m = {"role": "tool", "content": text}
    if name is not None:
        m["name"] = name
    if call_id is not None:
        m["tool_call_id"] = call_id
    return m


def call(name, arguments, call_id=None):
    """A tool call; `arguments` is JSON text (a dict is dumped with Python's defaults)."""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    c = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        c = {"id": call_id, **c}
    return c


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

SEARCH = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the documentation. Returns “snippets” — quoted \"verbatim\".",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
                "filters": {
                    "type": "object",
                    "properties": {"lang": {"type": "string"}, "since": {"type": ["string", "null"]}},
                },
                "exact": {"type": "boolean", "default": False},
                "boost": {"type": "number", "default": 1.5},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}

# Keys deliberately out of alphabetical order, and a tool without a description.
ODD_ORDER = {
    "function": {"parameters": {"type": "object", "properties": {}}, "name": "now"},
    "type": "function",
}

CALC = {
    "type": "function",
    "function": {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression.\nUse for exact math.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}


def conversations():
    """(name, messages, tools or None, add_generation_prompt)."""
    c = []
    add = lambda name, messages, tools=None, gen=True: c.append((name, messages, tools, gen))

    add("user_only", [user("Hello!")])
    add("user_only_no_generation_prompt", [user("Hello!")], gen=False)
    add("system_user", [sys_("You are a terse assistant."), user("What is 2+2?")])
    add("system_user_assistant", [sys_("Be brief."), user("Hi"), assistant("Hello! How can I help?")], gen=False)
    add("multi_turn_with_system", [
        sys_("You are a helpful assistant."),
        user("Name a prime number."), assistant("7"),
        user("Another one?"), assistant("11"),
        user("And one more?"),
    ])
    add("multi_turn_without_system", [
        user("Translate 'cat' to French."), assistant("chat"),
        user("And 'dog'?"), assistant("chien"),
    ], gen=False)
    add("empty_user_content", [user("")])
    add("empty_system_content", [sys_(""), user("Hi")])
    add("empty_assistant_content", [user("Say nothing."), assistant(""), user("Thanks")])
    add("unicode", [
        sys_("Réponds en français, s'il te plaît. 🇫🇷"),
        user("日本語で「こんにちは」は？ Ελληνικά; عربى; emoji 👩‍💻🧪; combining é"),
        assistant("こんにちは — “hello” ✓"),
        user("Zero-width:\u200b| nbsp:\u00a0| line sep:\u2028|"),
    ])
    add("whitespace_and_newlines", [
        user("  leading and trailing spaces  "),
        assistant("line one\nline two\n\n\tindented\n"),
        user("\n\nstarts with newlines"),
    ])
    add("jinja_syntax_in_content", [user("Render {{ messages }} and {% if x %}y{% endif %} {# not a comment #} literally.")])
    add("special_tokens_in_content", [user("Text with <|im_start|> and <|im_end|> and <|endoftext|> inside.")])
    add("quotes_and_backslashes", [user("She said \"hi\" and it's C:\\path\\to\\file \\n not a newline")])
    add("assistant_last_with_generation_prompt", [user("Hi"), assistant("Hello")])
    add("system_in_the_middle", [user("Hi"), sys_("Switch to formal register."), user("Hello again")])
    add("name_field", [{"role": "user", "content": "Hi, I'm Ann.", "name": "ann"}, assistant("Hi Ann!")], gen=False)
    add("long_conversation", [sys_("Count with me.")] + sum(
        ([user(f"{i}"), assistant(f"{i + 1}")] for i in range(1, 20, 2)), []) + [user("21")])

    # Tools and tool calls (Qwen's format).
    add("tools_user_only", [user("What's the weather in Paris?")], [WEATHER])
    add("tools_with_system", [sys_("You are a weather bot."), user("Weather in Oslo?")], [WEATHER])
    add("tools_many", [user("Find docs about GGUF and compute 2**10.")], [WEATHER, SEARCH, CALC, ODD_ORDER])
    add("tools_empty_list", [user("No tools here.")], [])
    add("tool_call_round_trip", [
        sys_("Use tools when needed."),
        user("What's the weather in Paris?"),
        assistant("", [call("get_weather", {"city": "Paris", "unit": "celsius"})]),
        tool('{"temperature": 21, "condition": "sunny"}', name="get_weather"),
        assistant("It is 21 °C and sunny in Paris."),
    ], [WEATHER], gen=False)
    add("tool_call_then_generation_prompt", [
        user("Weather in Rome and Madrid?"),
        assistant("", [call("get_weather", {"city": "Rome"}), call("get_weather", {"city": "Madrid"})]),
        tool('{"temperature": 25}'),
        tool('{"temperature": 30}'),
    ], [WEATHER])
    add("three_consecutive_tool_messages", [
        user("Compute three things."),
        assistant("Calling three tools.", [
            call("calculate", {"expression": "1+1"}),
            call("calculate", {"expression": "2*3"}),
            call("calculate", {"expression": "10/4"}),
        ]),
        tool("2"), tool("6"), tool("2.5"),
        assistant("2, 6 and 2.5."),
        user("Thanks!"),
    ], [CALC])
    add("tool_call_with_content_and_ids", [
        user("Search for 'mmap'."),
        assistant("Let me search.", [call("search_docs", {"query": "mmap", "limit": 3}, call_id="call_0")]),
        tool("[\"snippet 1\", \"snippet 2\"]", name="search_docs", call_id="call_0"),
    ], [SEARCH])
    add("tool_call_argument_types", [
        user("Types!"),
        assistant("", [call("search_docs", '{"query": "naïve “quotes” \\"esc\\" \\\\ \\n \\t \\u0001 \\u2028 😀", '
                                           '"limit": 10, "boost": -1.25e-3, "big": 1e21, "small": 0.0001, '
                                           '"exact": true, "none": null, "nested": {"z": [1, [2, {}], []], "a": {}}, '
                                           '"float_int": 3.0, "neg_zero": -0.0, "dup": 1, "dup": 2}')]),
    ], [SEARCH], gen=False)
    add("tool_call_arguments_not_json", [
        user("Broken"),
        assistant("", [call("calculate", "not json {")]),
        user("Again"),
    ], [CALC])
    add("tool_call_arguments_json_string", [
        user("String args"),
        assistant("", [call("calculate", '"1 + 1"')]),
    ], [CALC], gen=False)
    add("tool_message_first", [tool("orphan result"), user("What was that?")])
    add("tool_calls_without_tools_defined", [
        user("Hi"),
        assistant("", [call("get_weather", {"city": "Lyon"})]),
        tool("{\"temperature\": 18}"),
    ])
    add("assistant_empty_tool_calls_list", [user("Hi"), assistant("Plain answer.", [])], gen=False)
    add("tools_unicode_and_system_unicode", [sys_("Système: réponds brièvement 🙂"), user("Météo à Zürich ?")],
        [{"type": "function", "function": {"name": "météo", "description": "Donne la météo — «vite».",
                                           "parameters": {"type": "object", "properties": {"ville": {"type": "string"}}}}}])
    return c


# --- Synthetic templates that exercise the engine's features --------------------------------

SYNTHETIC = [
    # Output, literals, whitespace control
    ("literals", "{{ 'a' }}|{{ \"b\" }}|{{ 1 }}|{{ -2 }}|{{ 1.5 }}|{{ 1e3 }}|{{ true }}|{{ False }}|{{ none }}|{{ None }}|{{ 1_000 }}|{{ 0x1F }}", {}),
    ("string_escapes", r"""{{ 'tab\there' }}|{{ "q\"uote" }}|{{ 'it\'s' }}|{{ '\u00e9\x41\n' }}|{{ 'back\\slash' }}|{{ '\d' }}|{{ 'a' 'b' "c" }}""", {}),
    ("lists_dicts_tuples", "{{ [1, 'two', 3.0, none, true, [], {}] }}|{{ {'k': 'v', 'n': 1, 2: 'int key'} }}|{{ (1, 2) }}|{{ (1,) }}|{{ () }}", {}),
    ("repr_quotes", """{{ ["it's", 'say "hi"', 'both \\' and "', 'new\\nline', 'tab\\t', '\\x01', 'é✓'] }}""", {}),
    ("float_formatting", "{{ 0.1 + 0.2 }}|{{ 1 / 3 }}|{{ 10 / 4 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ 2.5e-7 }}|{{ -0.0 }}|{{ 123456789.123456789 }}|{{ 1e300 * 1e10 }}|{{ 3.0 }}", {}),
    ("trim_blocks", "{% if true %}\nA\n{% endif %}\nB\n{% for i in [1, 2] %}\n{{ i }}\n{% endfor %}\n", {}),
    ("lstrip_blocks", "start\n    {% if true %}\n    indented\n    {% endif %}\n  {{ 'var not stripped' }}\n\t{# comment #}\nend", {}),
    ("whitespace_control", "a   {{- 'b' -}}   c\n\n{%- if true -%}\n\n  d  \n\n{%- endif -%}\n  e {#- c -#}  f", {}),
    ("plus_modifiers", "x\n  {%+ if true %}y{% endif +%}\nz\n  {%+ if true +%}\nw{% endif %}", {}),
    ("raw_block", "{% raw %}{{ not rendered }} {% if %}{% endraw %}\n|  {% raw -%}   spaced   {%- endraw %}|", {}),
    ("comments", "a{# one #}b\n{# two\n lines #}\nc{#- three -#}  d", {}),
    ("no_trailing_newline_kept", "line\n", {}),
    ("crlf_source", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc", {}),

    # Variables, attributes, subscripts, slices
    ("attribute_and_item", "{{ m.role }}|{{ m['content'] }}|{{ m.missing }}|{{ m['missing'] }}|{{ xs[0] }}|{{ xs[-1] }}|{{ xs.1 }}|{{ xs[10] }}|{{ s[1] }}",
     {"m": {"role": "user", "content": "hi"}, "xs": [10, 20, 30], "s": "héllo"}),
    ("dict_method_vs_key", "{{ d.items is defined }}|{{ d['items'] }}|{{ d.get('a') }}|{{ d.get('zz', 'dflt') }}|{{ d.get('zz') }}|{{ d.keys() | list }}|{{ d.values() | list }}",
     {"d": {"a": 1, "items": "key named items"}}),
    ("slices", "{{ xs[1:] }}|{{ xs[:2] }}|{{ xs[::-1] }}|{{ xs[-2:] }}|{{ xs[::2] }}|{{ xs[5:] }}|{{ s[::-1] }}|{{ s[1:-1] }}|{{ xs[-100:100] }}|{{ xs[3:0:-1] }}",
     {"xs": [1, 2, 3, 4, 5], "s": "abcdé"}),
    ("messages_slice", "{% set loop_messages = messages[1:] %}{% for m in loop_messages %}{{ m.role }};{% endfor %}",
     {"messages": [{"role": "system"}, {"role": "user"}, {"role": "assistant"}]}),

    # Operators
    ("arithmetic", "{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ - 2 ** 2 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }}|{{ 1 + 1.5 }}|{{ true + 1 }}|{{ 10 / 5 }}", {}),
    ("string_ops", "{{ 'a' + 'b' }}|{{ 'ab' * 3 }}|{{ 2 * 'x' }}|{{ [1] + [2, 3] }}|{{ [0] * 3 }}|{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ u }}|{{ '%s-%d' % ('x', 4) }}|{{ '%05.1f|%-3s|%x' % (3.14159, 'ab', 255) }}", {}),
    ("comparisons", "{{ 1 < 2 }}|{{ 2 <= 1 }}|{{ 'a' < 'b' }}|{{ 1 == 1.0 }}|{{ 1 == true }}|{{ 'a' != 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ none == none }}|{{ u == u }}|{{ u == none }}", {}),
    ("membership", "{{ 'a' in 'cat' }}|{{ 'x' not in 'cat' }}|{{ 2 in [1, 2] }}|{{ 'k' in {'k': 1} }}|{{ 'v' in {'k': 'v'} }}|{{ 'a' in u }}|{{ '' in 'abc' }}", {}),
    ("logic", "{{ true and 'x' }}|{{ 0 or 'fallback' }}|{{ not none }}|{{ not 'a' }}|{{ [] or {} or 'last' }}|{{ 1 and 0 }}|{{ u or 'undef falsy' }}|{{ not u is defined }}", {}),
    ("inline_if", "{{ 'yes' if true else 'no' }}|{{ 'yes' if 0 else 'no' }}|{{ 'only if' if false }}|{{ 'a' if false else 'b' if true else 'c' }}|{{ (1 if true else 2) + 1 }}", {}),
    ("precedence", "{{ (1 + 2) | string }}|{{ 1 ~ 2 | string }}|{{ -3 | abs }}|{{ not 1 == 2 }}|{{ 'a' ~ 'b' | upper }}|{{ 2 * 3 ~ 4 }}|{{ (1 + 2) ~ 3 }}|{{ 1 - -1 }}", {}),

    # Tests
    ("tests", "{{ u is defined }}{{ u is undefined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is iterable }}{{ 'a' is sequence }}{{ {} is sequence }}{{ 1 is sequence }}{{ 1.5 is number }}{{ true is number }}{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}", {}),
    ("tests_with_arguments", "{{ 1 is equalto 1.0 }}{{ 2 is eq 3 }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'x' is in 'xyz' }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ 5 is gt 3 }}{{ 5 is lt(3) }}{{ none is sameas none }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 'a' is ne 'b' }}{{ u is not defined }}{{ 'tojson' is filter }}{{ 'odd' is test }}", {}),
    ("tests_in_conditions", "{% for m in messages %}{% if m.content is string %}S{% elif m.content is iterable %}I{% else %}O{% endif %}{% if m.tool_calls is defined and m.tool_calls %}T{% endif %}{% endfor %}",
     {"messages": [{"content": "a"}, {"content": [{"type": "text"}]}, {"content": None}, {"content": "b", "tool_calls": [1]}, {"content": "c", "tool_calls": []}]}),

    # Filters
    ("filters_text", "{{ '  pad  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'MiXeD' | lower }}|{{ 'MiXeD' | upper }}|{{ \"they're bill's-x (y\" | title }}|{{ 'hELLO wORLD' | capitalize }}|{{ 'a-b-a' | replace('a', 'o') }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'abc' | reverse }}|{{ 'abc' | center(9) }}|{{ 'one two  three' | wordcount }}", {}),
    ("filters_length_count", "{{ xs | length }}|{{ 'héllo' | length }}|{{ d | count }}|{{ u | length }}|{{ '' | length }}", {"xs": [1, 2, 3], "d": {"a": 1, "b": 2}}),
    ("filters_default", "{{ u | default('d') }}|{{ none | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ 0 | d('zero', boolean=true) }}|{{ 'set' | default('d') }}|{{ u | default }}", {}),
    ("filters_conversion", "{{ '42' | int }}|{{ '4.7' | int }}|{{ 'x' | int }}|{{ 'x' | int(-1) }}|{{ 3.9 | int }}|{{ '0x1A' | int(base=16) }}|{{ ' 7 ' | int }}|{{ '2.5' | float }}|{{ 'nope' | float }}|{{ 3 | float }}|{{ 12 | string }}|{{ none | string }}|{{ [1, 'a'] | string }}|{{ true | int }}", {}),
    ("filters_sequences", "{{ xs | first }}|{{ xs | last }}|{{ [] | first }}|{{ 'abc' | first }}|{{ 'abc' | last }}|{{ xs | join }}|{{ xs | join(', ') }}|{{ 'abc' | list }}|{{ d | list }}|{{ xs | reverse | list }}|{{ [3, 1, 2] | sort }}|{{ [3, 1, 2] | sort(reverse=true) }}|{{ ['b', 'A', 'c'] | sort }}|{{ ['b', 'A', 'c'] | sort(case_sensitive=true) }}|{{ [1, 2, 2, 1, 3] | unique | list }}|{{ xs | sum }}|{{ xs | min }}|{{ xs | max }}|{{ ['b', 'A'] | max }}",
     {"xs": [1, 2, 3], "d": {"k1": 1, "k2": 2}}),
    ("filters_items_dictsort", "{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}|{{ d | dictsort }}|{{ d | dictsort(by='value', reverse=true) }}|{{ u | items | list }}",
     {"d": {"b": 2, "a": 3, "C": 1}}),
    ("filters_select_map", "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|{{ ms | rejectattr('role', 'eq', 'user') | list | length }}|{{ ms | map(attribute='role') | unique | list }}|{{ ms | map(attribute='meta.n', default=0) | list }}|{{ ms | selectattr('meta') | list | length }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [1, 2, 3, 4] | reject('odd') | list }}|{{ ['a', '', 'b'] | select | list }}|{{ [1, 2] | map('string') | join('+') }}|{{ ['a', 'b'] | map('upper') | list }}|{{ ms | join('|', attribute='role') }}|{{ ms | sort(attribute='role') | map(attribute='content') | list }}|{{ ms | selectattr('content', 'ne', 'u1') | map(attribute='content') | first }}",
     {"ms": [{"role": "user", "content": "u1", "meta": {"n": 1}}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2", "meta": {"n": 2}}]}),
    ("filters_indent", "[{{ text | indent }}]|[{{ text | indent(2, true) }}]|[{{ text | indent(2, first=true, blank=true) }}]|[{{ 'one' | indent(first=true) }}]|[{{ text | indent('> ') }}]",
     {"text": "a\nb\n\nc\n"}),
    ("filters_tojson", "{{ obj | tojson }}|{{ obj | tojson(indent=2) }}|{{ obj | tojson(separators=(',', ':')) }}|{{ obj | tojson(sort_keys=true) }}|{{ 'é\"\\\\\n\\u0001' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson }}|{{ none | tojson }}|{{ 1.0 | tojson }}|{{ (1, 2) | tojson }}",
     {"obj": {"z": [1, 2.5, None, True, "s"], "a": {"nested": {}, "list": []}, "m": "ünï “q”"}}),
    ("filters_misc", "{{ -3 | abs }}|{{ 2.5 | round }}|{{ 3.5 | round }}|{{ 2.675 | round(2) }}|{{ 3.7 | round(method='floor') }}|{{ 3.2 | round(method='ceil') }}|{{ 7 | round }}|{{ '<a & \"b\">' | e }}|{{ '<b>' | safe }}|{{ 'Hello world this is long' | truncate(12) }}|{{ 'Hello world this is long' | truncate(12, true) }}|{{ '%s and %s' | format('x', 'y') }}|{{ {'a': 1} | attr('items') is defined }}", {}),
    ("filter_block", "{% filter upper %}hello {{ name }}{% endfilter %}|{% filter trim | replace(' ', '_') %}  a b  {% endfilter %}", {"name": "you"}),

    # String methods
    ("string_methods", "{{ '  x  '.strip() }}|{{ '--x--'.strip('-') }}|{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.startswith(('x', 'a')) }}|{{ 'abc'.endswith('bc') }}|{{ 'abc'.upper() }}|{{ 'ABC'.lower() }}|{{ 'a-b'.replace('-', '+') }}|{{ \"they're here\".title() }}|{{ 'x'.join(['1', '2']) }}|{{ 'hello'.find('l') }}|{{ 'hello'.count('l') }}|{{ 'hello'.capitalize() }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ '{} + {}'.format(1, 2) }}|{{ 'ab'.rjust(4, '.') }}|{{ '42'.isdigit() }}",
     {}),
    ("markup", "{{ ('<b>' | safe) + '<i>' }}|{{ '<i>' + ('<b>' | safe) }}|{{ ('<a>' | safe) * 2 + '&' }}|{{ ('%s<' | safe) % '<x>' }}|{{ ('%s|%d' | safe) % ('<', 3) }}|{{ ('<' | safe) ~ '<' }}|{{ '<' | e }}|{{ ('<' | e) | e }}|{{ ('<' | e) | forceescape }}|{{ none | e }}|{{ ('<' | e) + '>' }}|{{ (('<' | safe) | string) + '&' }}|{{ ('<' | string) + '&' }}|{% set m = '<' | safe %}{{ m + '>' }}|{{ m is string }}|{{ m == '<' }}|{{ m | length }}|{{ m.upper() + '\"' }}|{{ m.strip() ~ '\"' }}|{{ (m or 'x') + '>' }}|{{ (m if true) + '>' }}|{% set ns = namespace(v=m) %}{{ ns.v + \"'\" }}|{{ m | tojson }}|{{ (m + '>') | trim }}|{{ '<' + 'x' }}", {}),
    ("markup_in_containers_and_methods", "{% set m = 'a,b' | safe %}{% set s = '<b>' %}{{ dict(k=m) | tojson }}|{{ dict(k=m, j='z' | safe) | dictsort(by='value') }}|{{ dict(k=m).values() | map('length') | list }}|{{ m.replace('a', s) }}|{{ (',' | safe).join([s, 'y']) }}|{{ ('{}' | safe).format(s) }}|{{ m.split(',')[0] + s }}|{{ m.upper() + s }}|{{ ('a %s b' | safe) % undefined_name }}|{{ dict(k=m)['k'] + s }}|{{ dict([(m, 1)])['a,b'] }}|{% macro f() %}{{ kwargs | tojson }}{% endmacro %}{{ f(a='x' | safe) }}", {}),
    ("error_markup_plus_int", "{{ ('a' | safe) + 1 }}", {}),
    ("think_split", "{% for m in messages %}{% set content = m.content %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1].lstrip('\\n') %}{% endif %}[{{ content }}]{% endfor %}",
     {"messages": [{"content": "<think>\nreasoning\n</think>\n\nanswer"}, {"content": "plain"}]}),

    # Loops
    ("loop_variables", "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('o', 'e') }}{{ loop.previtem | default('^') }}{{ loop.nextitem | default('$') }};{% endfor %}", {}),
    ("loop_else_and_filter", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for x in xs if x is odd %}{{ x }}@{{ loop.index }}/{{ loop.length }}{% if not loop.last %},{% endif %}{% endfor %}|{% for x in xs if x > 10 %}{{ x }}{% else %}none over 10{% endfor %}", {"xs": [1, 2, 3, 4, 5]}),
    ("loop_dict_items", "{% for k, v in d.items() %}{{ k }}:{{ v }}{% if not loop.last %}, {% endif %}{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for a, (b, c) in [(1, (2, 3))] %}{{ a }}{{ b }}{{ c }}{% endfor %}", {"d": {"z": 1, "a": 2, "m": 3}}),
    ("loop_controls", "{% for x in range(10) %}{% if x is even %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}|{% for x in [1, 2] %}{% for y in [1, 2, 3] %}{% if y == 2 %}{% break %}{% endif %}{{ x }}{{ y }}{% endfor %}{% endfor %}", {}),
    ("nested_loops", "{% for row in rows %}{% for cell in row %}{{ loop.index }}{{ cell }}{% endfor %}/{{ loop.index }}{% endfor %}", {"rows": [["a", "b"], ["c"]]}),
    ("loop_over_string_and_range", "{% for ch in 'héy' %}[{{ ch }}]{% endfor %}|{{ range(3) | list }}|{{ range(1, 10, 3) | list }}|{{ range(5, 0, -2) | list }}", {}),
    ("loop_scoping", "{% set y = 0 %}{% for x in [1, 2, 3] %}{{ y }}{% set y = x %}{{ y }}|{% endfor %}{{ y }}|{% for x in [1, 2] %}{% if x == 2 %}{{ z }}{% endif %}{% set z = x %}{% endfor %}|{% if true %}{% set w = 5 %}{% endif %}{{ w }}", {}),
    ("loop_changed", "{% for x in [1, 1, 2, 2, 1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}", {}),

    ("for_else_quirks", "{% for x in [1, 2] %}{% continue %}{% else %}[else after only continues]{% endfor %}|{% for x in [1, 2] %}{% if x == 2 %}{% break %}{% endif %}{% else %}[no else: first iteration completed]{% endfor %}|{% for x in 'ab' %}{{ x }}{% for y in [] %}{% else %}{% break %}{% endfor %}{% endfor %}|{% for x in [1, 2, 3] %}{% set s %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% endset %}{{ s }}{% endfor %}", {}),
    ("generators_and_views", "{{ 'truthy' if xs | select('gt', 10) else 'falsy' }}|{{ 'truthy' if xs | select('gt', 10) | list else 'falsy' }}|{% set g = xs | map('string') %}{{ g | join(',') }}/{{ g | join(',') }}|{% set g = xs | unique %}{{ g | first }}{{ g | list }}|{{ d.items() }}|{{ d.keys() }}|{{ d.values() | list }}|{{ d.keys() | length }}|{{ 'a' in d.keys() }}|{{ d.items() | list | tojson }}|{{ xs | reverse | list }}|{{ 1 in xs | map('int') }}",
     {"xs": [1, 2, 3, 2], "d": {"a": 1, "b": [2]}}),
    # map and select of a falsy value give nothing (Functionary v3.1 filters `tools` when it is None)
    ("filters_of_falsy_values", "{{ tools | selectattr('type', 'equalto', 'code_interpreter') | list | length }}|{{ none | map(attribute='text') | list }}|{{ 0 | select | list }}|{{ '' | reject('odd') | list }}|{{ missing | map('upper') | list }}|{{ [] | map('nosuch') | list }}",
     {"tools": None}),
    # long chains within the nesting limit
    ("long_chains", "{{ " + " + ".join(["1"] * 100) + " }}|{{ 'Ab' " + "| lower | upper " * 30 + "}}|{{ d" + ".a" * 40 + " }}|{{ " + " and ".join(["true"] * 60) + " }}",
     {"d": json.loads('{"a": ' * 40 + '"deep"' + '}' * 40)}),
    # set, namespace, with
    ("set_forms", "{% set a = 1 %}{% set b, c = [2, 3] %}{% set t = 4, 5 %}{{ a }}{{ b }}{{ c }}{{ t }}|{% set block %}inner {{ a }}{% endset %}[{{ block }}]|{% set up | upper %}shout{% endset %}{{ up }}", {}),
    ("namespace", "{% set ns = namespace(found=false, count=0, last=none) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.count = ns.count + 1 %}{% set ns.last = m.content %}{% endif %}{% if m.role == 'system' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}/{{ ns.count }}/{{ ns.last }}|{{ namespace(a=1).a }}|{{ ns.missing is defined }}",
     {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "u2"}]}),
    ("with_block", "{% with a = 1, b = 'two' %}{{ a }}{{ b }}{% endwith %}[{{ a }}]", {}),

    # Macros
    ("macros", "{% macro tag(name, value='none', cls=none) -%}\n<{{ name }}{% if cls %} class=\"{{ cls }}\"{% endif %}>{{ value }}</{{ name }}>\n{%- endmacro %}{{ tag('b') }}|{{ tag('i', 'x') }}|{{ tag('p', cls='c', value=3) }}|{{ tag }}", {}),
    ("macro_varargs_kwargs_caller", "{% macro m(a) %}[{{ a }}|{{ varargs }}|{{ kwargs }}]{% endmacro %}{{ m(1, 2, 3, k='v') }}|{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call wrap('div') %}body {{ 1 + 1 }}{% endcall %}|{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1, 2]) %}<{{ item }}>{% endcall %}", {}),
    ("macro_scope", "{% macro show() %}{{ g }}{% set g = 'inner' %}{{ g }}{% endmacro %}{% set g = 1 %}{{ show() }}{% set g = 2 %}{{ show() }}{{ g }}", {}),
    ("macro_recursion", "{% macro render(v) %}{% if v is mapping %}{{ '{' }}{% for k, x in v.items() %}{{ k }}={{ render(x) }}{% if not loop.last %},{% endif %}{% endfor %}{{ '}' }}{% elif v is string %}'{{ v }}'{% elif v is iterable %}[{% for x in v %}{{ render(x) }}{% if not loop.last %},{% endif %}{% endfor %}]{% else %}{{ v }}{% endif %}{% endmacro %}{{ render(data) }}",
     {"data": {"a": [1, "two", {"b": None}], "c": True}}),

    # Globals and undefined
    ("globals", "{{ range(3) | join('-') }}|{{ dict(a=1, b=2) }}|{{ dict([('x', 1)]) }}|{{ bos_token is defined }}|{{ add_generation_prompt }}", {"add_generation_prompt": False}),
    ("undefined_behaviour", "[{{ u }}]|[{{ u | upper }}]|{{ u | list }}|{% for x in u %}never{% else %}empty{% endfor %}|{{ u is iterable }}|{{ (u or 'x') }}|{{ m.missing.__class__ is defined }}", {"m": {}}),
    ("none_behaviour", "{{ none }}|{{ none.attr }}|{{ none is none }}|{{ none | default('d') }}|{{ [none] }}", {}),

    # Realistic chat-template patterns written for these tests
    ("pattern_alternating_roles", """{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}{% set loop_messages = messages[1:] %}{% else %}{% set system = '' %}{% set loop_messages = messages %}{% endif %}
{% for message in loop_messages %}
{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
{% endif %}
{% if message['role'] == 'user' %}
{{ '[INST] ' + (system + '\\n\\n' if loop.first and system else '') + message['content'] | trim + ' [/INST]' }}
{% else %}
{{ ' ' + message['content'] | trim + eos_token }}
{% endif %}
{% endfor %}""",
     {"bos_token": "<s>", "eos_token": "</s>", "messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": " Hi "}, {"role": "assistant", "content": "Hello "}, {"role": "user", "content": "Bye"}]}),
    ("pattern_turns_and_trim", """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- set role = "model" if message['role'] == 'assistant' else message['role'] -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- else -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'text' -%}{{ item['text'] | trim }}{%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\n' }}
{%- endif -%}
""",
     {"bos_token": "<bos>", "add_generation_prompt": True, "messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "  Hi there  "}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": [{"type": "text", "text": " parts "}, {"type": "image"}]}]}),
    ("pattern_tools_header", """{%- if custom_tools is defined %}{%- set tools = custom_tools %}{%- endif %}
{%- if not tools_in_user_message is defined %}{%- set tools_in_user_message = true %}{%- endif %}
{%- if not date_string is defined %}{%- set date_string = "26 Jul 2024" %}{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|header|>system\\n\\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{%- if tools is not none and tools_in_user_message %}
    {%- set first_user_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
    {{- "\\nFunctions:\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot|>" }}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|header|>' + message['role'] + '\\n\\n'+ message['content'] | trim + '<|eot|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|header|>assistant\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", "parameters": ' + tool_call.arguments | tojson + "}" }}
        {{- "<|eot|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|header|>ipython\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|header|>assistant\\n\\n' }}
{%- endif %}
""",
     {"add_generation_prompt": True, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}],
      "messages": [{"role": "system", "content": " sys "}, {"role": "user", "content": "call f"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}, {"role": "tool", "content": {"result": 2}}, {"role": "tool", "content": "plain"}]}),
    ("pattern_reasoning_namespace", """{%- set ns = namespace(system_prompt='', is_tool=false, is_first=false) -%}
{%- for message in messages -%}{%- if message['role'] == 'system' -%}{%- set ns.system_prompt = ns.system_prompt + message['content'] -%}{%- endif -%}{%- endfor -%}
{{ bos_token }}{{ ns.system_prompt }}
{%- for message in messages -%}
{%- if message['role'] == 'user' -%}{%- set ns.is_tool = false -%}{{ '<|User|>' + message['content'] }}{%- endif -%}
{%- if message['role'] == 'assistant' and message['content'] is not none -%}
{%- set content = message['content'] -%}
{%- if '</think>' in content -%}{%- set content = content.split('</think>')[-1] -%}{%- endif -%}
{{ '<|Assistant|>' + content + '<|end|>' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt and not ns.is_tool -%}{{ '<|Assistant|><think>\\n' }}{%- endif -%}""",
     {"bos_token": "<B>", "add_generation_prompt": True, "messages": [{"role": "system", "content": "S1."}, {"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>hmm</think>A"}, {"role": "system", "content": "S2."}, {"role": "user", "content": "Q2"}]}),
    ("unicode_case_and_digits", "{{ 'ΟΔΟΣ ΣΑΣ Σ ΑΣ.' | lower }}|{{ 'ΌΣΟΣ'.lower() }}|{{ \"Σ'Σ ΑΣ'Α\" | lower }}|{{ '１２３' | int }}|{{ '٣' | int + 1 }}|{{ '１.５' | float }}|{{ ' ０x1F ' | int(base=16) }}|{{ 'Straße ΣΑΣ ﬁ'.casefold() }}", {}),
]

SYNTHETIC_ERRORS = [
    ("error_raise_exception", "{% if messages | length == 0 %}{{ raise_exception('No messages given!') }}{% endif %}", {"messages": []}),
    ("error_raise_in_loop", "{% for m in messages %}\n{% if m.role not in ['user', 'assistant'] %}\n{{ raise_exception('Unknown role: ' + m.role) }}\n{% endif %}\n{% endfor %}", {"messages": [{"role": "user"}, {"role": "robot"}]}),
    ("error_unclosed_if", "{% if true %}\nno endif", {}),
    ("error_unclosed_for", "{% for x in xs %}{{ x }}", {"xs": [1]}),
    ("error_unclosed_expression", "Hello {{ name", {"name": "x"}),
    ("error_unclosed_block_tag", "Hello {% if x", {}),
    ("error_unclosed_comment", "a {# never closed", {}),
    ("error_stray_end_tag", "{% endif %}", {}),
    ("error_unknown_tag", "{% frobnicate %}", {}),
    ("error_unknown_filter", "{{ 'x' | frobnicate }}", {}),
    ("error_unknown_test", "{{ 'x' is frobnicated }}", {}),
    ("error_unknown_filter_runtime_in_if", "{% if true %}{{ 'x' | frobnicate }}{% endif %}", {}),
    ("error_bad_expression", "{{ 1 + }}", {}),
    ("error_attribute_of_undefined", "{{ missing.attribute }}", {}),
    ("error_add_undefined", "{{ 'a' + missing }}", {}),
    ("error_add_str_int", "{{ 'a' + 1 }}", {}),
    ("error_attribute_path_through_undefined", "{{ ms | selectattr('meta.n', 'gt', 1) | list }}", {"ms": [{"meta": {"n": 2}}, {"role": "x"}]}),
    ("error_filter_binds_tighter", "{{ 1 + 2 | string }}", {}),
    ("error_concat_binds_tighter", "{{ 1 + 2 ~ 3 }}", {}),
    ("error_compare_str_int", "{{ 'a' < 1 }}", {}),
    ("error_iterate_none", "{% for x in none %}{% endfor %}", {}),
    ("error_division_by_zero", "{{ 1 // 0 }}", {}),
    ("error_call_undefined", "{{ nothing() }}", {}),
    ("error_tojson_undefined", "{{ missing | tojson }}", {}),
    ("error_inline_if_undefined_attribute", "{{ (x if false).y }}", {}),
    ("error_set_on_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("error_macro_too_many_arguments", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    ("error_macro_unknown_keyword", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, b=2) }}", {}),
    ("error_call_block_without_caller", "{% macro m() %}no caller used{% endmacro %}{% call m() %}body{% endcall %}", {}),
    ("error_generator_has_no_length", "{{ xs | select('odd') | length }}", {"xs": [1, 2, 3]}),
    ("error_generator_not_json", "{{ xs | map('string') | tojson }}", {"xs": [1, 2]}),
    ("error_unhashable_membership", "{{ [1] in {'a': 1} }}", {}),
    ("error_sandbox_mutation", "{% set xs = [] %}{{ xs.append(1) }}", {}),
]


def render_synthetic(name, source, context):
    case = {"name": name, "template": source, "context_json": json.dumps(context, ensure_ascii=False)}
    try:
        case["expected"] = ENV.from_string(source).render(**context)
    except Exception as e:  # noqa: BLE001 - the fixture records what jinja2 raised
        case["error"] = {"type": type(e).__name__, "message": str(e)}
    return case


# --- Real-world templates -------------------------------------------------------------------

# The conversations every corpus template renders: plain turns, Unicode and whitespace, tools,
# and tool calls with their results.
CORPUS_CASES = [
    "user_only", "user_only_no_generation_prompt", "system_user", "multi_turn_with_system", "unicode",
    "whitespace_and_newlines", "tools_user_only", "tools_with_system", "tool_call_round_trip",
    "tool_call_then_generation_prompt", "tool_call_with_content_and_ids",
]
CORPUS_NOW = "2026-03-14T12:00:00"
CORPUS_BOS, CORPUS_EOS = "<|bos|>", "<|eos|>"


def corpus_fixture(folder, source_name):
    import datetime

    now = datetime.datetime.fromisoformat(CORPUS_NOW)
    env = make_environment()
    env.globals["strftime_now"] = lambda format: now.strftime(format)
    by_name = {c[0]: c for c in conversations()}
    templates = []
    for filename in sorted(os.listdir(folder)):
        if not filename.endswith(".jinja"):
            continue
        with open(os.path.join(folder, filename), encoding="utf-8") as f:
            source = f.read()
        try:
            template = env.from_string(source)
        except jinja2.exceptions.TemplateError as e:
            print(f"  skipped {filename}: jinja2 cannot parse it ({e})")
            continue
        outputs = {}
        for name in CORPUS_CASES:
            _, messages, tools, generation_prompt = by_name[name]
            try:
                outputs[name] = {"expected": template.render(
                    messages=[template_message(m) for m in messages], tools=tools, documents=None,
                    add_generation_prompt=generation_prompt, bos_token=CORPUS_BOS, eos_token=CORPUS_EOS)}
            except Exception as e:  # noqa: BLE001 - the fixture records what jinja2 raised
                outputs[name] = {"error": {"type": type(e).__name__, "message": str(e)}}
        templates.append({"name": filename[: -len(".jinja")], "template": source, "outputs": outputs})
    return {"source": source_name, "jinja2": jinja2.__version__, "now": CORPUS_NOW, "bos_token": CORPUS_BOS,
            "eos_token": CORPUS_EOS, "cases": CORPUS_CASES, "templates": templates}


# --- Main ---------------------------------------------------------------------------------

def model_fixture(models_dir, key, folder, filename):
    from gguf import GGUFReader

    path = os.path.join(models_dir, folder, filename)
    reader = GGUFReader(path)
    fields = reader.fields
    if "tokenizer.chat_template" in fields:
        source = fields["tokenizer.chat_template"].contents()
    else:
        arch = fields["general.architecture"].contents()
        with open(os.path.join(BUILTIN_TEMPLATES, f"{arch}.jinja"), encoding="utf-8") as f:
            source = f.read()
    tokens = fields["tokenizer.ggml.tokens"].contents()
    bos = tokens[fields["tokenizer.ggml.bos_token_id"].contents()]
    eos = tokens[fields["tokenizer.ggml.eos_token_id"].contents()]
    template = ENV.from_string(source)
    cases = []
    for name, messages, tools, generation_prompt in conversations():
        case = {
            "name": name,
            "messages": messages,
            "tools_json": None if tools is None else json.dumps(tools, ensure_ascii=False),
            "add_generation_prompt": generation_prompt,
        }
        try:
            case["expected"] = template.render(
                messages=[template_message(m) for m in messages],
                tools=tools,
                documents=None,
                add_generation_prompt=generation_prompt,
                bos_token=bos,
                eos_token=eos,
            )
        except jinja2.exceptions.TemplateError as e:
            # A conversation the template refuses (Gemma: roles must alternate; no tool role).
            case["error"] = {"type": type(e).__name__, "message": str(e)}
        cases.append(case)
    return {"model": folder, "template": source, "bos_token": bos, "eos_token": eos, "cases": cases}


def write(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {os.path.relpath(path, ROOT)} ({len(obj['cases'])} cases)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=DEFAULT_MODELS, help="folder of cached models")
    parser.add_argument("--out", default=DEFAULT_OUT, help="fixture folder")
    parser.add_argument("--corpus", help="folder of real-world .jinja templates (llama.cpp's models/templates)")
    parser.add_argument("--corpus-source", default="llama.cpp models/templates, llama-cpp-python 0.3.36 sdist")
    parser.add_argument("--corpus-only", action="store_true", help="write corpus.json only")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"jinja2 {jinja2.__version__}")
    if args.corpus:
        corpus = corpus_fixture(args.corpus, args.corpus_source)
        path = os.path.join(args.out, "corpus.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(corpus, f, ensure_ascii=False, indent=0)
            f.write("\n")
        print(f"wrote {os.path.relpath(path, ROOT)} ({len(corpus['templates'])} templates)")
        if args.corpus_only:
            return
    for key, folder, filename in MODELS:
        if not os.path.exists(os.path.join(args.models, folder, filename)):
            sys.exit(f"missing model {folder}/{filename} under {args.models}: run `plinth models fetch` first")
        write(os.path.join(args.out, f"{key}.json"), model_fixture(args.models, key, folder, filename))
    cases = [render_synthetic(*c) for c in SYNTHETIC + SYNTHETIC_ERRORS]
    for c in cases:
        wanted_error = c["name"].startswith("error_")
        if wanted_error != ("error" in c):
            sys.exit(f"synthetic case {c['name']}: expected {'an error' if wanted_error else 'output'}, got {c}")
    write(os.path.join(args.out, "synthetic.json"), {"jinja2": jinja2.__version__, "cases": cases})


if __name__ == "__main__":
    main()
