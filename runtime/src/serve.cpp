// serve.cpp - ./model --serve: an OpenAI-compatible HTTP server over the compiled model.
//
// Endpoints: POST /v1/completions and /v1/chat/completions (whole, or streamed as server-sent
// events), GET /v1/models, /health and /metrics (Prometheus text). HTTP is Boost.Beast over
// Asio (header-only: the executable keeps its libc/libstdc++/libm/pthread dependencies), one
// thread per connection; JSON is nlohmann-json.
//
// Continuous batching: one engine thread owns the session. Requests wait in a queue of at most
// --max-queue (429 beyond it) until a cache slot is free (--slots, at most the model's compiled
// batch bound). Each engine iteration runs at most one prompt chunk (--chunk tokens of one
// request, through the extend entry at that slot's past: a long prompt never holds the running
// streams for more than one chunk), then one decode step of every sequence that is generating
// (decode_batch: row r its own token, past and cache slot; a model without it decodes one slot
// through decode). A slot is freed the step its sequence ends: a stop token, a stop string,
// max_tokens, the context, or its client gone (a failed write of its stream).
//
// Prefix reuse: a freed slot keeps the ids its cache holds; a new request takes the free slot
// whose ids share the longest prefix with its prompt and prefills only the rest (at least one
// token runs, for the first logits); usage.prompt_tokens_details.cached_tokens says how many.
//
// Text: each token's piece (kilnrt_tokenizer_piece: the pieces concatenated are the decode) is
// appended to the sequence's bytes; a stream sends only whole UTF-8 characters and holds back
// the bytes that may begin a stop string. The tokenizer is used under one mutex (its calls
// return views of its own buffers).
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "cli.h"

namespace kilnrt {
namespace {
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

int64_t now_ns() { return kilnrt_time_now_ns(); }

// An error with its HTTP status, OpenAI's error body.
struct HttpError {
  int status;
  std::string message, type, param;
  HttpError(int st, std::string msg, std::string ty = "invalid_request_error", std::string p = "")
      : status(st), message(std::move(msg)), type(std::move(ty)), param(std::move(p)) {}
};

// What the engine tells a request's connection.
struct Event {
  std::string text;    // new text
  bool done = false;   // the last event
  std::string finish;  // "stop", "length" or "cancelled" (done)
  std::string error;   // set when the request failed (done)
  Event(std::string t = "") : text(std::move(t)) {}
};

struct Request {
  // Set by the connection before it is queued.
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
  kilnrt_generate_options sampling{};
  uint64_t rng = 0;
  std::vector<std::string> stops;
  int64_t enqueued_ns = 0;
  // The channel: written by the engine, read by the connection.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Event> events;
  std::atomic<bool> cancelled{false};
  // Usage, final once `done` is delivered.
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  void push(Event e) {
    {
      std::lock_guard<std::mutex> g(mu);
      events.push_back(std::move(e));
    }
    cv.notify_one();
  }
  Event pop() {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return !events.empty(); });
    Event e = std::move(events.front());
    events.pop_front();
    return e;
  }
  // The next event, or none after `wait`.
  std::optional<Event> pop_for(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> g(mu);
    if (!cv.wait_for(g, wait, [&] { return !events.empty(); })) return std::nullopt;
    Event e = std::move(events.front());
    events.pop_front();
    return e;
  }
};

// Whether the peer of a connection that sent nothing more has closed it (a client that gave up
// on a whole response: its request is cancelled, as a stream's is when a write fails).
bool peer_closed(int fd) {
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// A Prometheus histogram of seconds.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  double sum = 0;
  uint64_t n = 0;
  explicit Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size(), 0) {}
  void add(double s) {
    for (size_t i = 0; i < bounds.size(); ++i)
      if (s <= bounds[i]) ++counts[i];
    sum += s;
    ++n;
  }
  void print(std::string &out, const char *name, const char *help) const {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
    for (size_t i = 0; i < bounds.size(); ++i) {
      char b[32];
      snprintf(b, sizeof b, "%g", bounds[i]);
      out += std::string(name) + "_bucket{le=\"" + b + "\"} " + std::to_string(counts[i]) + "\n";
    }
    out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(n) + "\n";
    out += std::string(name) + "_sum " + std::to_string(sum) + "\n" + name + "_count " + std::to_string(n) + "\n";
  }
};

// The longest tail of `text` that begins one of `stops` (those bytes may still become a stop).
size_t stopPrefixTail(const std::string &text, const std::vector<std::string> &stops) {
  size_t best = 0;
  for (const std::string &s : stops)
    for (size_t k = std::min(s.size() - 1, text.size()); k > best; --k)
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        best = k;
        break;
      }
  return best;
}
// The end of the last whole UTF-8 character of `s` (an incomplete one at the end is held back).
size_t utf8Whole(const std::string &s) {
  size_t n = s.size(), i = n;
  for (int back = 0; i > 0 && back < 4; ++back) {
    unsigned char c = (unsigned char)s[i - 1];
    if ((c & 0xC0) != 0x80) {  // a lead byte (or ASCII) at i - 1
      size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      return n - (i - 1) >= need ? n : i - 1;
    }
    --i;
  }
  return n;
}

// The engine: owns the session; one thread.
struct Engine {
  kilnrt_session *s;
  const kiln_model_info &m;
  kilnrt_tokenizer *tok;
  std::mutex &tok_mu;
  const kiln_entry_info *extend = nullptr, *batch = nullptr, *single = nullptr;
  std::string chunkIn, slotIn, pastIn = "past", tokB, pastB, slotsB, tokS = "token", pastS = "past";
  std::string extendOut, batchOut, singleOut;
  int64_t context = 0, chunk = 256, vocab = 0;
  int nslots = 1;
  std::vector<int32_t> stopIds;
  struct Slot {
    std::shared_ptr<Request> req;
    std::vector<int32_t> cache;  // the ids whose keys and values the slot's cache holds
    size_t prefilled = 0;        // of req->prompt
    bool decoding = false;
    int32_t next = 0;            // the token the next decode step feeds
    std::string text;            // the generated bytes (stop strings cut)
    size_t sent = 0;             // bytes of text sent
    int64_t last_ns = 0;         // the previous token's time (inter-token latency)
  };
  std::vector<Slot> slots;
  // The queue, shared with the connections.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Request>> queue;
  size_t max_queue = 64;
  bool stopping = false;
  bool reuse = true;  // prefix reuse (--no-prefix-reuse: off)
  std::atomic<int> in_use{0};  // slots holding a request (read by /metrics)
  // Metrics (under mu).
  uint64_t ok = 0, failed = 0, cancelled = 0, rejected = 0, prompt_total = 0, generated_total = 0, cached_total = 0;
  Histogram ttft{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}}, itl{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}};

  Engine(kilnrt_session *s_, const kiln_model_info &m_, kilnrt_tokenizer *t, std::mutex &tm)
      : s(s_), m(m_), tok(t), tok_mu(tm) {}

  size_t active() const {
    size_t n = 0;
    for (const Slot &sl : slots) n += sl.req != nullptr;
    return n;
  }

  // 0 once queued, else the HTTP status that refuses it: 429 (the queue is full), 503 (the server stops).
  int submit(std::shared_ptr<Request> r) {
    {
      std::lock_guard<std::mutex> g(mu);
      if (stopping || queue.size() >= max_queue) {
        ++rejected;
        return stopping ? 503 : 429;
      }
      r->enqueued_ns = now_ns();
      queue.push_back(std::move(r));
    }
    cv.notify_one();
    return 0;
  }

  void set(const std::string &name, const std::vector<int32_t> &v) {
    kilnrt_tensor t{KILN_I32, 1, {(int64_t)v.size()}, const_cast<int32_t *>(v.data())};
    if (kilnrt_status st = kilnrt_session_set_input(s, name.c_str(), &t))
      throw std::runtime_error("input '" + name + "': " + kilnrt_last_error() + " (status " + std::to_string(st) + ")");
  }
  const float *run(const kiln_entry_info *e, const std::string &out, int64_t *vocab) {
    if (kilnrt_session_run(s, e->name)) throw std::runtime_error(std::string("entry '") + e->name + "': " + kilnrt_last_error());
    const kilnrt_tensor *t;
    if (kilnrt_session_output(s, out.c_str(), &t)) throw std::runtime_error(kilnrt_last_error());
    *vocab = t->shape[t->rank - 1];
    return (const float *)t->data;
  }

  void finish(Slot &sl, const std::string &reason, const std::string &error = "") {
    std::shared_ptr<Request> r = sl.req;
    if (error.empty() && sl.sent < sl.text.size()) r->push({sl.text.substr(sl.sent)});
    {
      std::lock_guard<std::mutex> g(mu);
      if (!error.empty()) ++failed;
      else if (r->cancelled) ++cancelled;
      else ++ok;
      prompt_total += (uint64_t)r->prompt_tokens;
      generated_total += (uint64_t)r->completion_tokens;
      cached_total += (uint64_t)r->cached_tokens;
    }
    Event e;
    e.done = true;
    e.finish = reason;
    e.error = error;
    r->push(e);
    sl.req.reset();
    sl.decoding = false;
    --in_use;
  }

  // A sampled token of slot `sl`: its text, and whether the sequence goes on.
  void accept(Slot &sl, int32_t token) {
    Request &r = *sl.req;
    int64_t t = now_ns();
    {
      std::lock_guard<std::mutex> g(mu);
      if (r.completion_tokens == 0) ttft.add((t - r.enqueued_ns) / 1e9);
      else itl.add((t - sl.last_ns) / 1e9);
    }
    sl.last_ns = t;
    if (std::find(stopIds.begin(), stopIds.end(), token) != stopIds.end()) {
      ++r.completion_tokens;
      return finish(sl, "stop");
    }
    ++r.completion_tokens;
    {
      std::lock_guard<std::mutex> g(tok_mu);
      const char *text;
      size_t len;
      if (kilnrt_tokenizer_piece(tok, token, r.completion_tokens - 1, 1, &text, &len) == KILNRT_OK) sl.text.append(text, len);
    }
    // A stop string: the text ends before it.
    size_t from = sl.sent;
    for (const std::string &st : r.stops) from = std::min(from, sl.sent >= st.size() ? sl.sent - st.size() + 1 : 0);
    size_t cut = std::string::npos;
    for (const std::string &st : r.stops)
      if (size_t p = sl.text.find(st, from); p != std::string::npos) cut = std::min(cut, p);
    if (cut != std::string::npos) {
      sl.text.resize(cut);
      return finish(sl, "stop");
    }
    size_t safe = std::min(utf8Whole(sl.text), sl.text.size() - stopPrefixTail(sl.text, r.stops));
    if (safe > sl.sent) {
      r.push({sl.text.substr(sl.sent, safe - sl.sent)});
      sl.sent = safe;
    }
    if (r.completion_tokens >= r.max_tokens || (int64_t)sl.cache.size() >= context) return finish(sl, "length");
    sl.next = token;
    sl.decoding = true;
  }

  int32_t sample(Slot &sl, const float *row, int64_t vocab) {
    int32_t token;
    if (kilnrt_sample(row, vocab, &sl.req->sampling, &sl.req->rng, &token)) throw std::runtime_error(kilnrt_last_error());
    return token;
  }

  // Takes queued requests into free slots (the free slot whose cache shares the longest prefix).
  void admit() {
    for (;;) {
      std::shared_ptr<Request> r;
      int best = -1;
      size_t keep = 0;
      {
        std::lock_guard<std::mutex> g(mu);
        if (queue.empty()) return;
        for (int i = 0; i < nslots; ++i) {
          if (slots[i].req) continue;
          const std::vector<int32_t> &c = slots[i].cache, &p = queue.front()->prompt;
          size_t k = 0;
          while (reuse && k < c.size() && k < p.size() && c[k] == p[k]) ++k;
          if (best < 0 || k > keep) best = i, keep = k;
        }
        if (best < 0) return;
        r = queue.front();
        queue.pop_front();
      }
      if (r->cancelled) {  // its client left while it waited
        {
          std::lock_guard<std::mutex> g(mu);
          ++cancelled;
        }
        Event e;
        e.done = true;
        e.finish = "cancelled";
        r->push(e);
        continue;
      }
      Slot &sl = slots[best];
      if (keep == r->prompt.size()) --keep;  // one token runs, for the first logits
      sl = Slot{};
      sl.req = r;
      ++in_use;
      sl.cache.assign(r->prompt.begin(), r->prompt.begin() + (int64_t)keep);
      sl.prefilled = keep;
      r->cached_tokens = (int64_t)keep;
      r->prompt_tokens = (int64_t)r->prompt.size();
    }
  }

  // One chunk of the oldest request still prefilling.
  bool prefillOne() {
    Slot *pick = nullptr;
    for (Slot &sl : slots)
      if (sl.req && !sl.decoding && (!pick || sl.req->enqueued_ns < pick->req->enqueued_ns)) pick = &sl;
    if (!pick) return false;
    Slot &sl = *pick;
    const std::vector<int32_t> &p = sl.req->prompt;
    size_t n = std::min<size_t>((size_t)chunk, p.size() - sl.prefilled);
    set(chunkIn, std::vector<int32_t>(p.begin() + (int64_t)sl.prefilled, p.begin() + (int64_t)(sl.prefilled + n)));
    set(pastIn, {(int32_t)sl.cache.size()});
    if (!slotIn.empty()) set(slotIn, {(int32_t)(pick - slots.data())});
    int64_t vocab;
    const float *row = run(extend, extendOut, &vocab);
    sl.cache.insert(sl.cache.end(), p.begin() + (int64_t)sl.prefilled, p.begin() + (int64_t)(sl.prefilled + n));
    sl.prefilled += n;
    if (sl.prefilled == p.size()) accept(sl, sample(sl, row, vocab));
    return true;
  }

  // One decode step of every generating slot.
  bool decodeAll() {
    std::vector<int> rows;
    for (int i = 0; i < nslots; ++i)
      if (slots[i].req && slots[i].decoding) rows.push_back(i);
    if (rows.empty()) return false;
    if (!batch) rows.resize(1);
    std::vector<int32_t> tokens, pasts, ids;
    for (int i : rows) tokens.push_back(slots[i].next), pasts.push_back((int32_t)slots[i].cache.size()), ids.push_back(i);
    int64_t vocab;
    const float *out;
    if (batch) {
      set(tokB, tokens);
      set(pastB, pasts);
      if (!slotsB.empty()) set(slotsB, ids);
      out = run(batch, batchOut, &vocab);
    } else {
      set(tokS, tokens);
      set(pastS, pasts);
      out = run(single, singleOut, &vocab);
    }
    for (size_t k = 0; k < rows.size(); ++k) {
      Slot &sl = slots[rows[k]];
      sl.cache.push_back(sl.next);
      accept(sl, sample(sl, out + k * vocab, vocab));
    }
    return true;
  }

  void loop() {
    for (;;) {
      std::deque<std::shared_ptr<Request>> refused;
      {
        std::lock_guard<std::mutex> g(mu);
        if (stopping) refused.swap(queue);  // stopping: only the running requests finish
        failed += refused.size();
      }
      for (auto &r : refused) {
        Event e;
        e.done = true;
        e.error = "the server is stopping";
        e.finish = "stopping";
        r->push(e);
      }
      admit();
      for (Slot &sl : slots)
        if (sl.req && sl.req->cancelled) finish(sl, "cancelled");
      if (!active()) {
        std::unique_lock<std::mutex> g(mu);
        if (stopping && queue.empty()) return;
        cv.wait_for(g, std::chrono::milliseconds(100), [&] { return !queue.empty() || stopping; });
        continue;
      }
      try {
        prefillOne();
        decodeAll();
      } catch (const std::exception &e) {  // fails the running requests, never the server
        for (Slot &sl : slots)
          if (sl.req) {
            sl.cache.clear();
            finish(sl, "error", e.what());
          }
      }
    }
  }
};

struct Server {
  const Cli &cli;
  const ServeFlags &f;
  std::string model_name;
  std::mutex tok_mu;
  std::unique_ptr<Engine> engine;
  std::atomic<int> connections{0};
  std::mutex sock_mu;
  std::set<tcp::socket *> sockets;  // open connections (their reads end when the server stops)
  int64_t started = 0, created = 0;  // the server's start: a monotonic clock's ns (ids), Unix seconds

  Server(const Cli &c, const ServeFlags &fl) : cli(c), f(fl) {}

  // --- requests
  std::vector<int32_t> encode(const std::string &text, bool add_special) {
    std::lock_guard<std::mutex> g(tok_mu);
    const int32_t *ids;
    int64_t n;
    if (kilnrt_tokenizer_encode(cli.tokenizer, text.data(), text.size(), add_special, &ids, &n))
      throw HttpError{400, std::string("the prompt: ") + kilnrt_last_error(), "invalid_request_error", "prompt"};
    return std::vector<int32_t>(ids, ids + n);
  }
  std::string render(const json &messages) {
    std::lock_guard<std::mutex> g(tok_mu);
    if (!kilnrt_tokenizer_chat_template(cli.tokenizer))
      throw HttpError{400, "this model's tokenizer holds no chat template: use /v1/completions"};
    std::string text;
    if (render_chat(cli.tokenizer, messages, text))
      throw HttpError{400, std::string("the chat template: ") + kilnrt_last_error(), "invalid_request_error", "messages"};
    return text;
  }

  // The request's fields into `r`; a field that would change the result and is not implemented
  // is refused, never ignored.
  void parse(const json &b, bool chat, Request &r, bool &stream, bool &usage_in_stream) {
    auto bad = [](const std::string &msg, const std::string &param) { return HttpError{400, msg, "invalid_request_error", param}; };
    if (!b.is_object()) throw bad("the body must be a JSON object", "");
    for (const char *k : {"tools", "tool_choice", "functions", "function_call", "response_format", "suffix", "logit_bias"})
      if (b.contains(k) && !b[k].is_null() && !(b[k].is_object() && b[k].empty()) && !(b[k].is_array() && b[k].empty()))
        throw bad(std::string("'") + k + "' is not supported by this server", k);
    if (b.contains("n") && !(b["n"].is_number_integer() && b["n"].get<int64_t>() == 1)) throw bad("only n = 1 is supported", "n");
    if (b.contains("best_of") && !(b["best_of"].is_number_integer() && b["best_of"].get<int64_t>() == 1))
      throw bad("only best_of = 1 is supported", "best_of");
    if (b.contains("logprobs") && !b["logprobs"].is_null() && !(b["logprobs"].is_boolean() && !b["logprobs"].get<bool>()))
      throw bad("logprobs are not supported", "logprobs");
    if (b.contains("echo") && b["echo"].is_boolean() && b["echo"].get<bool>()) throw bad("echo is not supported", "echo");
    for (const char *k : {"presence_penalty", "frequency_penalty"})
      if (b.contains(k) && !b[k].is_null() && !(b[k].is_number() && b[k].get<double>() == 0))
        throw bad(std::string("'") + k + "' other than 0 is not supported", k);
    stream = false;
    if (b.contains("stream") && !b["stream"].is_null()) {
      if (!b["stream"].is_boolean()) throw bad("'stream' must be a boolean", "stream");
      stream = b["stream"].get<bool>();
    }
    usage_in_stream = b.contains("stream_options") && b["stream_options"].is_object() &&
                      b["stream_options"].value("include_usage", false) == true;
    // The prompt.
    if (chat) {
      if (!b.contains("messages") || !b["messages"].is_array() || b["messages"].empty())
        throw bad("'messages' must be a non-empty array", "messages");
      json msgs = json::array();
      for (const json &mg : b["messages"]) {
        if (!mg.is_object() || !mg.contains("role") || !mg["role"].is_string())
          throw bad("each message needs a string 'role'", "messages");
        json content = mg.value("content", json());
        std::string text;
        if (content.is_string()) {
          text = content.get<std::string>();
        } else if (content.is_array()) {  // parts: text only
          for (const json &part : content) {
            if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
              throw bad("only text content parts are supported", "messages");
            text += part["text"].get<std::string>();
          }
        } else if (!content.is_null()) {
          throw bad("a message's 'content' must be a string or an array of text parts", "messages");
        }
        msgs.push_back({{"role", mg["role"]}, {"content", text}});
      }
      r.prompt = encode(render(msgs), false);
    } else {
      if (!b.contains("prompt")) throw bad("'prompt' is required", "prompt");
      const json &p = b["prompt"];
      if (p.is_string()) {
        r.prompt = encode(p.get<std::string>(), true);
      } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
        r.prompt = encode(p[0].get<std::string>(), true);
      } else if (p.is_array() && !p.empty() && std::all_of(p.begin(), p.end(), [](const json &x) { return x.is_number_integer(); })) {
        for (const json &x : p) {
          int64_t id = x.get<int64_t>();
          if (id < 0 || (engine->vocab > 0 && id >= engine->vocab))
            throw bad("token id " + std::to_string(id) + " is outside the vocabulary", "prompt");
          r.prompt.push_back((int32_t)id);
        }
      } else {
        throw bad("'prompt' must be a string, an array of one string or an array of token ids (one prompt: n = 1)", "prompt");
      }
    }
    if (r.prompt.empty()) throw bad("the prompt gives no tokens", chat ? "messages" : "prompt");
    const int64_t ctx = f.ctx > 0 ? std::min<int64_t>(f.ctx, engine->context) : engine->context;
    if ((int64_t)r.prompt.size() >= ctx)
      throw bad("the prompt is " + std::to_string(r.prompt.size()) + " tokens; the context is " + std::to_string(ctx) +
                    " tokens (at least one must be left for the answer)",
                chat ? "messages" : "prompt");
    // Sampling.
    auto number = [&](const char *k, double lo, double hi, double dflt) {
      if (!b.contains(k) || b[k].is_null()) return dflt;
      if (!b[k].is_number()) throw bad(std::string("'") + k + "' must be a number", k);
      double v = b[k].get<double>();
      if (!(v >= lo && v <= hi)) throw bad(std::string("'") + k + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() + "], got " + b[k].dump(), k);
      return v;
    };
    r.sampling.temperature = (float)number("temperature", 0, 1e6, 1.0);
    r.sampling.top_p = (float)number("top_p", 1e-9, 1, 1.0);
    if (b.contains("top_k") && !b["top_k"].is_null()) {
      if (!b["top_k"].is_number_integer() || b["top_k"].get<int64_t>() < 0) throw bad("'top_k' must be a non-negative integer", "top_k");
      r.sampling.top_k = (int32_t)std::min<int64_t>(b["top_k"].get<int64_t>(), 1 << 30);
    }
    if (b.contains("seed") && !b["seed"].is_null()) {
      if (!b["seed"].is_number_integer()) throw bad("'seed' must be an integer", "seed");
      r.rng = (uint64_t)b["seed"].get<int64_t>() * 0x9e3779b97f4a7c15ULL + 0x5a3d1e;  // as the command line's --seed
    } else {
      r.rng = std::random_device{}() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)now_ns();
    }
    const int64_t room = ctx - (int64_t)r.prompt.size();
    r.max_tokens = room;
    for (const char *k : {"max_tokens", "max_completion_tokens"})
      if (b.contains(k) && !b[k].is_null()) {
        if (!b[k].is_number_integer() || b[k].get<int64_t>() < 1) throw bad(std::string("'") + k + "' must be a positive integer", k);
        if (b[k].get<int64_t>() > room)
          throw bad(std::string("'") + k + "' is " + b[k].dump() + " but the prompt of " + std::to_string(r.prompt.size()) +
                        " tokens leaves " + std::to_string(room) + " of the context of " + std::to_string(ctx),
                    k);
        r.max_tokens = b[k].get<int64_t>();
      }
    if (b.contains("stop") && !b["stop"].is_null()) {
      const json &st = b["stop"];
      if (st.is_string()) r.stops.push_back(st.get<std::string>());
      else if (st.is_array() && st.size() <= 16 && std::all_of(st.begin(), st.end(), [](const json &x) { return x.is_string(); }))
        for (const json &x : st) r.stops.push_back(x.get<std::string>());
      else throw bad("'stop' must be a string or an array of at most 16 strings", "stop");
      for (const std::string &x : r.stops)
        if (x.empty()) throw bad("a stop string is empty", "stop");
    }
  }

  // --- HTTP
  using Req = http::request<http::string_body>;
  template <class Body>
  static void prepare(http::response<Body> &res, const Req &req) {
    res.set(http::field::server, "kiln");
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
  }
  static http::response<http::string_body> text(const Req &req, int status, const std::string &body,
                                                const char *type = "application/json") {
    http::response<http::string_body> res{(http::status)status, req.version()};
    res.set(http::field::content_type, type);
    res.body() = body;
    prepare(res, req);
    return res;
  }
  static http::response<http::string_body> error(const Req &req, const HttpError &e) {
    json body = {{"error", {{"message", e.message}, {"type", e.type}, {"param", e.param.empty() ? json() : json(e.param)}, {"code", json()}}}};
    auto res = text(req, e.status, body.dump(-1, ' ', false, json::error_handler_t::replace));
    if (e.status == 429) res.set(http::field::retry_after, "1");
    if (e.status == 401) res.set(http::field::www_authenticate, "Bearer");
    return res;
  }

  std::string metrics() {
    Engine &en = *engine;
    std::lock_guard<std::mutex> g(en.mu);
    std::string out;
    auto counter = [&](const char *name, const char *help, const std::string &labels, uint64_t v, bool head = true) {
      if (head) out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
      out += std::string(name) + labels + " " + std::to_string(v) + "\n";
    };
    counter("kiln_requests_total", "finished requests by outcome", "{outcome=\"ok\"}", en.ok);
    counter("kiln_requests_total", "", "{outcome=\"error\"}", en.failed, false);
    counter("kiln_requests_total", "", "{outcome=\"cancelled\"}", en.cancelled, false);
    counter("kiln_requests_total", "", "{outcome=\"rejected\"}", en.rejected, false);
    counter("kiln_prompt_tokens_total", "prompt tokens of finished requests", "", en.prompt_total);
    counter("kiln_prompt_tokens_cached_total", "prompt tokens reused from a slot's cache", "", en.cached_total);
    counter("kiln_generated_tokens_total", "generated tokens of finished requests", "", en.generated_total);
    const int used = en.in_use.load();
    out += "# HELP kiln_queue_depth requests waiting for a slot\n# TYPE kiln_queue_depth gauge\nkiln_queue_depth " +
           std::to_string(en.queue.size()) + "\n";
    out += "# HELP kiln_slots_in_use slots holding a running request\n# TYPE kiln_slots_in_use gauge\nkiln_slots_in_use " +
           std::to_string(used) + "\n";
    out += "# HELP kiln_slots slots (sequences decoded together)\n# TYPE kiln_slots gauge\nkiln_slots " + std::to_string(en.nslots) + "\n";
    en.ttft.print(out, "kiln_time_to_first_token_seconds", "from the request's arrival to its first token");
    en.itl.print(out, "kiln_inter_token_latency_seconds", "between a sequence's tokens");
    return out;
  }

  // A completion (or chat completion): parsed, queued, answered whole or streamed.
  template <class Stream>
  void complete(Stream &sock, const Req &req, bool chat, beast::error_code &ec) {
    json body;
    try {
      body = json::parse(req.body());
    } catch (const json::exception &e) {
      http::write(sock, error(req, {400, std::string("the body is not JSON: ") + e.what()}), ec);
      return;
    }
    auto r = std::make_shared<Request>();
    bool stream = false, usage_in_stream = false;
    try {
      parse(body, chat, *r, stream, usage_in_stream);
    } catch (const HttpError &e) {
      http::write(sock, error(req, e), ec);
      return;
    } catch (const json::exception &e) {  // a field of the wrong type
      http::write(sock, error(req, {400, std::string("a field has the wrong type: ") + e.what()}), ec);
      return;
    }
    if (int st = engine->submit(r)) {
      if (st == 503)
        http::write(sock, error(req, {503, "the server is stopping", "server_error"}), ec);
      else
        http::write(sock, error(req, {429, "the queue is full (" + std::to_string(engine->max_queue) + " requests): retry later",
                                      "rate_limit_error"}), ec);
      return;
    }
    static std::atomic<uint64_t> counter{0};
    const std::string id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(started) + "-" + std::to_string(++counter);
    const int64_t created = (int64_t)time(nullptr);
    auto usage = [&] {
      return json{{"prompt_tokens", r->prompt_tokens},
                  {"completion_tokens", r->completion_tokens},
                  {"total_tokens", r->prompt_tokens + r->completion_tokens},
                  {"prompt_tokens_details", {{"cached_tokens", r->cached_tokens}}}};
    };
    auto choice = [&](const std::string &delta, const json &finish, bool first) {
      json c = {{"index", 0}, {"finish_reason", finish}};
      if (!chat) {
        c["text"] = delta;
        c["logprobs"] = nullptr;
      } else if (stream) {
        json d = json::object();
        if (first) d["role"] = "assistant";
        if (!delta.empty() || first) d["content"] = delta;
        c["delta"] = d;
      } else {
        c["message"] = {{"role", "assistant"}, {"content", delta}};
      }
      return c;
    };
    const char *object = chat ? (stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    auto envelope = [&](json choices) {
      return json{{"id", id}, {"object", object}, {"created", created}, {"model", model_name}, {"choices", std::move(choices)}};
    };
    if (!stream) {
      std::string all;
      Event e;
      for (;;) {
        // The client still there? Asked at each token, or every 0.1 s while none comes.
        std::optional<Event> got = r->pop_for(std::chrono::milliseconds(100));
        if (!r->cancelled && peer_closed(sock.native_handle())) r->cancelled = true;  // the engine then finishes it
        if (!got) continue;
        e = std::move(*got);
        all += e.text;
        if (e.done) break;
      }
      if (e.finish == "cancelled") return;
      if (!e.error.empty()) {
        const bool stopping = e.finish == "stopping";
        http::write(sock, error(req, {stopping ? 503 : 500, stopping ? e.error : "generation failed: " + e.error, "server_error"}), ec);
        return;
      }
      json out = envelope(json::array({choice(all, e.finish, true)}));
      out["usage"] = usage();
      http::write(sock, text(req, 200, out.dump(-1, ' ', false, json::error_handler_t::replace)), ec);
      if (ec) r->cancelled = true;
      return;
    }
    http::response<http::empty_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "kiln");
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::cache_control, "no-cache");
    res.keep_alive(req.keep_alive());
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    http::write_header(sock, sr, ec);
    auto send = [&](const json &j) {
      if (ec) return;
      std::string data = "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
      net::write(sock, http::make_chunk(net::buffer(data)), ec);
    };
    bool first = true;
    if (chat) {
      send(envelope(json::array({choice("", nullptr, true)})));
      first = false;
    }
    for (;;) {
      Event e = r->pop();
      if (!e.error.empty()) {
        send(json{{"error", {{"message", "generation failed: " + e.error}, {"type", "server_error"}}}});
        break;
      }
      if (!e.text.empty()) {
        send(envelope(json::array({choice(e.text, nullptr, first)})));
        first = false;
      }
      if (e.done) {
        if (e.finish == "cancelled") break;
        send(envelope(json::array({choice("", e.finish, first)})));
        if (usage_in_stream) {
          json u = envelope(json::array());
          u["usage"] = usage();
          send(u);
        }
        break;
      }
      if (ec) {  // the client is gone: its sequence stops, its slot frees
        r->cancelled = true;
        while (!r->pop().done) {
        }
        return;
      }
    }
    if (!ec) {
      std::string done = "data: [DONE]\n\n";
      net::write(sock, http::make_chunk(net::buffer(done)), ec);
      if (!ec) net::write(sock, http::make_chunk_last(), ec);
    }
  }

  void connection(tcp::socket sock) {
    {
      std::lock_guard<std::mutex> g(sock_mu);
      sockets.insert(&sock);
    }
    beast::flat_buffer buf;
    beast::error_code ec;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(f.max_body);
      http::read_header(sock, buf, parser, ec);
      if (!ec && parser.content_length() && *parser.content_length() > f.max_body)
        ec = http::error::body_limit;  // refused before its body is read
      else if (!ec)
        http::read(sock, buf, parser, ec);
      if (ec == http::error::end_of_stream || ec == net::error::eof) break;
      if (ec == http::error::body_limit) {
        Req r0;
        r0.version(11);
        r0.keep_alive(false);
        http::write(sock, error(r0, {413, "the body exceeds " + std::to_string(f.max_body) + " bytes"}), ec);
        break;
      }
      if (ec) {
        if (ec != net::error::connection_reset) {
          Req r0;
          r0.version(11);
          r0.keep_alive(false);
          beast::error_code ec2;
          http::write(sock, error(r0, {400, "a malformed HTTP request: " + ec.message()}), ec2);
        }
        break;
      }
      Req req = parser.release();
      std::string target(req.target());
      if (size_t q = target.find('?'); q != std::string::npos) target.resize(q);
      const bool post = req.method() == http::verb::post, get = req.method() == http::verb::get;
      if (!f.api_key.empty() && target.rfind("/v1/", 0) == 0) {
        std::string auth(req[http::field::authorization]);
        if (auth != "Bearer " + f.api_key) {
          http::write(sock, error(req, {401, auth.empty() ? "an API key is required (Authorization: Bearer KEY)" : "the API key is wrong",
                                        "authentication_error"}), ec);
          if (ec || !req.keep_alive()) break;
          continue;
        }
      }
      if (post && target == "/v1/completions") {
        complete(sock, req, false, ec);
      } else if (post && target == "/v1/chat/completions") {
        complete(sock, req, true, ec);
      } else if (get && target == "/v1/models") {
        json body = {{"object", "list"},
                     {"data", json::array({{{"id", model_name}, {"object", "model"}, {"created", created}, {"owned_by", "kiln"}}})}};
        http::write(sock, text(req, 200, body.dump()), ec);
      } else if (get && target == "/health") {
        http::write(sock, text(req, 200, "{\"status\":\"ok\"}"), ec);
      } else if (get && target == "/metrics") {
        http::write(sock, text(req, 200, metrics(), "text/plain; version=0.0.4"), ec);
      } else {
        bool known = target == "/v1/completions" || target == "/v1/chat/completions" || target == "/v1/models" ||
                     target == "/health" || target == "/metrics";
        http::write(sock, error(req, {known ? 405 : 404, known ? "method not allowed" : "no such endpoint: " + target}), ec);
      }
      if (ec || !req.keep_alive()) break;
    }
    beast::error_code ignore;
    sock.shutdown(tcp::socket::shutdown_send, ignore);
    std::lock_guard<std::mutex> g(sock_mu);
    sockets.erase(&sock);
    --connections;
  }
};

}  // namespace

int serve(const Cli &cli, kilnrt_session *s, const ServeFlags &f) {
  const kiln_model_info &m = cli.model;
  if (!cli.tokenizer) cli.die(1, "--serve needs a tokenizer: give --tokenizer PATH (none beside the weights)");
  Server srv(cli, f);
  srv.model_name = m.name;
  srv.started = now_ns();
  srv.created = (int64_t)time(nullptr);
  srv.engine = std::make_unique<Engine>(s, m, cli.tokenizer, srv.tok_mu);
  Engine &en = *srv.engine;
  en.extend = kilnrt_entry_by_role(&m, KILN_ROLE_EXTEND);
  en.batch = kilnrt_entry_by_role(&m, KILN_ROLE_DECODE_BATCH);
  en.single = kilnrt_entry_by_role(&m, KILN_ROLE_DECODE);
  if (!en.extend || (!en.batch && !en.single))
    cli.die(1, "--serve needs a model with an extend entry (a chunk of tokens at `past` of a cache) and a decode or "
               "decode_batch entry (examples/llama has them)");
  for (int k = 0; k < en.extend->n_inputs; ++k) {
    const kiln_tensor_info &in = m.io[en.extend->inputs[k]];
    if (in.cache_slots) en.slotIn = in.name;
    else if (strcmp(in.name, "past") == 0) en.context = in.max_value;
    else if (in.dtype == KILN_I32) en.chunkIn = in.name, en.vocab = in.max_value;
  }
  en.extendOut = m.io[en.extend->outputs[0]].name;
  int bound = 1;
  if (en.batch) {
    for (int k = 0; k < en.batch->n_inputs; ++k) {
      const kiln_tensor_info &in = m.io[en.batch->inputs[k]];
      if (in.cache_slots) en.slotsB = in.name, bound = (int)in.max_value;
      else if (strncmp(in.name, "past", 4) == 0) en.pastB = in.name;
      else if (in.dtype == KILN_I32) en.tokB = in.name;
    }
    en.batchOut = m.io[en.batch->outputs[0]].name;
    if (en.slotsB.empty()) en.batch = nullptr;  // no cache slots: one sequence through decode
  }
  if (!en.batch && !en.single) cli.die(1, "--serve: the model's decode_batch entry takes no cache slots and it has no decode entry");
  if (!en.batch) {
    en.singleOut = m.io[en.single->outputs[0]].name;
    bound = 1;
  }
  en.nslots = f.slots > 0 ? f.slots : bound;
  if (en.nslots > bound)
    cli.die(1, "--slots " + std::to_string(f.slots) + " exceeds the " + std::to_string(bound) +
                   " sequences this model decodes together (recompile with --batch " + std::to_string(f.slots) + ")");
  if (en.context <= 0 || en.chunkIn.empty()) cli.die(1, "--serve: the extend entry has no chunk or past input");
  en.slots.resize((size_t)en.nslots);
  en.chunk = f.chunk;
  en.reuse = !f.no_prefix_reuse;
  en.max_queue = (size_t)f.max_queue;
  {
    const int32_t *ids;
    int64_t n = kilnrt_tokenizer_stop_ids(cli.tokenizer, &ids);
    en.stopIds.assign(ids, ids + n);
  }
  // Signals: SIGTERM and SIGINT stop accepting; running requests finish; SIGPIPE is an error
  // on the write, not the end of the process.
  g_stop = false;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  beast::error_code ec;
  tcp::endpoint ep{net::ip::make_address(f.host, ec), (unsigned short)f.port};
  if (ec) cli.die(1, "--host '" + f.host + "': " + ec.message());
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) cli.die(1, "cannot listen on " + f.host + ":" + std::to_string(f.port) + ": " + ec.message());
  std::thread engine([&] { en.loop(); });
  fprintf(stderr, "%s: serving on http://%s:%d (%d slot%s, context %lld, queue %d)\n", m.name, f.host.c_str(),
          (int)acceptor.local_endpoint().port(), en.nslots, en.nslots > 1 ? "s" : "", (long long)en.context, f.max_queue);
  fflush(stderr);
  while (!g_stop) {
    pollfd pfd{acceptor.native_handle(), POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    tcp::socket sock{ioc};
    acceptor.accept(sock, ec);
    if (ec) continue;
    ++srv.connections;
    std::thread([&srv, sk = std::move(sock)]() mutable { srv.connection(std::move(sk)); }).detach();
  }
  acceptor.close(ec);
  fprintf(stderr, "%s: stopping: no new connections; finishing the running requests\n", m.name);
  {
    std::lock_guard<std::mutex> g(en.mu);
    en.stopping = true;
  }
  en.cv.notify_all();
  engine.join();
  // The connections deliver what the engine finished; idle ones (keep-alive) see the end of
  // their reads; a client that does not read is waited for 5 s at most.
  {
    std::lock_guard<std::mutex> g(srv.sock_mu);
    for (tcp::socket *sk : srv.sockets) sk->shutdown(tcp::socket::shutdown_receive, ec);
  }
  for (int i = 0; i < 100 && srv.connections > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (srv.connections > 0) {
    fprintf(stderr, "%s: %d connection%s still open after 5 s: closing\n", m.name, srv.connections.load(),
            srv.connections > 1 ? "s" : "");
    fflush(stderr);
    _exit(0);  // their threads still hold the server
  }
  fprintf(stderr, "%s: stopped\n", m.name);
  return 0;
}

}  // namespace kilnrt
