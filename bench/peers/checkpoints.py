#!/usr/bin/env python3
"""bench/peers/checkpoints.py: Hugging Face GPT-2 small and BERT-base checkpoints as users have
them (random weights, seed 0, written by transformers' save_pretrained), and their ONNX exports
(torch.onnx.export(..., dynamo=True)), under OUT (default build/peers).

    build/peers-venv/bin/python bench/peers/checkpoints.py [--out build/peers] [--no-onnx]
"""
import argparse
import os

import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel


def gpt2(out):
    path = os.path.join(out, "gpt2")
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config()).eval().save_pretrained(path)
    return path


def bert(out):
    path = os.path.join(out, "bert")
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        torch.manual_seed(0)
        BertModel(BertConfig(), add_pooling_layer=False).eval().save_pretrained(path)
    return path


class LogitsOnly(torch.nn.Module):
    def __init__(self, m, key):
        super().__init__()
        self.m, self.key = m, key

    def forward(self, ids):
        o = self.m(input_ids=ids, use_cache=False) if self.key == "logits" else self.m(input_ids=ids, token_type_ids=torch.zeros_like(ids))
        return getattr(o, self.key)


def export(model_dir, cls, key, out_file):
    if os.path.exists(out_file):
        return
    m = cls.from_pretrained(model_dir).eval()
    ids = torch.zeros(1, 16, dtype=torch.int64)
    seq = torch.export.Dim("L", min=2, max=1024)
    tmp = out_file + ".tmp"
    torch.onnx.export(LogitsOnly(m, key), (ids,), tmp, dynamo=True, dynamic_shapes={"ids": {1: seq}},
                      input_names=["ids"], output_names=["out"], external_data=False)
    os.replace(tmp, out_file)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="build/peers")
    ap.add_argument("--no-onnx", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    g, b = gpt2(a.out), bert(a.out)
    if not a.no_onnx:
        export(g, GPT2LMHeadModel, "logits", os.path.join(g, "model.onnx"))
        export(b, BertModel, "last_hidden_state", os.path.join(b, "model.onnx"))
    print("peers: checkpoints in", g, b)


if __name__ == "__main__":
    main()
