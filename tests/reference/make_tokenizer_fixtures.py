#!/usr/bin/env python3
"""Tokenizer fixtures from Hugging Face `tokenizers`, for kiln's runtime tokenizers.

Trains, on the multilingual text tests/fixtures/tokenizers/corpus.txt, a GPT-2-style byte-level
BPE tokenizer and BERT-style WordPiece tokenizers (uncased, and cased without accent stripping),
saves each in the formats checkpoints ship (tokenizer.json; vocab.json + merges.txt; vocab.txt
+ tokenizer_config.json) and writes cases.json: for each tokenizer and each text, the ids that
`tokenizers` gives and the text it decodes them to.

    python3 -m venv build/fixture-venv && build/fixture-venv/bin/pip install tokenizers
    build/fixture-venv/bin/python tests/reference/make_tokenizer_fixtures.py

The fixtures are committed: the test suite needs no Python package.
"""
import json
import os

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "tokenizers")
CORPUS = os.path.join(ROOT, "corpus.txt")

TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "It's the model's context; we'll see, they've said, I'm sure, you'd know, don't.",
    "Le café est très chaud à Montréal. Ça va? Élève naïve cœur",
    "Straße, Größe, Bäcker. ÀÉÎÕÜ àéîõü ñ ç",
    "我们的编译器把模型变成一个可执行文件。",
    "日本語の文章とカタカナ。한국어 문장. مرحبا بالعالم",
    "Emoji 😀🚀🔥 👍🏽 👨‍👩‍👧 ❤️ 🇫🇷 unseen: 🦀🧪",
    "Numbers 0 1 42 3.14159 1,000,000 2e-5 0x1F 007 ١٢٣ ४५६ ½ ²",
    "runs   of    spaces     and\ttabs\t\there",
    "  leading spaces and trailing spaces   ",
    "line one\nline two\n\n\nafter blank lines\r\nwindows line\n",
    "   ",
    "\n",
    "a",
    "x->y && z || !w; sum += a[i] * b[i];",
    "https://example.org/path?q=1&r=2 user@example.com",
    "MiXeD CaSe WoRdS and UPPER lower",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "Zero\u200bwidth and soft\u00adhyphen and control\u0007bell",
    "Greek Καλημέρα κόσμε and Cyrillic Привет, мир!",
    "the the the and and ing tion",
    "<|endoftext|>",
    "before<|endoftext|>after the end",
    "[CLS] a masked [MASK] token [SEP]",
]


def train_bpe():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=400, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([CORPUS], trainer)
    return tok


def train_wordpiece(lowercase):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None if lowercase else False, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(vocab_size=480, min_frequency=2, limit_alphabet=200,
                                        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    tok.train([CORPUS], trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def main():
    cases = {}
    bpe = train_bpe()
    d = os.path.join(ROOT, "bpe")
    os.makedirs(d, exist_ok=True)
    bpe.save(os.path.join(d, "tokenizer.json"))
    bpe.model.save(d)  # vocab.json + merges.txt
    cases["bpe"] = [{"text": t, "ids": bpe.encode(t).ids, "decoded": bpe.decode(bpe.encode(t).ids, skip_special_tokens=False)}
                    for t in TEXTS]
    for name, lower in (("wordpiece", True), ("wordpiece_cased", False)):
        wp = train_wordpiece(lower)
        d = os.path.join(ROOT, name)
        os.makedirs(d, exist_ok=True)
        wp.save(os.path.join(d, "tokenizer.json"))
        wp.model.save(d)  # vocab.txt
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": lower, "strip_accents": None if lower else False,
                       "tokenize_chinese_chars": True}, f, indent=1)
        cases[name] = [{"text": t, "ids": wp.encode(t).ids,
                        "decoded": wp.decode(wp.encode(t).ids, skip_special_tokens=True)} for t in TEXTS]
    for name in cases:
        print(name, "vocab", {"bpe": bpe}.get(name, None) and bpe.get_vocab_size())
    with open(os.path.join(ROOT, "cases.json"), "w") as f:
        json.dump(cases, f, ensure_ascii=False, indent=0)


if __name__ == "__main__":
    main()
