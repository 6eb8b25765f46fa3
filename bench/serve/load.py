#!/usr/bin/env python3
"""bench/serve/load.py: kiln's OpenAI-compatible server under load, against llama.cpp's own
llama-server, in one run on this machine (never run by ./test.sh; bench/serve/setup.sh builds
llama-server and installs the openai client first).

Phases (--phases, default all, in this order):
  openai  the official `openai` Python client against kiln's server: completions and chat,
          whole and streamed, greedy: each answer equals the executable's --prompt / --chat one.
  load    SmolLM2-135M-Instruct (Q4_1 GGUF), 2 threads, context 1024 per sequence, loopback,
          streaming /v1/completions, prompts of 32-512 tokens drawn from a fixed seeded set,
          max_tokens 64, greedy: 1, 4, 16 and 64 concurrent clients for --duration s each, on
          kiln (--slots 16 --max-queue 64) then on llama-server (--parallel 16, continuous
          batching, the same GGUF, threads and context per sequence). Requests/s, generated
          tokens/s, time to first token and inter-token latency p50/p99, failed requests, 429s.
  soak    16 clients for --soak s on kiln: the server's RSS at the start and the end, failures.
  faults  on kiln under 16 clients' load: clients that leave mid-stream (their slots free, by
          /metrics), --malformed malformed requests (the server answers each and stays up),
          then SIGTERM: every response already begun completes, the server exits 0.

Each figure names the machine: the CPU model, the FMA peak and read bandwidth `kiln-bench --peak`
measures in the same run. Results: a table on stdout and --out (JSON).

  build/peers-venv/bin/python bench/serve/load.py [--duration 60] [--soak 600] [--phases load]
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")
GGUF = os.path.join(BUILD, "models", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
LLAMA_SERVER = os.path.join(BUILD, "llama-server", "bin", "llama-server")
THREADS = 2
CTX = 1024
SLOTS = 16
MAX_QUEUE = 64
MAX_TOKENS = 64

# The prompts' words: a fixed list, so that the set (seeded) is the same on every machine.
WORDS = """the of and to in is was for that on as with by he at from his an were are which this be
or have had not but one all their they first new time two been more its who has after would there
year when where between about during city world people music state part season made family work
river team known film early under school history water system light story house small great many
life used number name public line program later several second three however high series game
country government while group called until own station band began found album power land company
through played each well including most form since being book long area south north east west old
place local order major building home king field park court art war end road market church army
point member body village club style player period human language design space energy mountain
island forest garden ocean bridge engine paper letter window memory signal kernel compiler thread
cache vector matrix tensor token model layer weight""".split()


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    out = subprocess.run([os.path.join(BUILD, "bin", "kiln-bench"), "--peak"], capture_output=True, text=True)
    m = re.search(r"measured on (\d+) cores: FMA peak ([0-9.]+) GFLOP/s.*read bandwidth ([0-9.]+) GB/s", out.stdout + out.stderr)
    return {"cpu": cpu, "cores": int(m.group(1)) if m else os.cpu_count(), "fma_peak_gflops": float(m.group(2)) if m else None,
            "read_bandwidth_gbs": float(m.group(3)) if m else None}


def prompts(n=256, seed=1234):
    """n prompts of about 32-512 tokens (a word of this list is 1.1 tokens on average), seeded."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = int(rng.uniform(32, 512) / 1.1)
        text = []
        while len(text) < words:
            sentence = [rng.choice(WORDS) for _ in range(rng.randint(5, 14))]
            sentence[0] = sentence[0].capitalize()
            text += sentence[:-1] + [sentence[-1] + "."]
        out.append(" ".join(text[:words]))
    return out


# ----------------------------------------------------------------------------- servers
def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_health(port, proc, timeout=300):
    t = time.time()
    while time.time() - t < timeout:
        if proc.poll() is not None:
            sys.exit("the server exited (%s) before it was ready" % proc.returncode)
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("the server on port %d was not ready in %d s" % (port, timeout))


def compile_kiln(work):
    exe = os.path.join(work, "smollm-b%d" % SLOTS)
    if not os.path.exists(exe):
        subprocess.run([os.path.join(BUILD, "bin", "llama-compile"), "--config", GGUF, "--ctx", str(CTX), "--batch", str(SLOTS),
                        "--quiet", "-o", exe], check=True)
    return exe


def start_kiln(exe, *extra):
    port = free_port()
    p = subprocess.Popen([exe, "--weights", GGUF, "--threads", str(THREADS), "--serve", "--port", str(port), "--slots", str(SLOTS),
                          "--max-queue", str(MAX_QUEUE)] + list(extra), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()  # drain
    wait_health(port, p)
    return p, port


def start_llama_server():
    port = free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(LLAMA_SERVER))
    # --parallel 16 slots of CTX tokens each: a context of 16 x CTX (split over the slots).
    p = subprocess.Popen([LLAMA_SERVER, "-m", GGUF, "--host", "127.0.0.1", "--port", str(port), "-t", str(THREADS), "-tb", str(THREADS),
                          "-c", str(CTX * SLOTS), "--parallel", str(SLOTS), "--cont-batching", "--no-webui"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    wait_health(port, p)
    return p, port


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# ----------------------------------------------------------------------------- one request
class Result:
    __slots__ = ("status", "ttft", "itl", "tokens", "prompt_tokens", "done", "error", "t_end")

    def __init__(self):
        self.status, self.ttft, self.itl, self.tokens, self.prompt_tokens = 0, None, [], 0, 0
        self.done, self.error, self.t_end = False, "", 0.0


def stream_request(port, prompt, max_tokens=MAX_TOKENS, leave_after=None, timeout=600):
    """One streamed /v1/completions: its status, time to first token, inter-token gaps, tokens.
    leave_after: close the connection after that many chunks (a client that leaves)."""
    r = Result()
    body = json.dumps({"model": "smollm2", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = c.getresponse()
        r.status = resp.status
        if resp.status != 200:
            r.error = resp.read().decode(errors="replace")[:200]
            c.close()
            return r
        last, chunks = None, 0
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                r.done = True
                break
            j = json.loads(data)
            if "error" in j:
                r.error = str(j["error"])[:200]
                break
            if j.get("usage"):
                r.tokens = j["usage"].get("completion_tokens", r.tokens)
                r.prompt_tokens = j["usage"].get("prompt_tokens", 0)
            if j.get("choices") and j["choices"][0].get("text"):
                now = time.perf_counter()
                if last is None:
                    r.ttft = now - t0
                else:
                    r.itl.append(now - last)
                last = now
                chunks += 1
                if leave_after is not None and chunks >= leave_after:
                    c.sock.shutdown(socket.SHUT_RDWR)
                    c.close()
                    return r
        if not r.tokens:
            r.tokens = chunks
        c.close()
    except (OSError, http.client.HTTPException, ValueError) as e:
        r.error = "%s: %s" % (type(e).__name__, e)
    r.t_end = time.perf_counter()
    return r


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run_load(port, clients, duration, prompt_set, seed, leavers=0):
    """`clients` threads stream requests back to back for `duration` s (a 429 waits its
    Retry-After); requests begun by then finish. Returns the summary and the results."""
    results, lock = [], threading.Lock()
    t_start = time.perf_counter()
    deadline = t_start + duration

    def client(i, leave):
        rng = random.Random(seed * 1000 + i)
        while time.perf_counter() < deadline:
            r = stream_request(port, rng.choice(prompt_set), leave_after=2 if leave else None)
            with lock:
                results.append((leave, r))
            if r.status == 429:
                time.sleep(1)
    ts = [threading.Thread(target=client, args=(i, i >= clients)) for i in range(clients + leavers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - t_start
    ok = [r for leave, r in results if not leave and r.status == 200 and r.done and not r.error]
    failed = [r for leave, r in results if not leave and r.status not in (200, 429) or (r.status == 200 and not leave and not r.done)]
    rejected = [r for leave, r in results if r.status == 429]
    ttft = [r.ttft for r in ok if r.ttft is not None]
    itl = [g for r in ok for g in r.itl]
    tokens = sum(r.tokens for r in ok)
    summary = {"clients": clients, "seconds": round(elapsed, 1), "requests": len(ok), "requests_per_s": len(ok) / elapsed,
               "generated_tokens": tokens, "tokens_per_s": tokens / elapsed,
               "prompt_tokens_mean": statistics.mean(r.prompt_tokens for r in ok) if ok else 0,
               "ttft_p50_s": pct(ttft, 50), "ttft_p99_s": pct(ttft, 99), "itl_p50_s": pct(itl, 50), "itl_p99_s": pct(itl, 99),
               "failed": len(failed), "rejected_429": len(rejected),
               "failures": sorted({(r.status, r.error[:120]) for r in failed})[:5]}
    return summary, results


def row(name, s):
    f = lambda v, k=1e3: "%.0f" % (v * k) if v is not None else "-"
    return ("%-12s %3d %6.2f %7.1f %6.0f %7s %7s %6s %6s %4d %4d" %
            (name, s["clients"], s["requests_per_s"], s["tokens_per_s"], s["prompt_tokens_mean"], f(s["ttft_p50_s"]),
             f(s["ttft_p99_s"]), f(s["itl_p50_s"]), f(s["itl_p99_s"]), s["failed"], s["rejected_429"]))


HEADER = "%-12s %3s %6s %7s %6s %7s %7s %6s %6s %4s %4s" % ("server", "cli", "req/s", "tok/s", "prompt", "ttft50", "ttft99",
                                                             "itl50", "itl99", "fail", "429")


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    return c.getresponse().read().decode()


def metric(text, name):
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else None


# ----------------------------------------------------------------------------- phases
def phase_openai(exe, report):
    import openai
    quiet = ["--weights", GGUF, "--quiet", "--threads", str(THREADS)]

    def cli(*args):
        p = subprocess.run([exe] + quiet + list(args), capture_output=True, text=True, check=True)
        return p.stdout[:-1] if p.stdout.endswith("\n") else p.stdout
    cases = [("completion", "The capital of France is"), ("completion", "def fibonacci(n):"),
             ("chat", "What is the capital of France? Answer in one sentence."), ("chat", "Write a haiku about the sea.")]
    want = {(k, p): cli("--prompt", p, "--generate", "32") if k == "completion" else cli("--chat", "--prompt", p, "--generate", "32")
            for k, p in cases}
    proc, port = start_kiln(exe)
    client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="unused")
    checks = []
    try:
        for kind, p in cases:
            for streamed in (False, True):
                if kind == "completion":
                    if streamed:
                        got = "".join(ch.choices[0].text for ch in client.completions.create(
                            model="smollm2", prompt=p, max_tokens=32, temperature=0, stream=True) if ch.choices)
                    else:
                        got = client.completions.create(model="smollm2", prompt=p, max_tokens=32, temperature=0).choices[0].text
                else:
                    msgs = [{"role": "user", "content": p}]
                    if streamed:
                        got = "".join(ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
                            model="smollm2", messages=msgs, max_tokens=32, temperature=0, stream=True) if ch.choices)
                    else:
                        got = client.chat.completions.create(model="smollm2", messages=msgs, max_tokens=32,
                                                             temperature=0).choices[0].message.content
                same = got == want[(kind, p)]
                checks.append({"kind": kind, "prompt": p, "stream": streamed, "same": same})
                print("openai: %-10s %-6s %s %r" % (kind, "stream" if streamed else "whole", "same as the executable" if same else
                                                     "DIFFERS from %r:" % want[(kind, p)], got[:60]), flush=True)
        try:  # a refused field is an openai.BadRequestError naming it
            client.completions.create(model="smollm2", prompt="x", max_tokens=2, n=2)
            refused = False
        except openai.BadRequestError as e:
            refused = "n" in str(e)
        checks.append({"kind": "n=2 refused", "same": refused})
        print("openai: n=2 is refused with BadRequestError: %s" % refused)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    report["openai"] = {"version": openai.__version__, "checks": checks, "all_same": all(c["same"] for c in checks)}


def phase_load(exe, report, a, prompt_set):
    levels = [int(x) for x in a.levels.split(",")]
    out = {"kiln": [], "llama-server": []}
    print(HEADER + "   (ms for ttft/itl; prompt: mean prompt tokens)", flush=True)
    for name in ("kiln", "llama-server"):
        if name == "llama-server" and not os.path.exists(LLAMA_SERVER):
            print("load: %s is not built (bench/serve/setup.sh): its rows are left out" % LLAMA_SERVER, flush=True)
            continue
        proc, port = start_kiln(exe) if name == "kiln" else start_llama_server()
        try:
            run_load(port, 2, 5, prompt_set, seed=99)  # warm-up
            for n in levels:
                s, _ = run_load(port, n, a.duration, prompt_set, seed=n)
                out[name].append(s)
                print(row(name, s), flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    ratios = {}
    for k, l in zip(out["kiln"], out["llama-server"]):
        ratios[k["clients"]] = {"tokens_per_s": k["tokens_per_s"] / l["tokens_per_s"] if l["tokens_per_s"] else None,
                                "ttft_p99": l["ttft_p99_s"] / k["ttft_p99_s"] if k["ttft_p99_s"] and l["ttft_p99_s"] else None}
        print("ratio at %2d clients: kiln's tokens/s %.2fx llama-server's; p99 TTFT llama-server/kiln %.2fx" %
              (k["clients"], ratios[k["clients"]]["tokens_per_s"] or 0, ratios[k["clients"]]["ttft_p99"] or 0), flush=True)
    out["ratios"] = ratios
    report["load"] = out


def phase_soak(exe, report, a, prompt_set):
    proc, port = start_kiln(exe)
    try:
        run_load(port, 2, 5, prompt_set, seed=98)
        samples = [(0, rss_kib(proc.pid))]
        t0 = time.time()
        done = threading.Event()

        def sample():
            while not done.wait(10):
                samples.append((round(time.time() - t0), rss_kib(proc.pid)))
        th = threading.Thread(target=sample)
        th.start()
        s, _ = run_load(port, 16, a.soak, prompt_set, seed=7)
        done.set()
        th.join()
        samples.append((round(time.time() - t0), rss_kib(proc.pid)))
        m = metrics(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    print("soak: %d s at 16 clients: %d requests, %.1f tokens/s, %d failed; RSS %.1f MiB at the start, %.1f MiB at the end "
          "(max %.1f); slots in use after: %s" % (a.soak, s["requests"], s["tokens_per_s"], s["failed"], samples[0][1] / 1024,
                                                  samples[-1][1] / 1024, max(x[1] for x in samples) / 1024,
                                                  metric(m, "kiln_slots_in_use")), flush=True)
    report["soak"] = {"summary": s, "rss_kib": samples, "slots_in_use_after": metric(m, "kiln_slots_in_use")}


def malformed(n, seed=5):
    """n malformed requests (raw bytes): broken JSON, wrong types, bad values, broken HTTP."""
    rng = random.Random(seed)
    good = {"prompt": "Hello there", "max_tokens": 4, "temperature": 0}
    bodies = []
    fields = ["prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream", "n", "messages", "logprobs"]
    values = [None, -1, 0, 1e308, -1e308, "x", "", [], {}, [1, "a"], True, 2 ** 63, -2 ** 63, 3.5, [-5], [10 ** 9], "\udcff",
              ["a"] * 100, {"role": 1}, [{"role": "user"}], [{"content": "x"}], "\u0000"]
    for i in range(n):
        kind = i % 6
        path = rng.choice(["/v1/completions", "/v1/chat/completions"])
        if kind == 0:  # broken JSON
            s = json.dumps(good)
            cut = rng.randrange(1, len(s))
            body = (s[:cut] + rng.choice(["", "}", "]", "\"", "\\", "\x00", "{"]) + s[cut + 1:]).encode()
        elif kind == 1:  # a field of a wrong type or value
            b = dict(good)
            b[rng.choice(fields)] = rng.choice(values)
            body = json.dumps(b).encode()
        elif kind == 2:  # random bytes
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
        elif kind == 3:  # not an object
            body = json.dumps(rng.choice([[], 1, "x", None, [good]])).encode()
        elif kind == 4:  # several fields at once
            b = {rng.choice(fields): rng.choice(values) for _ in range(rng.randrange(1, 5))}
            body = json.dumps(b).encode()
        else:  # broken HTTP: a bad request line, a wrong Content-Length, a bad method
            raw = rng.choice([b"GARBAGE\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 99\r\n\r\n{}",
                              b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                              b"PUT /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
                              b"POST /v1/completions HTTP/9.9\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
                              b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"])
            bodies.append(raw)
            continue
        bodies.append(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                      % (path.encode(), len(body)) + body)
    return bodies


def send_raw(port, raw, timeout=30):
    """The status line's code, 0 when the server closed without one (broken HTTP)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        data = b""
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.1 (\d+)", data)
    return int(m.group(1)) if m else 0


def phase_faults(exe, report, a, prompt_set):
    out = {}
    proc, port = start_kiln(exe)
    try:
        # 16 clients' load, 4 more that leave after 2 chunks, over and over.
        s, results = run_load(port, 16, a.fault_seconds, prompt_set, seed=11, leavers=4)
        left = sum(1 for leave, r in results if leave and r.status == 200)
        for _ in range(100):
            m = metrics(port)
            if metric(m, "kiln_slots_in_use") == 0:
                break
            time.sleep(0.1)
        cancelled = int(re.search(r'kiln_requests_total\{outcome="cancelled"\} (\d+)', m).group(1))
        out["leavers"] = {"left_mid_stream": left, "cancelled_by_metrics": cancelled, "slots_in_use_after": metric(m, "kiln_slots_in_use"),
                          "load_failed": s["failed"]}
        print("faults: %d clients left mid-stream; /metrics: %d cancelled, %s slots in use after; the load's failures: %d" %
              (left, cancelled, metric(m, "kiln_slots_in_use"), s["failed"]), flush=True)
        # Malformed requests while 16 clients stream.
        bg = threading.Thread(target=lambda: run_load(port, 16, a.fault_seconds, prompt_set, seed=12))
        bg.start()
        codes = {}
        for raw in malformed(a.malformed):
            c = send_raw(port, raw)
            codes[c] = codes.get(c, 0) + 1
        bg.join()
        alive = proc.poll() is None
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/health")
        healthy = c.getresponse().status == 200
        out["malformed"] = {"requests": a.malformed, "statuses": {str(k): v for k, v in sorted(codes.items())}, "alive": alive,
                            "health_after": healthy}
        print("faults: %d malformed requests during load: statuses %s (0: no answer: the request ended before its body, and the server closed); "
              "the server is up: %s, /health 200: %s" % (a.malformed, dict(sorted(codes.items())), alive, healthy), flush=True)
        # SIGTERM under load: every response begun completes; new ones are refused; exit 0.
        results, lock = [], threading.Lock()
        t_end = time.perf_counter() + 30

        def client(i):
            rng = random.Random(500 + i)
            while time.perf_counter() < t_end:
                r = stream_request(port, rng.choice(prompt_set))
                with lock:
                    results.append(r)
                if r.status == 0 and r.error:  # refused: the server stopped accepting
                    return
        ts = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in ts:
            t.start()
        time.sleep(8)
        t_sig = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
        t_exit = time.perf_counter() - t_sig
        for t in ts:
            t.join()
        begun = [r for r in results if r.status == 200]
        lost = [r for r in begun if not r.done]
        out["sigterm"] = {"exit": code, "seconds_to_exit": round(t_exit, 2), "responses_begun": len(begun), "begun_not_completed": len(lost),
                          "refused": sum(1 for r in results if r.status != 200)}
        print("faults: SIGTERM under 16 clients: exit %d after %.1f s; %d responses begun, %d of them not completed; %d refused after" %
              (code, t_exit, len(begun), len(lost), out["sigterm"]["refused"]), flush=True)
    finally:
        if proc.poll() is None:
            proc.kill()
    report["faults"] = out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phases", default="openai,load,soak,faults")
    ap.add_argument("--duration", type=float, default=60, help="seconds per load level")
    ap.add_argument("--levels", default="1,4,16,64")
    ap.add_argument("--soak", type=float, default=600, help="seconds of the soak")
    ap.add_argument("--fault-seconds", type=float, default=20)
    ap.add_argument("--malformed", type=int, default=1000)
    ap.add_argument("--out", default=os.path.join(BUILD, "bench", "serve", "results.json"))
    a = ap.parse_args()
    if not os.path.exists(GGUF):
        sys.exit("%s is missing: scripts/fetch_models.sh fetches it" % GGUF)
    work = os.path.join(BUILD, "bench", "serve")
    os.makedirs(work, exist_ok=True)
    report = {"machine": machine(), "script": "bench/serve/load.py", "threads": THREADS, "ctx": CTX, "slots": SLOTS,
              "max_tokens": MAX_TOKENS, "duration_s": a.duration}
    mc = report["machine"]
    print("machine: %s, %d cores, FMA peak %s GFLOP/s, read bandwidth %s GB/s (kiln-bench --peak, this run)" %
          (mc["cpu"], mc["cores"], mc["fma_peak_gflops"], mc["read_bandwidth_gbs"]), flush=True)
    exe = compile_kiln(work)
    prompt_set = prompts()
    phases = a.phases.split(",")
    if "openai" in phases:
        phase_openai(exe, report)
    if "load" in phases:
        phase_load(exe, report, a, prompt_set)
    if "soak" in phases:
        phase_soak(exe, report, a, prompt_set)
    if "faults" in phases:
        phase_faults(exe, report, a, prompt_set)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, a.out)
    print("results: %s" % a.out)


if __name__ == "__main__":
    main()
