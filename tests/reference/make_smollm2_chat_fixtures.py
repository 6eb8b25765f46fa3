#!/usr/bin/env python3
"""A conversation of three turns with SmolLM2-135M-Instruct (its Q4_1 GGUF file, dequantized to
f32 by transformers, eager attention), each answer greedy, each turn rendered by
apply_chat_template over the whole conversation so far (the earlier answers as their decoded
text, special tokens left out, as a chat client keeps them) and run from scratch.

tests/fixtures/smollm2/conversation.json: the user messages, and for each turn the rendered
text, its ids, the greedy tokens (up to 48, ending at <|im_end|> when reached), the answer's
text, and whether a step was a near tie (the top two logits within 1e-4).

    build/peers-venv/bin/python tests/reference/make_smollm2_chat_fixtures.py build/models/smollm2
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "smollm2", "conversation.json")
TURNS = [
    "What is the capital of France? Answer in one sentence.",
    "And of Germany?",
    "Which of the two cities is larger?",
]


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "build", "models", "smollm2")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    end = tok.convert_tokens_to_ids("<|im_end|>")
    messages, turns = [], []
    for user in TURNS:
        messages.append({"role": "user", "content": user})
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        seq, near_tie = list(ids), False
        with torch.inference_mode():
            for _ in range(48):
                logits = model(torch.tensor([seq])).logits[0, -1]
                top = torch.topk(logits, 2).values
                near_tie |= bool(top[0] - top[1] < 1e-4)
                nxt = int(torch.argmax(logits))
                seq.append(nxt)
                if nxt == end:
                    break
        gen = seq[len(ids):]
        answer = tok.decode(gen, skip_special_tokens=True)
        messages.append({"role": "assistant", "content": answer})
        turns.append({"user": user, "text": text, "ids": ids, "generated": gen, "answer": answer, "near_tie": near_tie})
        print(user, "->", repr(answer), flush=True)
    with open(OUT, "w") as f:
        json.dump({"gguf": GGUF, "end_of_turn": end, "turns": turns}, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
