"""./model --serve on SmolLM2-135M-Instruct (its Q4_1 GGUF file, compiled with --batch 4): the
OpenAI-compatible endpoints with Python's standard library as the client.

    serve_test.py LLAMA_COMPILE GGUF WORK_DIR CACHE_DIR

Checked: greedy completions and chat completions, whole and streamed, equal the executable's own
--prompt / --chat answers; 8 concurrent clients with prompts of different lengths and different
max_tokens (greedy, and sampled with seeds) each receive exactly what they receive alone; a
repeated prompt reuses the slot's cache (usage.prompt_tokens_details.cached_tokens) with the same
answer; stop strings; every bad-input class (400), an unknown endpoint (404), a body over the
limit (413), a full queue (429 with Retry-After), the API key (401); a client that leaves
mid-stream frees its slot (/metrics); SIGTERM lets the running request finish and exits 0.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

LLAMA_COMPILE, GGUF, WORK, CACHE = sys.argv[1:5]
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def start(exe, *flags):
    p = subprocess.Popen([exe, "--weights", GGUF, "--serve", "--port", "0", "--threads", "2"] + list(flags),
                         stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.search(r"serving on http://[0-9.]+:(\d+)", line)
    if not m:
        p.kill()
        sys.exit("the server did not start: " + line + p.stderr.read())
    # Drain stderr in the background (the stop messages are read at the end).
    lines = []
    threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True).start()
    return p, int(m.group(1)), lines


def request(port, method, path, body=None, headers=None, raw=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, dict(r.getheaders()), text


def post(port, path, body, headers=None):
    status, hdrs, text = request(port, "POST", path, body, headers)
    try:
        return status, hdrs, json.loads(text)
    except ValueError:
        return status, hdrs, text


def stream(port, path, body, stop_after=None):
    """The events of a streamed request: (list of parsed chunks, saw [DONE])."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    chunks, done = [], False
    buf = b""
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        payload = line[6:]
        if payload == b"[DONE]":
            done = True
            break
        chunks.append(json.loads(payload))
        if stop_after is not None and len(chunks) >= stop_after:
            c.sock.close()  # the client leaves mid-stream
            return chunks, False
    c.close()
    return chunks, done


def metrics_after_cancel(port, cancelled):
    """/metrics once `cancelled` requests are counted cancelled and no slot is in use (or after 5 s),
    and whether that state was reached."""
    for _ in range(100):
        m = request(port, "GET", "/metrics")[2]
        if re.search(r"^kiln_slots_in_use 0$", m, re.M) and \
                re.search(r'kiln_requests_total\{outcome="cancelled"\} %d$' % cancelled, m, re.M):
            return m, True
        time.sleep(0.05)
    return m, False


def three_turns(port, headers=None):
    """A 3-turn chat, turn by turn (each turn's messages: the earlier turns and their answers):
    the answers and each turn's cached prompt tokens."""
    msgs = [{"role": "system", "content": "You answer in a few words."}]
    answers, cached = [], []
    for u in ["Name a colour.", "And another one?", "Which of the two is darker?"]:
        msgs.append({"role": "user", "content": u})
        st, _, r = post(port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 12, "temperature": 0}, headers)
        if st != 200:
            return None, None
        answers.append(r["choices"][0]["message"]["content"])
        cached.append(r["usage"]["prompt_tokens_details"]["cached_tokens"])
        msgs.append({"role": "assistant", "content": answers[-1]})
    return answers, cached


def cli(exe, *args):
    p = subprocess.run([exe, "--weights", GGUF, "--quiet", "--threads", "2"] + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("the executable failed: " + p.stderr)
    return p.stdout[:-1] if p.stdout.endswith("\n") else p.stdout


def main():
    os.makedirs(WORK, exist_ok=True)
    exe = os.path.join(WORK, "smollm-b4")
    subprocess.run([LLAMA_COMPILE, "--config", GGUF, "--ctx", "512", "--batch", "4", "--quiet", "--cache-dir", CACHE, "-o", exe],
                   check=True)
    prompts = ["The capital of France is", "Write a haiku about the sea.", "1, 2, 3, 4,",
               "Explain in one sentence why the sky is blue, and then say what colour the sun is at noon.",
               "def fibonacci(n):", "Once upon a time", "The three primary colours are", "Hello"]
    # The executable's own answers: greedy, 24 tokens.
    want_text = cli(exe, "--prompt", prompts[0], "--generate", "24")
    want_chat = cli(exe, "--chat", "--prompt", prompts[1], "--generate", "24")

    srv, port, lines = start(exe, "--slots", "4", "--max-queue", "16")
    status, _, body = request(port, "GET", "/health")
    check(status == 200, "GET /health is 200 once the weights are loaded")
    status, _, body = request(port, "GET", "/v1/models")
    check(status == 200 and json.loads(body)["data"][0]["object"] == "model", "GET /v1/models lists the model")

    # Completions and chat, whole and streamed, against the executable.
    st, _, r = post(port, "/v1/completions", {"model": "any", "prompt": prompts[0], "max_tokens": 24, "temperature": 0})
    check(st == 200 and r["choices"][0]["text"] == want_text,
          "a greedy completion equals ./model --prompt's answer: %r vs %r" % (r["choices"][0]["text"] if st == 200 else r, want_text))
    check(st == 200 and r["usage"]["completion_tokens"] == 24 and r["choices"][0]["finish_reason"] == "length",
          "usage counts 24 tokens, finish_reason length")
    st, _, r = post(port, "/v1/chat/completions", {"model": "any", "messages": [{"role": "user", "content": prompts[1]}],
                                                   "max_tokens": 24, "temperature": 0})
    got_chat = r["choices"][0]["message"]["content"] if st == 200 else r
    check(st == 200 and got_chat == want_chat, "a greedy chat completion equals ./model --chat's answer: %r vs %r" % (got_chat, want_chat))
    chunks, done = stream(port, "/v1/completions", {"prompt": prompts[0], "max_tokens": 24, "temperature": 0})
    check(done and "".join(c["choices"][0]["text"] for c in chunks) == want_text and chunks[-1]["choices"][0]["finish_reason"] == "length",
          "a streamed completion's chunks join to the same text, end with finish_reason and [DONE]")
    chunks, done = stream(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": prompts[1]}], "max_tokens": 24,
                                                        "temperature": 0, "stream_options": {"include_usage": True}})
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    check(done and text == want_chat and chunks[0]["choices"][0]["delta"].get("role") == "assistant" and
          chunks[-1]["usage"]["completion_tokens"] <= 24, "a streamed chat completion: role first, the same text, usage last")

    # Batching is exact: 16 clients at once (4 slots, 12 queued) get what each gets alone (greedy and seeded).
    reqs = []
    for i, p in enumerate(prompts):
        reqs.append({"prompt": p, "max_tokens": 8 + 3 * i, "temperature": 0})
        reqs.append({"prompt": p, "max_tokens": 20 - i, "temperature": 0.9, "top_p": 0.95, "seed": 100 + i})
    alone = [post(port, "/v1/completions", q)[2]["choices"][0]["text"] for q in reqs]
    together = [None] * len(reqs)

    def client(i):
        together[i] = post(port, "/v1/completions", reqs[i])[2]["choices"][0]["text"]
    ts = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    check(together == alone, "16 concurrent clients (different lengths and max_tokens, greedy and seeded) get their answers alone: %d of %d"
          % (sum(a == b for a, b in zip(together, alone)), len(alone)))

    # Prefix reuse: the same conversation again reuses the slot's cache, with the same answer.
    conv = {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": prompts[3]}],
            "max_tokens": 16, "temperature": 0}
    st1, _, r1 = post(port, "/v1/chat/completions", conv)
    st2, _, r2 = post(port, "/v1/chat/completions", conv)
    check(st1 == 200 and st2 == 200 and r2["usage"]["prompt_tokens_details"]["cached_tokens"] == r2["usage"]["prompt_tokens"] - 1
          and r1["choices"][0]["message"] == r2["choices"][0]["message"],
          "a repeated conversation reuses %s of %s prompt tokens, same answer" %
          (r2["usage"]["prompt_tokens_details"]["cached_tokens"] if st2 == 200 else "?", r2["usage"]["prompt_tokens"] if st2 == 200 else "?"))

    reuse_answers, reuse_cached = three_turns(port)
    check(reuse_cached is not None and reuse_cached[1] > 0 and reuse_cached[2] > reuse_cached[1],
          "a 3-turn chat reuses the cache of the turns before (cached prompt tokens per turn: %s)" % reuse_cached)

    # Stop strings: the text ends before the first one (matched across token boundaries).
    cut = want_text[len(want_text) // 2:len(want_text) // 2 + 3]
    st, _, r = post(port, "/v1/completions", {"prompt": prompts[0], "max_tokens": 24, "temperature": 0, "stop": ["\u2603", cut]})
    check(st == 200 and r["choices"][0]["text"] == want_text[:want_text.find(cut)] and r["choices"][0]["finish_reason"] == "stop",
          "a stop string %r ends the text before it, finish_reason stop" % cut)
    chunks, done = stream(port, "/v1/completions", {"prompt": prompts[0], "max_tokens": 24, "temperature": 0, "stop": cut})
    check(done and "".join(c["choices"][0]["text"] for c in chunks) == want_text[:want_text.find(cut)],
          "a stream holds back what may begin a stop string")

    # Bad input: 400 with an OpenAI-style error naming the problem.
    long_prompt = " ".join(["word"] * 600)
    for body, what, needle in [
            ("{not json", "malformed JSON", "not JSON"),
            ({"prompt": 5}, "a prompt of the wrong type", "'prompt' must be"),
            ({"prompt": "hi", "max_tokens": "many"}, "max_tokens of the wrong type", "'max_tokens' must be"),
            ({"prompt": long_prompt}, "a prompt longer than the context", "the context is 512"),
            ({"prompt": "hi", "max_tokens": 100000}, "max_tokens past the context", "leaves"),
            ({"prompt": "hi", "temperature": -1}, "a negative temperature", "'temperature' must be in"),
            ({"prompt": "hi", "n": 2}, "n > 1", "only n = 1"),
            ({"prompt": "hi", "logprobs": 3}, "logprobs", "logprobs are not supported"),
            ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}, "tools", "'tools' is not supported"),
            ({"messages": []}, "no messages", "'messages' must be"),
            ({"prompt": "hi", "stop": [1]}, "a stop of the wrong type", "'stop' must be")]:
        path = "/v1/chat/completions" if isinstance(body, dict) and "messages" in body else "/v1/completions"
        st, _, r = request(port, "POST", path, raw=body if isinstance(body, str) else json.dumps(body))
        err = json.loads(r).get("error", {}) if r.startswith("{") else {}
        check(st == 400 and needle in err.get("message", "") and err.get("type") == "invalid_request_error",
              "%s: 400 %r" % (what, err.get("message", r)[:100]))
    st, _, r = request(port, "GET", "/v1/nothing")
    check(st == 404, "an unknown endpoint is 404")
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # the headers of a 2 MiB body, then the answer
    c.putrequest("POST", "/v1/completions")
    c.putheader("Content-Length", str(2 << 20))
    c.endheaders()
    r = c.getresponse()
    check(r.status == 413 and "exceeds" in r.read().decode(), "a body over the limit (1 MiB) is 413, before it is read")
    c.close()

    # A client that leaves mid-stream frees its slot.
    chunks, _ = stream(port, "/v1/completions", {"prompt": prompts[5], "max_tokens": 400, "temperature": 0}, stop_after=3)
    m, freed = metrics_after_cancel(port, 1)
    check(freed, "a client gone mid-stream cancels its sequence: its slot is free (/metrics)")
    # A client that leaves while it waits for a whole (not streamed) response cancels it too.
    sk = socket.create_connection(("127.0.0.1", port))
    body = json.dumps({"prompt": prompts[5], "max_tokens": 400, "temperature": 0}).encode()
    sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
               % len(body) + body)
    time.sleep(0.5)
    sk.close()
    m, freed = metrics_after_cancel(port, 2)
    check(freed, "a client gone before its whole response cancels its sequence: its slot is free (/metrics)")
    check("kiln_time_to_first_token_seconds_bucket" in m and "kiln_inter_token_latency_seconds_count" in m,
          "/metrics has the latency histograms")

    # SIGTERM during a request: it finishes, the server exits 0.
    result = {}
    t = threading.Thread(target=lambda: result.update(r=post(port, "/v1/completions", {"prompt": prompts[2], "max_tokens": 48,
                                                                                       "temperature": 0})))
    t.start()
    time.sleep(0.5)
    srv.send_signal(signal.SIGTERM)
    t.join()
    code = srv.wait(timeout=60)
    check(code == 0 and result.get("r", (0,))[0] == 200 and result["r"][2]["usage"]["completion_tokens"] == 48,
          "SIGTERM: the running request completes (48 tokens), exit %s" % code)

    # A queue of one behind one slot: the third request is 429 with Retry-After; the API key.
    srv, port, lines = start(exe, "--slots", "1", "--max-queue", "1", "--api-key", "sekret", "--no-prefix-reuse")
    auth = {"Authorization": "Bearer sekret"}
    st, _, r = post(port, "/v1/completions", {"prompt": "hi", "max_tokens": 2})
    check(st == 401, "no API key: 401")
    st, _, r = post(port, "/v1/completions", {"prompt": "hi", "max_tokens": 2}, {"Authorization": "Bearer wrong"})
    check(st == 401, "a wrong API key: 401")
    # The same 3-turn chat without prefix reuse (every prompt prefilled whole): the same answers.
    answers, cached = three_turns(port, auth)
    check(answers == reuse_answers and cached == [0, 0, 0],
          "the 3-turn chat without prefix reuse: the same answers %s, nothing cached (%s)" % (answers, cached))
    outs = [None] * 3

    def slow(i):
        outs[i] = post(port, "/v1/completions", {"prompt": prompts[2], "max_tokens": 200, "temperature": 0}, auth)
    ts = []
    for i in range(3):
        ts.append(threading.Thread(target=slow, args=(i,)))
        ts[-1].start()
        time.sleep(0.2)
    [t.join() for t in ts]
    codes = sorted(o[0] for o in outs)
    check(codes == [200, 200, 429] and any("Retry-After" in o[1] for o in outs if o[0] == 429),
          "one slot and a queue of one: 200, 200 and 429 with Retry-After (%s)" % codes)
    srv.send_signal(signal.SIGTERM)
    check(srv.wait(timeout=60) == 0, "the second server exits 0 on SIGTERM")

    print("%d failures" % len(FAILURES))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
