#!/usr/bin/env python3
"""SmolLM2-135M-Instruct (its Q4_1 GGUF file, scripts/fetch_models.sh) as transformers reads it:
dequantized to f32 (AutoModelForCausalLM.from_pretrained(dir, gguf_file=..., dtype=float32),
eager attention), its tokenizer converted from the file's metadata.

tests/fixtures/smollm2/prompts.json: 10 chat prompts, each rendered by apply_chat_template
(add_generation_prompt=True) and tokenized: the text, the ids, and the 48 greedy tokens
transformers generates after them (stopping early only at <|im_end|>); and for each, whether
a step of the greedy run was a near tie (the top two logits within 1e-4).
tests/fixtures/smollm2/last_logits.npy: [10, vocab] the logits of each prompt's last position.

    build/peers-venv/bin/python tests/reference/make_smollm2_fixtures.py build/models/smollm2
    (torch, transformers, gguf, accelerate)

The fixtures are committed (about 2 MB); the test suite fetches the GGUF file itself.
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "smollm2")
PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Write a haiku about the sea.",
    "List three prime numbers greater than 10.",
    "Explain what a compiler does in two sentences.",
    "Translate 'good morning' into Spanish.",
    "What is 12 times 7?",
    "Give me a name for a grey cat.",
    "Why is the sky blue? Be brief.",
    "Summarize the plot of Romeo and Juliet in one sentence.",
    "Suggest a healthy breakfast.",
]


def load(folder):
    """The tokenizer, the f32 model (eager attention) and the end-of-turn id."""
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    return tok, model, tok.convert_tokens_to_ids("<|im_end|>")


def greedy(model, ids, end, steps=48):
    """Up to `steps` greedy tokens after `ids` (each from the whole sequence, no cache), stopping
    after `end`: the tokens, whether a step was a near tie (top two within 1e-4), and the first
    step's logits."""
    seq, near_tie, first = list(ids), False, None
    with torch.inference_mode():
        for step in range(steps):
            logits = model(torch.tensor([seq])).logits[0, -1]
            if step == 0:
                first = logits.numpy().astype(np.float32)
            top = torch.topk(logits, 2).values
            near_tie |= bool(top[0] - top[1] < 1e-4)
            nxt = int(torch.argmax(logits))
            seq.append(nxt)
            if nxt == end:
                break
    return seq[len(ids):], near_tie, first


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "build", "models", "smollm2")
    tok, model, end = load(folder)
    os.makedirs(OUT, exist_ok=True)
    cases, last = [], []
    for p in PROMPTS:
        text = tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        gen, near_tie, first = greedy(model, ids, end)
        last.append(first)
        cases.append({"prompt": p, "text": text, "ids": ids, "generated": gen, "near_tie": near_tie,
                      "answer": tok.decode(gen, skip_special_tokens=False)})
        print(p, "->", repr(cases[-1]["answer"]), flush=True)
    with open(os.path.join(OUT, "prompts.json"), "w") as f:
        json.dump({"gguf": GGUF, "end_of_turn": end, "cases": cases}, f, indent=1, ensure_ascii=False)
    np.save(os.path.join(OUT, "last_logits.npy"), np.stack(last))


if __name__ == "__main__":
    main()
