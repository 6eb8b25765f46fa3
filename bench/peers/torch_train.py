"""One PyTorch training step of GPT-2 (forward, cross-entropy, backward, clipping at 1.0, AdamW),
timed in a process of its own so that its peak RSS is PyTorch's alone.

    torch_train.py CHECKPOINT_DIR TOKENS.npy TARGETS.npy THREADS REPEAT
prints one JSON line: {"ms": median step ms (after one warm step), "peak_bytes": ru_maxrss, "loss": first loss}.
"""
import json
import os
import resource
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np
import torch
from transformers import GPT2LMHeadModel


def main():
    gdir, tokf, tgtf, threads, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    tokens = torch.from_numpy(np.load(tokf).astype(np.int64))
    targets = torch.from_numpy(np.load(tgtf).astype(np.int64)).reshape(-1)
    model = GPT2LMHeadModel.from_pretrained(gdir, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0).train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": plain, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(tokens, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(targets.numel(), -1), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return float(loss)

    first = step()  # warm
    t = []
    for _ in range(repeat):
        a = time.perf_counter()
        step()
        t.append((time.perf_counter() - a) * 1e3)
    print(json.dumps({"ms": statistics.median(t), "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "loss": first}))


if __name__ == "__main__":
    main()
