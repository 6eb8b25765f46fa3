#!/usr/bin/env python3
"""./model --serve on GPT-2 (examples/gpt2: learned positions; the prompt prefilled through its
`extend` entry, one slot decoded with `decode`): the small gpt2_text model with random weights
and the BPE fixture's tokenizer. A greedy completion, whole and streamed, equals the
executable's own --prompt --generate answer.

  gpt2_serve_test.py GPT2_TEXT_EXE TOKENIZER_JSON WORKDIR
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading

EXE, TOKENIZER, WORK = sys.argv[1:4]
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def main():
    os.makedirs(WORK, exist_ok=True)
    weights = os.path.join(WORK, "model.safetensors")
    subprocess.run([EXE, "--random-weights", "--seed", "2", "--save-weights", weights, "--tokens", "1", "--quiet"], check=True,
                   capture_output=True)
    shutil.copyfile(TOKENIZER, os.path.join(WORK, "tokenizer.json"))
    prompt = "Le café est"
    want = subprocess.run([EXE, "--weights", weights, "--prompt", prompt, "--generate", "12", "--quiet"], capture_output=True,
                          text=True, check=True).stdout
    want = want[:-1] if want.endswith("\n") else want
    p = subprocess.Popen([EXE, "--weights", weights, "--serve", "--port", "0", "--threads", "2"], stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.search(r"serving on http://[0-9.]+:(\d+)", line)
    if not m:
        p.kill()
        sys.exit("the server did not start: " + line + p.stderr.read())
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    port = int(m.group(1))

    def post(body):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode()
    st, body = post({"prompt": prompt, "max_tokens": 12, "temperature": 0})
    got = json.loads(body)["choices"][0]["text"] if st == 200 else body
    check(st == 200 and got == want, "GPT-2: a greedy completion equals ./gpt2 --prompt's answer: %r vs %r" % (got, want))
    st, body = post({"prompt": prompt, "max_tokens": 12, "temperature": 0, "stream": True})
    text = "".join(json.loads(l[6:])["choices"][0]["text"] for l in body.splitlines()
                   if l.startswith("data: ") and l != "data: [DONE]")
    check(st == 200 and text == want and body.rstrip().endswith("data: [DONE]"), "GPT-2: streamed, the same text: %r" % text)
    p.send_signal(signal.SIGTERM)
    check(p.wait(timeout=60) == 0, "GPT-2: the server exits 0 on SIGTERM")
    print("%d failures" % len(FAILURES))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
