#!/usr/bin/env python3
"""Byte-level BPE tokenizers whose pre-tokenizer is more than ByteLevel, from Hugging Face
`tokenizers`, for kiln's tokenizer.json reader: trained on tests/fixtures/tokenizers/corpus.txt
like make_tokenizer_fixtures.py's GPT-2-style one, with
  * bpe_digits: Sequence[Digits(individual_digits), ByteLevel] (SmolLM2's);
  * bpe_split: Sequence[Split(Llama 3's pattern, Isolated), ByteLevel(use_regex=False)] (Llama 3's);
  * bpe_qwen2: the same with Qwen2's pattern (digits one by one).
The GGUF forms of the last two (tokenizer.ggml.pre `llama-bpe` and `qwen2`) are checked against
the same ids.
Writes tests/fixtures/tokenizers/<name>/tokenizer.json and pretok_cases.json (each text of
make_tokenizer_fixtures.py's and a few with digits, the ids and the decode).

    build/peers-venv/bin/python tests/reference/make_pretokenizer_fixtures.py
"""
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from make_tokenizer_fixtures import CORPUS, ROOT, TEXTS

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
          r"\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
         r"\s+(?!\S)|\s+")
MORE = ["12345 + 678 = 13023", "pi is 3.14159265 and e 2.71828", "year 2024, 1st of Jan; ٣٤ and ५६७", "x1y22z333"]


def train(pre):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([CORPUS], trainer)
    return tok


def main():
    toks = {
        "bpe_digits": train(pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False)])),
        "bpe_split": train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
                                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])),
        "bpe_qwen2": train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
                                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])),
    }
    cases = {}
    for name, tok in toks.items():
        d = os.path.join(ROOT, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        cases[name] = [{"text": t, "ids": tok.encode(t).ids, "decoded": tok.decode(tok.encode(t).ids, skip_special_tokens=False)}
                       for t in TEXTS + MORE]
    with open(os.path.join(ROOT, "pretok_cases.json"), "w") as f:
        json.dump(cases, f, ensure_ascii=False, indent=0)


if __name__ == "__main__":
    main()
