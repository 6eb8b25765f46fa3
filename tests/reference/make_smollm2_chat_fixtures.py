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

from make_smollm2_fixtures import GGUF, greedy, load

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "smollm2", "conversation.json")
TURNS = [
    "What is the capital of France? Answer in one sentence.",
    "And of Germany?",
    "Which of the two cities is larger?",
]


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "build", "models", "smollm2")
    tok, model, end = load(folder)
    messages, turns = [], []
    for user in TURNS:
        messages.append({"role": "user", "content": user})
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        gen, near_tie, _ = greedy(model, ids, end)
        answer = tok.decode(gen, skip_special_tokens=True)
        messages.append({"role": "assistant", "content": answer})
        turns.append({"user": user, "text": text, "ids": ids, "generated": gen, "answer": answer, "near_tie": near_tie})
        print(user, "->", repr(answer), flush=True)
    with open(OUT, "w") as f:
        json.dump({"gguf": GGUF, "end_of_turn": end, "turns": turns}, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
