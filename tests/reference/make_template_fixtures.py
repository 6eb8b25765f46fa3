#!/usr/bin/env python3
"""Chat templates rendered by transformers' own Jinja environment (the one apply_chat_template
uses: trim_blocks, lstrip_blocks, loop controls, its tojson, raise_exception, strftime_now), for
kiln's Jinja-subset interpreter: tests/fixtures/templates/cases.json, each case a template, the
variables it was rendered with, and the text.

Templates: SmolLM2-135M-Instruct's (from its GGUF file, given as the first argument), Llama 3.1's
and Phi-3.5's (as their tokenizer_config.json files ship them), a ChatML template as Qwen2's
(its default system message), a Mistral-style [INST] template that raises on roles out of order,
a Gemma-style one (the system message folded into the first user turn, `model` for assistant),
each over conversations of 1, 2 and 3 user turns with and without a system message; and small
templates for the language's corners (loops, namespaces, filters, tests, slices, whitespace
control).

    build/peers-venv/bin/python tests/reference/make_template_fixtures.py build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import json
import os
import sys

from transformers.utils.chat_template_utils import _compile_jinja_template

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "templates", "cases.json")

LLAMA31 = json.loads('"' + r"""{{- bos_token }}\n{%- if custom_tools is defined %}\n    {%- set tools = custom_tools %}\n{%- endif %}\n{%- if not tools_in_user_message is defined %}\n    {%- set tools_in_user_message = true %}\n{%- endif %}\n{%- if not date_string is defined %}\n    {%- if strftime_now is defined %}\n        {%- set date_string = strftime_now(\"%d %b %Y\") %}\n    {%- else %}\n        {%- set date_string = \"26 Jul 2024\" %}\n    {%- endif %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n\n{#- This block extracts the system message, so we can slot it into the right place. #}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n\n{#- System message #}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{%- if tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{%- if tools is not none and not tools_in_user_message %}\n    {{- \"You have access to the following functions. To call a function, please respond with JSON for a function call.\" }}\n    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n{%- endif %}\n{{- system_message }}\n{{- \"<|eot_id|>\" }}\n\n{#- Custom tools are passed in a user message with some extra guidance #}\n{%- if tools_in_user_message and not tools is none %}\n    {#- Extract the first user message so we can plug it in here #}\n    {%- if messages | length != 0 %}\n        {%- set first_user_message = messages[0]['content']|trim %}\n        {%- set messages = messages[1:] %}\n    {%- else %}\n        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user message!\") }}\n{%- endif %}\n    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n    {{- first_user_message + \"<|eot_id|>\"}}\n{%- endif %}\n\n{%- for message in messages %}\n    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n    {%- elif 'tool_calls' in message %}\n        {%- if not message.tool_calls|length == 1 %}\n            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}\n        {%- endif %}\n        {%- set tool_call = message.tool_calls[0].function %}\n        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n        {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n        {{- '\"parameters\": ' }}\n        {{- tool_call.arguments | tojson }}\n        {{- \"}\" }}\n        {{- \"<|eot_id|>\" }}\n    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n        {%- if message.content is mapping or message.content is iterable %}\n            {{- message.content | tojson }}\n        {%- else %}\n            {{- message.content }}\n        {%- endif %}\n        {{- \"<|eot_id|>\" }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n""" + '"')

PHI35 = ("{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + "
         "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + "
         "'<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}"
         "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}")

QWEN2 = """{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant") %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

MISTRAL = """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""

GEMMA = """{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set first_user_prefix = messages[0]['content'] + '\n\n' %}{% set loop_messages = messages[1:] %}{% else %}{% set first_user_prefix = "" %}{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = "model" %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"""

CORNERS = [
    ("loop", "{% for m in messages %}{{ loop.index }}/{{ loop.length }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}"
             "{{ m.role[0] | upper }}:{{ m['content'] | length }};{% else %}none{% endfor %}"),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for m in messages if m.role == 'user' %}{% set ns.n = ns.n + 1 %}"
                  "{% set ns.s = ns.s ~ m.content[:3] %}{% endfor %}{{ ns.n }} {{ ns.s }}"),
    ("filters", "{{ messages | map(attribute='role') | join(',') }}|{{ (messages | selectattr('role', 'equalto', 'user') | list) | length }}"
                "|{{ '  a b  ' | trim }}|{{ missing | default('dflt') }}|{{ 'x' ~ 3 ~ none }}|{{ [1, 2.5, 'q', true, none] | tojson }}"
                "|{{ {'k': [1, {'z': 'é'}]} | tojson }}|{{ 'Hello World'.lower().startswith('hello') }}|{{ 7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }}"),
    ("tests", "{% if missing is not defined and messages is iterable and 3 is number and 'a' is string and none is none %}ok{% endif %}"
              "{{ 'yes' if 'us' in 'user' else 'no' }}{{ messages[-1]['role'] }}{{ messages[::-1][0].role }}"),
    ("whitespace", "A\n  {% if true %}\n    B\n  {% endif %}\n  {{- ' C ' -}}  \n{# note #}\nD{%+ if true %} E{% endif %}\n"),
    ("loopcontrols", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
    ("setblock", "{% set x %}[{{ messages | length }}]{% endset %}{{ x }}{{ x | length }}{% set d = {'a': 1, 'b': 2} %}"
                 "{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}{{ d.get('c', 'none') }}"),
]


def conversations():
    turns = [("What is 2 + 2?", "4."), ("And times 3?", "12."), ("Thanks! Anything else?", None)]
    out = []
    for system in (None, "You answer briefly."):
        for n in (1, 2, 3):
            msgs = [{"role": "system", "content": system}] if system else []
            for i in range(n):
                msgs.append({"role": "user", "content": turns[i][0]})
                if i + 1 < n:
                    msgs.append({"role": "assistant", "content": turns[i][1]})
            out.append(msgs)
    return out


def main():
    import gguf
    smol = gguf.GGUFReader(sys.argv[1]).fields["tokenizer.chat_template"].contents()
    cases = []
    base = {"bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True, "date_string": "26 Jul 2024"}
    for name, tmpl in [("smollm2", smol), ("llama3.1", LLAMA31), ("phi3.5", PHI35), ("qwen2", QWEN2), ("mistral", MISTRAL),
                       ("gemma", GEMMA)]:
        compiled = _compile_jinja_template(tmpl)
        for k, msgs in enumerate(conversations()):
            ctx = dict(base, messages=msgs)
            cases.append({"name": f"{name}/{k}", "template": tmpl, "context": ctx, "output": compiled.render(**ctx)})
    corner_ctx = dict(base, messages=conversations()[5])
    for name, tmpl in CORNERS:
        cases.append({"name": "corner/" + name, "template": tmpl, "context": corner_ctx,
                      "output": _compile_jinja_template(tmpl).render(**corner_ctx)})
    with open(OUT, "w") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
    print(len(cases), "cases")


if __name__ == "__main__":
    main()
