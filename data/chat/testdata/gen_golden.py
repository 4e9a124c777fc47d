"""Regenerate jinja_golden.json: edge-case renders of the Qwen templates and a feature-test template.

Renders with plain jinja2 in the environment transformers builds for chat templates
(transformers/utils/chat_template_utils.py: _compile_jinja_template, render_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]),
tojson = json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys),
raise_exception -> TemplateError; variables: messages, tools, documents, add_generation_prompt and
the special tokens that are set (eos_token, pad_token for Qwen).

    cd data/chat/testdata && python3 gen_golden.py   # jinja2 3.1.6, Python 3
"""
import json

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception

SPECIAL = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get \"weather\" <now>\n\tfor a city (°C) 🌧",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7.5, "default": 1e-05},
                                                            "tags": {"type": "array", "items": {}, "enum": [True, False, None, 0.1, 1e16, 123456789.25]}},
                          "required": ["city"]}}}
CALC = {"type": "function", "function": {"name": "calc", "description": "", "parameters": {"type": "object", "properties": {}}}}

CONVS = [
    {"name": "think_in_history", "messages": [
        {"role": "user", "content": "3×4?"},
        {"role": "assistant", "content": "<think>\n3 fours\n</think>\n\n12"},
        {"role": "user", "content": "5×6?"}]},
    {"name": "think_last", "gen": False, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "3×4?"},
        {"role": "assistant", "content": "<think>\n3 fours\n</think>\n\n12"}]},
    {"name": "reasoning_content", "gen": False, "messages": [
        {"role": "user", "content": "2×2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "\ntwo twos\n"}]},
    {"name": "multi_step_tools", "tools": [WEATHER, CALC], "gen": False, "messages": [
        {"role": "system", "content": "You call tools."},
        {"role": "user", "content": "서울과 부산 날씨?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Seoul", "days": 2, "x": [1.5, -0.0, "é\"\\"]}}},
            {"function": {"name": "get_weather", "arguments": "{\"city\": \"Busan\"}"}}]},
        {"role": "tool", "content": "{\"temp\": 3}"},
        {"role": "tool", "content": "{\"temp\": 9}"},
        {"role": "assistant", "content": "Seoul 3°C, Busan 9°C."},
        {"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
        {"role": "assistant", "content": "Done."}]},
    {"name": "no_think", "vars": {"enable_thinking": False}, "messages": [
        {"role": "user", "content": "Hi {{ not a tag }} {% raw %}"}]},
    {"name": "system_mid", "messages": [
        {"role": "user", "content": "a"},
        {"role": "system", "content": "b"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "  spaced \n"}]},
]

FEATURES = r"""{{- bos_token if bos_token is defined else '[nobos]' }}
{%- set ns = namespace(n=0, roles=[]) %}
{%- for m in messages %}
{%- if loop.index0 % 2 == 0 and m.role == 'assistant' %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}
{%- set ns.n = ns.n + 1 %}
[{{ loop.index }}/{{ loop.length }}{{ ' first' if loop.first }}{{ ' last' if loop.last }}] {{ m['role'] | upper }}: {{ m.content | trim }}|{{ m.content.strip() }}|{{ m.content.lstrip() }}|{{ m.content.rstrip() }}|{{ m.content | length }}
{%- if m.content.startswith('x') %} starts-x{% endif %}{% if m.content.endswith('!') %} ends-bang{% endif %}
 split={{ m.content.split(' ') | tojson }} parts={{ m.content.split() | length }} title={{ m.content | title }} rep={{ m.content.replace('a', 'A') }}
{%- if m.meta is defined and m.meta is mapping %} meta={{ m.meta | tojson }} keys={{ m.meta.keys() | list | tojson }}
{%- for k, v in m.meta.items() %} {{ k }}={{ v | tojson }}{% if v is string %}(s){% elif v is number %}(n){% elif v is sequence %}(l){% endif %}{% endfor %}
 indent={{ m.meta | tojson(indent=2) }} sorted={{ m.meta | tojson(sort_keys=true) }} compact={{ m.meta | tojson(separators=(',', ':')) }}{% endif %}
{%- if m.content == 'stop' %}{% break %}{% endif %}
{% endfor %}
{{- 'n=' ~ ns.n }} {{ messages | map(attribute='role') | join(',') }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ (messages | last).role }} {{ messages[-1]['content'][:3] }}
{%- if add_generation_prompt %}<gen>{% endif %}"""

FEATURES2 = r"""{%- macro fmt(m, prefix='>') -%}{{ prefix }}{{ m.role[:1] }}:{{ m.content }}{%- endmacro -%}
{%- set sys = messages | selectattr('role', 'equalto', 'system') | list %}
{%- if sys | length > 0 %}SYS={{ sys[0]['content'] }};{% endif %}
{%- for m in messages[1:] if m.role != 'system' %}
{{ fmt(m) }}{{ fmt(m, prefix='#') }} i={{ loop.index0 }} rev={{ loop.revindex }} {{ 'tc' if 'tool_calls' in m else 'notc' }} {{ 'x' not in m }}
{%- if m.tool_calls is defined and m.tool_calls %}{% for tc in m.tool_calls %} {{ tc.function.name }}({{ tc.function.arguments | tojson }}) {{ tc.function.arguments.city | default('none') }} {{ tc.get('id', 'noid') }} {{ tc.function.missing is defined }}{% endfor %}{% endif %}
{%- if m.content is string %} str{% endif %}{% if m.content is not none %} nn{% endif %}
 {{ m.content | length // 2 }} {{ 7 % 3 }} {{ (loop.index0 - 1) * 2 }} {{ m.content | tojson }} {{ m.content | default('empty', true) }}
{%- endfor %}
{% for k, v in messages[0].items() %}{{ k }}{{ '=' ~ v | string }}{{ ',' if not loop.last }}{% endfor %}
{{ messages | length }} {{ [1, 2, 3] | sum }} {{ ['b', 'a'] | sort | join('') }} {{ messages[0].role | upper }} {{ 'A-B'.lower() }} {{ messages | first | attr('role') if false else (messages | first).role }}
{{ none | tojson }} {{ true | tojson }} {{ 3 | tojson }} {{ 2.50 | tojson }} {{ [] | tojson }} {{ {'b': 1, 'a': [true]} | tojson }}
{%- if add_generation_prompt %}<gen>{% endif %}"""

FEATURE2_CONVS = [
    {"name": "features2", "messages": [
        {"role": "system", "content": "sys prompt"},
        {"role": "user", "content": "서울?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": {"city": "Seoul", "n": 1.0}}}]},
        {"role": "tool", "content": "{\"t\": 3}"},
        {"role": "system", "content": "late"},
        {"role": "assistant", "content": "done"}]},
]

FEATURE_CONVS = [
    {"name": "features", "messages": [
        {"role": "user", "content": "  xa b  c!  ", "meta": {"z": 1, "a": [1, 2.5, {"k": None}], "s": "é\u2028\u0001", "f": 3.0, "e": {}, "l": []}},
        {"role": "assistant", "content": "fine"},
        {"role": "user", "content": "stop"},
        {"role": "assistant", "content": "never"}]},
    {"name": "raises", "messages": [{"role": "assistant", "content": "hi"}]},
]


def render(src, conv, special):
    tpl = env.from_string(src)
    try:
        out = tpl.render(messages=conv["messages"], tools=conv.get("tools"), documents=None,
                         add_generation_prompt=conv.get("gen", True), **special, **conv.get("vars", {}))
        return {"rendered": out}
    except jinja2.exceptions.TemplateError as e:
        return {"error": str(e)}


def main():
    out = []
    for tname in ["qwen25_chat_template.jinja", "qwen3_chat_template.jinja"]:
        src = open(tname).read()
        for c in CONVS:
            out.append({"template": tname, **c, **render(src, c, SPECIAL)})
    for c in FEATURE_CONVS:
        special = {"bos_token": "<s>"}
        out.append({"template": "features", **c, **render(FEATURES, c, special), "special": special})
    for c in FEATURE2_CONVS:
        out.append({"template": "features2", **c, **render(FEATURES2, c, {})})
    with open("jinja_golden.json", "w") as f:
        json.dump({"features_template": FEATURES, "features2_template": FEATURES2, "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")


main()
