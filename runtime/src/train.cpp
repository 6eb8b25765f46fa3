// train.cpp - `--train`: the compiled training step run over a token file.
//
// Each step takes B (--batch) seeded windows of T + 1 tokens from the data (tokens = the first T,
// targets = the last T; T + k with targets k ahead, Model::targets with Ahead; for a masked-LM
// entry, whose "targets" input has a mask_rate, T tokens masked by kilnrt_tokens_mask from a
// third seeded stream) as a [B, T] batch, runs the entry that updates the parameters (inputs
// "tokens" and "targets", outputs "loss", "lr" and "grad_sumsq", and any "loss.<term>"), logs a CSV
// row and, every few steps, a progress line. The window of step k depends only on the seed and k,
// so a run resumed from a checkpoint (whose optimizer.step says where it stopped) sees the same
// data as one that never stopped. --lr writes the state optimizer.lr, the schedule's peak (zero:
// the model's own); --steps writes optimizer.steps, where the model has it (an auxiliary loss
// term's schedule: LossOptions::until). Checkpoints (parameters and the optimizer.* states) are written to a
// temporary name and renamed.
//
// Data parallel (`mpirun -np P`, kilnrt_group_join): every rank draws the same B windows and
// takes rows [r·B/P, (r+1)·B/P). Before each step it sets its share of the batch's loss count
// (its rows over B; masked-LM: its masked positions over all of them, summed over the ranks),
// which weights its gradients in the step's kiln.all_reduce, so the update is the one of the
// mean loss over the whole batch; the logged loss and terms are the share-weighted sums of
// the ranks' own (each rank's is the mean over its rows), and the evaluation windows are dealt
// out over the ranks and their sums added. Rank 0 writes the log and the checkpoints; rank r > 0
// writes its own log beside it (log.rank<r>.csv), with its rows, tokens and own loss.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "internal.h"

namespace kilnrt {
namespace {
uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

float scalar(const Cli &cli, kilnrt_session *s, const char *name) {
  const kilnrt_tensor *t;
  cli.check(kilnrt_session_output(s, name, &t));
  return ((const float *)t->data)[0];
}

// A 1-D token file, every id checked against the vocabulary of the entry's "tokens" input.
struct Tokens {
  kilnrt_tensor t{};
  ~Tokens() { kilnrt_tensor_free(&t); }
  const int32_t *ids() const { return (const int32_t *)t.data; }
  int64_t size() const { return t.shape[0]; }
};
void readTokens(const Cli &cli, const kiln_entry_info &en, const std::string &path, const char *flag, Tokens &out) {
  const kiln_model_info &m = cli.model;
  cli.check(kilnrt_npy_read(path.c_str(), &out.t));
  if (out.t.rank != 1 || out.t.dtype != KILN_I32)
    cli.die(1, std::string(flag) + " '" + path + "': expected a 1-D array of int32 or int64 token ids");
  for (int i = 0; i < en.n_inputs; ++i)  // every id checked once, here, not when a window happens to hold it
    if (const kiln_tensor_info &in = m.io[en.inputs[i]]; strcmp(in.name, "tokens") == 0 && in.max_value > 0)
      for (int64_t k = 0; k < out.size(); ++k)
        if (out.ids()[k] < 0 || out.ids()[k] >= in.max_value)
          cli.die(1, std::string(flag) + " '" + path + "': token id " + std::to_string(out.ids()[k]) + " at position " +
                         std::to_string(k) + " is outside the vocabulary [0, " + std::to_string(in.max_value) + ")");
}

// How an entry's windows become its inputs: next-token (tokens = the first T of T + K ids; the
// input "targets" the next T, and each target input `ahead` = k positions on the T from k: K is
// the largest k) or masked-LM (T ids, masked by kilnrt_tokens_mask).
struct Windows {
  const kiln_tensor_info *mlm = nullptr;  // the entry's masked-LM "targets", or null
  int64_t vocab = 0;
  struct Target {
    const char *name;
    int64_t ahead;
    std::vector<int32_t> ids;
  };
  std::vector<Target> ahead;  // next-token targets, each `ahead` positions on
  std::vector<int32_t> tokens, targets;
  int64_t reach() const {
    int64_t k = 1;
    for (const Target &t : ahead) k = std::max(k, t.ahead);
    return k;
  }
  int64_t span(int64_t T) const { return mlm ? T : T + reach(); }  // ids a window reads
  // One window per sequence of the batch (`at[b]`; window b masked with maskSeeds[b]).
  void set(const Cli &cli, kilnrt_session *s, const std::vector<const int32_t *> &at, int64_t T,
           const std::vector<uint64_t> &maskSeeds) {
    const int64_t B = (int64_t)at.size();
    tokens.resize(B * T);
    if (mlm) targets.resize(B * T);
    for (Target &t : ahead) t.ids.resize(B * T);
    for (int64_t b = 0; b < B; ++b) {
      int32_t *tok = tokens.data() + b * T;
      if (mlm) {
        cli.check(kilnrt_tokens_mask(at[b], T, vocab, mlm->mask_token, mlm->mask_rate, maskSeeds[b], tok, targets.data() + b * T));
      } else {
        memcpy(tok, at[b], (size_t)T * 4);
        for (Target &t : ahead) memcpy(t.ids.data() + b * T, at[b] + t.ahead, (size_t)T * 4);
      }
    }
    // One window: a 1-D sequence (a model without a batch takes only that).
    auto put = [&](const char *name, int32_t *ids) {
      kilnrt_tensor ti{KILN_I32, B > 1 ? 2 : 1, {B > 1 ? B : T, T}, ids};
      cli.check(kilnrt_session_set_input(s, name, &ti));
    };
    put("tokens", tokens.data());
    if (mlm) put("targets", targets.data());
    for (Target &t : ahead) put(t.name, t.ids.data());
  }
};
Windows windowsOf(const Cli &cli, const kiln_model_info &m, const kiln_entry_info &e) {
  Windows w;
  for (int i = 0; i < e.n_inputs; ++i) {
    const kiln_tensor_info &in = m.io[e.inputs[i]];
    bool named = strcmp(in.name, "targets") == 0;
    if (named && in.mask_rate > 0) w.mlm = &in;
    else if (in.ahead > 0 || named) w.ahead.push_back({in.name, in.ahead > 0 ? in.ahead : 1, {}});
    if (strcmp(in.name, "tokens") == 0) w.vocab = in.max_value;
  }
  if (w.mlm && !w.ahead.empty())
    cli.die(1, std::string("--train: entry '") + e.name + "' has masked-LM targets and targets ahead ('" + w.ahead[0].name +
                   "'): one kind per entry");
  return w;
}
// --log F for rank r > 0 of a group: F with ".rank<r>" before its extension.
std::string rankLog(const std::string &log, int32_t rank) {
  if (rank == 0 || log.empty()) return log;
  size_t slash = log.rfind('/'), dot = log.rfind('.');
  std::string tag = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return log + tag;
  return log.substr(0, dot) + tag + log.substr(dot);
}
// The batch (this rank's `rows`) and --seq within the compiled bounds of entry `en`'s inputs.
void checkBounds(const Cli &cli, const kiln_entry_info &en, const TrainFlags &f, int64_t rows, const std::string &perRank) {
  const kiln_model_info &m = cli.model;
  for (int i = 0; i < en.n_inputs; ++i) {
    const kiln_tensor_info &in = m.io[en.inputs[i]];
    if (in.rank < 1) continue;
    const kiln_dim &len = in.dims[in.rank - 1];
    if (len.sym >= 0 && f.seq > m.sym_max[len.sym])
      cli.die(1, "--seq " + std::to_string(f.seq) + " exceeds the compiled bound " + std::to_string(m.sym_max[len.sym]) +
                     " of " + m.sym_names[len.sym]);
    bool batched = in.rank > 1 && is_batch_sym(&m, in.dims[0].sym);
    if (!batched && rows > 1)
      cli.die(1, "--batch " + std::to_string(f.batch) + perRank + ": input '" + in.name + "' of entry '" + en.name +
                     "' takes one sequence (the model was compiled without a batch of more than one: Model::batch)");
    if (batched && rows > m.sym_max[in.dims[0].sym])
      cli.die(1, "--batch " + std::to_string(f.batch) + perRank + " exceeds the compiled bound " +
                     std::to_string(m.sym_max[in.dims[0].sym]) + " of " + m.sym_names[in.dims[0].sym]);
  }
}

// The run's states: --lr (the schedule's peak), --steps (optimizer.steps, where the model reads
// it). Returns the first step to run (after a checkpoint's optimizer.step).
int64_t setRunStates(const Cli &cli, kilnrt_session *s, const TrainFlags &f) {
  const kiln_model_info &m = cli.model;
  if (f.lr) {  // the peak the learning_rate kernel reads when positive; saved with the moments
    if (!(*f.lr > 0) || !std::isfinite(*f.lr)) cli.die(1, "--lr " + std::to_string(*f.lr) + ": expected a positive finite rate");
    kilnrt_tensor peak{};
    cli.check(kilnrt_session_state(s, KILN_STATE_LR, &peak));
    ((float *)peak.data)[0] = (float)*f.lr;
  }
  for (int i = 0; i < m.n_states; ++i)  // the run's total, which a loss term's weight schedule reads (LossOptions::until)
    if (strcmp(m.states[i].name, KILN_STATE_STEPS) == 0) {
      kilnrt_tensor total{};
      cli.check(kilnrt_session_state(s, KILN_STATE_STEPS, &total));
      ((float *)total.data)[0] = (float)f.steps;
    }
  kilnrt_tensor stepState{};
  cli.check(kilnrt_session_state(s, KILN_STATE_STEP, &stepState));
  const int64_t first = (int64_t)((const float *)stepState.data)[0] + 1;
  if (first > f.steps) cli.die(1, "--steps " + std::to_string(f.steps) + ": the checkpoint is already at step " +
                                      std::to_string(first - 1));
  return first;
}

// Every rank must run the same training: the same arguments, data, weights and step (a hash of
// them, compared bit by bit over the group).
void checkRanksAgree(const Cli &cli, kilnrt_session *s, const TrainFlags &f, int32_t P, const Tokens &data, int64_t evalN,
                     int64_t first) {
  const kiln_model_info &m = cli.model;
  const int64_t n = data.size();
  const int32_t *ids = data.ids();
  {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
    auto mixIn = [&](const void *p, size_t bytes) {
      for (size_t i = 0; i < bytes; ++i) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ULL;
    };
    int64_t run[] = {f.seq, f.batch, f.steps, (int64_t)f.seed, n, evalN, first, f.eval_every};
    mixIn(run, sizeof run);
    mixIn(m.model_hash, strlen(m.model_hash));
    for (int64_t k = 0; k < 4096 && k < n; ++k) mixIn(ids + k * (n / std::min<int64_t>(n, 4096)), 4);
    for (int i = 0; i < m.n_params; ++i) {  // the first values of every parameter
      int64_t numel = 1;
      for (int d = 0; d < m.params[i].rank; ++d) numel *= m.params[i].dims[d].size;
      if (const void *p = session_param(s, i)) mixIn(p, (size_t)std::min<int64_t>(numel, 16) * 4);
    }
    // The optimizer's state, after --lr is set: the step, the rate and the first values of each
    // moment (ranks given other --lr values, or resumed from other checkpoints, would drift apart).
    for (int i = 0; i < m.n_states; ++i) {
      if (strncmp(m.states[i].name, KILN_OPTIMIZER_PREFIX, strlen(KILN_OPTIMIZER_PREFIX)) != 0) continue;
      kilnrt_tensor t{};
      cli.check(kilnrt_session_state(s, m.states[i].name, &t));
      mixIn(m.states[i].name, strlen(m.states[i].name));
      mixIn(t.data, (size_t)std::min<int64_t>(kilnrt_tensor_numel(&t), 16) * 4);
    }
    double bits[64];  // each bit's count over the ranks: 0 or P when they agree
    for (int b = 0; b < 64; ++b) bits[b] = (double)((h >> b) & 1);
    cli.check(kilnrt_group_sum(bits, 64));
    for (double c : bits)
      if (c != 0 && c != P)
        cli.die(1, "the " + std::to_string(P) + " ranks of this mpirun disagree on the run: start every rank with the "
                   "same --data, --eval-data, --seq, --batch, --steps, --seed, --lr, --eval-every and weights (or checkpoint)");
  }
}

// What makes a run this run: the seed, the training data (its tokens' count and a hash of them),
// --seq and --batch; the windows of step k depend on these and k alone. A checkpoint records
// them in its __metadata__, and --resume checks them.
FileMetadata runIdentity(const TrainFlags &f, const Tokens &data) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the ids, a word at a time
  const int32_t *ids = data.ids();
  for (int64_t i = 0; i < data.size(); ++i) h = (h ^ (uint32_t)ids[i]) * 0x100000001b3ULL;
  char hex[24];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return {{"kiln.run.seed", std::to_string(f.seed)},
          {"kiln.run.seq", std::to_string(f.seq)},
          {"kiln.run.batch", std::to_string(f.batch)},
          {"kiln.run.data", std::to_string(data.size()) + " tokens, hash " + hex}};
}

// --resume: the checkpoint's run must be this one (else each step would draw other windows than
// the run that wrote it, with no word). A checkpoint that records no run is resumed with a note.
void checkSameRun(const Cli &cli, kilnrt_session *s, const TrainFlags &f, const FileMetadata &run) {
  const FileMetadata saved = session_weights_metadata(s);
  static const std::pair<const char *, const char *> kFields[] = {
      {"kiln.run.data", "--data"}, {"kiln.run.seed", "--seed"}, {"kiln.run.seq", "--seq"}, {"kiln.run.batch", "--batch"}};
  bool recorded = false;
  std::string diff;
  for (auto [key, flag] : kFields) {
    auto it = saved.find(key);
    if (it == saved.end()) continue;
    recorded = true;
    if (it->second == run.at(key)) continue;
    const std::string here = std::string(flag) == "--data" ? "'" + f.data + "' holds " + run.at(key) : run.at(key);
    diff += std::string(diff.empty() ? "" : "; ") + flag + " " + here + " (the checkpoint's run: " + it->second + ")";
  }
  if (!recorded) {
    if (!f.quiet)
      fprintf(stderr, "note: --resume %s: the checkpoint does not record its run (--seed, --data, --seq, --batch): "
                      "continuing without checking them\n", f.resume.c_str());
    return;
  }
  if (!diff.empty())
    cli.die(1, "--resume " + f.resume + ": not the run the checkpoint comes from: " + diff +
                   ". Each step's windows depend on them: resume with the checkpoint's values, or start a new run "
                   "from its weights with --weights " + f.resume);
}

// --save: checked before the first step (a missing or read-only folder would otherwise fail
// only at the first checkpoint, possibly hours in).
void checkSavePath(const Cli &cli, const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    cli.die(1, "--save '" + path + "' is a folder: give the checkpoint's file name (for example " +
                   (path.back() == '/' ? path : path + "/") + "ckpt.safetensors)");
  AtomicFile probe;  // a temporary file beside it, removed again
  cli.check(probe.open(path, "checkpoint (--save)"));
}

// --log (this rank's): appended to when resuming, else written with its header row.
FILE *openLog(const Cli &cli, const std::string &logPath, int64_t first, int32_t P, const std::vector<const char *> &terms) {
  FILE *log = nullptr;
  if (!logPath.empty()) {
    log = fopen(logPath.c_str(), first > 1 ? "a" : "w");
    if (!log) cli.die(1, "cannot write --log '" + logPath + "': " + strerror(errno));
    if (first == 1) {
      fprintf(log, "step,loss,eval_loss,lr,grad_norm,tokens_per_s,elapsed_s");
      if (P > 1) fprintf(log, ",rank,rows,rank_tokens,rank_loss");
      for (const char *t : terms) fprintf(log, ",%s", t);
      fprintf(log, "\n");
    }
  }
  return log;
}

// This rank's share of the step's loss count (its rows over B; masked-LM: its masked positions
// over all ranks'), set for the step's all-reduce.
double lossShare(const Cli &cli, const Windows &win, int64_t rows, int64_t B) {
  double share = (double)rows / (double)B;
  if (win.mlm) {
    double counts[2] = {0, 0};
    for (int32_t t : win.targets) counts[0] += t >= 0;
    counts[1] = counts[0];
    cli.check(kilnrt_group_sum(counts + 1, 1));
    if (counts[1] > 0) share = counts[0] / counts[1];
  }
  cli.check(kilnrt_group_set_share(share));
  return share;
}
}  // namespace

int train(const Cli &cli, kilnrt_session *s, const TrainFlags &f) {
  const kiln_model_info &m = cli.model;
  int32_t rank = 0, P = 1;
  cli.check(kilnrt_group_join(&rank, &P));
  // The training entry (Model::train, training_entries).
  const kiln_entry_info *en = kilnrt_entry_by_role(&m, KILN_ROLE_TRAIN_STEP);
  if (!en) cli.die(1, "--train: the model has no training entry (compile it with Model::train or training_entries)");
  if (f.steps < 1) cli.die(1, "--steps must be at least 1");
  if (f.seq < 1) cli.die(1, "--seq must be at least 1");
  if (f.batch < 1) cli.die(1, "--batch must be at least 1");
  if (f.batch < P)
    cli.die(1, "--batch " + std::to_string(f.batch) + " is smaller than the " + std::to_string(P) +
                   " ranks of this mpirun: each rank takes at least one row of the batch");
  // This rank's rows of the global batch of f.batch windows.
  const int64_t lo = rank * f.batch / P, hi = (rank + 1) * f.batch / P, rows = hi - lo;
  const std::string perRank = P > 1 ? " (" + std::to_string(rows) + " rows per rank: --batch " + std::to_string(f.batch) +
                                          " over " + std::to_string(P) + " ranks)"
                                    : "";
  checkBounds(cli, *en, f, rows, perRank);
  // --resume continues a run: the file must hold every optimizer state (the moments and the
  // step), or the run would silently start over from step 1 with zero moments.
  if (!f.resume.empty())
    if (std::vector<std::string> missing = kilnrt::optimizer_states_not_loaded(s); !missing.empty()) {
      std::string list;
      for (size_t i = 0; i < missing.size() && i < 4; ++i) list += (i ? ", " : "") + missing[i];
      if (missing.size() > 4) list += ", ... (" + std::to_string(missing.size()) + " in all)";
      cli.die(1, "--resume " + f.resume + ": the file lacks the optimizer state " + list +
                     ": it is not a training checkpoint of this model (one that --save wrote); to train from its "
                     "weights with fresh moments from step 1, give --weights " + f.resume + " instead");
    }
  Tokens data, evalData;
  readTokens(cli, *en, f.data, "--data", data);
  const FileMetadata run = runIdentity(f, data);
  if (!f.resume.empty()) checkSameRun(cli, s, f, run);
  if (!f.save.empty() && rank == 0) checkSavePath(cli, f.save);
  Windows win = windowsOf(cli, m, *en), evalWin;
  const int64_t n = data.size(), T = f.seq, span = win.span(T);
  auto spanText = [&](const Windows &w) {
    return w.mlm ? "--seq = " + std::to_string(T) : "--seq + " + std::to_string(w.reach()) + " = " + std::to_string(w.span(T));
  };
  if (n < span)
    cli.die(1, "--data '" + f.data + "' holds " + std::to_string(n) + " tokens, fewer than one window of " + spanText(win));
  const int32_t *ids = data.ids();
  // --eval-data: the mean loss of the first min(64, available) non-overlapping windows, by the
  // evaluation entry (a loss that updates nothing).
  const kiln_entry_info *ev = nullptr;
  if (!f.eval_data.empty()) {
    ev = kilnrt_entry_by_role(&m, KILN_ROLE_EVAL);
    if (!ev) cli.die(1, "--eval-data: the model has no evaluation entry (training_entries' eval)");
    readTokens(cli, *ev, f.eval_data, "--eval-data", evalData);
    evalWin = windowsOf(cli, m, *ev);
    if (evalData.size() < evalWin.span(T))
      cli.die(1, "--eval-data '" + f.eval_data + "' holds " + std::to_string(evalData.size()) +
                     " tokens, fewer than one window of " + spanText(evalWin));
  } else if (f.eval_every) {
    cli.die(1, "--eval-every needs --eval-data");
  }
  auto evaluate = [&]() {  // window w on rank w mod P
    int64_t windows = std::min<int64_t>(64, (evalData.size() - evalWin.span(T) + T) / T);
    double sum = 0;
    for (int64_t w = rank; w < windows; w += P) {  // masked-LM: the same masks in every evaluation
      evalWin.set(cli, s, {evalData.ids() + w * T}, T, {mix(0x6576616cULL + (uint64_t)w)});
      cli.check(kilnrt_session_run(s, ev->name));
      sum += scalar(cli, s, KILN_OUTPUT_LOSS);
    }
    cli.check(kilnrt_group_sum(&sum, 1));
    return sum / (double)windows;
  };

  const int64_t first = setRunStates(cli, s, f);
  if (P > 1) checkRanksAgree(cli, s, f, P, data, evalData.t.data ? evalData.size() : -1, first);
  std::vector<const char *> terms;  // the loss terms the entry outputs by name (LossOptions::name): "loss.<name>"
  for (int k = 0; k < en->n_outputs; ++k)
    if (const char *o = m.io[en->outputs[k]].name; strncmp(o, "loss.", 5) == 0) terms.push_back(o);
  FILE *log = openLog(cli, rankLog(f.log, rank), first, P, terms);
  std::unique_ptr<FILE, int (*)(FILE *)> lguard(log, [](FILE *p) { return p ? fclose(p) : 0; });
  auto save = [&](int64_t step) {
    if (f.save.empty() || rank != 0) return;
    cli.check(session_save_weights(s, f.save.c_str(), run));
    if (!f.quiet) fprintf(stderr, "step %lld: checkpoint %s\n", (long long)step, f.save.c_str());
  };
  const int64_t every = std::max<int64_t>(1, f.steps / 20);
  int64_t t0 = kilnrt_time_now_ns(), lastSaved = first - 1;
  const int64_t B = f.batch;
  const bool quiet = f.quiet || rank != 0;  // progress from rank 0
  if (P > 1 && !f.quiet)
    fprintf(stderr, "rank %d of %d: rows [%lld, %lld) of each batch of %lld windows, %lld tokens per step\n", rank, P,
            (long long)lo, (long long)hi, (long long)B, (long long)(rows * T));
  std::vector<const int32_t *> starts(rows);
  std::vector<uint64_t> maskSeeds(rows);
  std::vector<double> reduced(1 + terms.size());
  for (int64_t step = first; step <= f.steps; ++step) {
    // The data stream, apart from init's; masks, a third stream. Window b > 0 of a step is drawn
    // from the step's draw, so window 0 is the same at every batch size.
    uint64_t r = mix(mix(f.seed ^ 0x7261696eULL) + (uint64_t)step), mk = mix(mix(f.seed ^ 0x6d61736bULL) + (uint64_t)step);
    for (int64_t b = lo; b < hi; ++b) {  // this rank's rows of the global batch
      uint64_t rb = b ? mix(r + (uint64_t)b) : r;
      starts[b - lo] = ids + (int64_t)(rb % (uint64_t)(n - span + 1));
      maskSeeds[b - lo] = b ? mix(mk + (uint64_t)b) : mk;
    }
    win.set(cli, s, starts, T, maskSeeds);
    int64_t s0 = kilnrt_time_now_ns();
    const double share = P > 1 ? lossShare(cli, win, rows, B) : 1;
    cli.check(kilnrt_session_run(s, en->name));
    const float rankLoss = scalar(cli, s, KILN_OUTPUT_LOSS);
    reduced[0] = rankLoss;  // the mean over the batch: the ranks' means weighted by their shares
    for (size_t k = 0; k < terms.size(); ++k) reduced[1 + k] = scalar(cli, s, terms[k]);
    if (P > 1) {
      for (double &v : reduced) v *= share;
      cli.check(kilnrt_group_sum(reduced.data(), (int64_t)reduced.size()));
    }
    double secs = (kilnrt_time_now_ns() - s0) / 1e9, elapsed = (kilnrt_time_now_ns() - t0) / 1e9;
    float loss = (float)reduced[0], lr = scalar(cli, s, KILN_OUTPUT_LR), gn = std::sqrt(scalar(cli, s, KILN_OUTPUT_GRAD_SUMSQ));
    if (!std::isfinite(loss) || !std::isfinite(gn))
      cli.die(1, "step " + std::to_string(step) + ": the loss is not finite (" + std::to_string(loss) +
                     ", gradient norm " + std::to_string(gn) + "); stopped" +
                     (lastSaved >= first ? ", the last checkpoint (step " + std::to_string(lastSaved) + ") is " + f.save
                                         : std::string(", no checkpoint written by this run")));
    std::string evalCell;
    if (ev && ((f.eval_every > 0 && step % f.eval_every == 0) || step == f.steps)) {
      char buf[32];
      snprintf(buf, sizeof buf, "%.6g", evaluate());
      evalCell = buf;
    }
    std::string termCells, termText;
    if (P > 1) {
      char buf[96];
      snprintf(buf, sizeof buf, ",%d,%lld,%lld,%.6g", rank, (long long)rows, (long long)(rows * T), rankLoss);
      termCells += buf;
    }
    for (size_t k = 0; k < terms.size(); ++k) {
      const char *t = terms[k];
      char buf[96];
      float v = (float)reduced[1 + k];
      snprintf(buf, sizeof buf, ",%.6g", v);
      termCells += buf;
      snprintf(buf, sizeof buf, " (%s %.4f)", t, v);
      termText += buf;
    }
    if (log) {
      fprintf(log, "%lld,%.6g,%s,%.6g,%.6g,%.1f,%.3f%s\n", (long long)step, loss, evalCell.c_str(), lr, gn, B * T / secs,
              elapsed, termCells.c_str());
      fflush(log);
    }
    if (!quiet && (step % every == 0 || step == first || step == f.steps || !evalCell.empty()))
      fprintf(stderr, "step %lld/%lld  loss %.4f%s%s%s  lr %.3g  grad norm %.3g  %.0f tok/s  %.1f s\n", (long long)step,
              (long long)f.steps, loss, termText.c_str(), evalCell.empty() ? "" : "  eval loss ", evalCell.c_str(), lr, gn,
              B * T / secs, elapsed);
    if (f.save_every > 0 && step % f.save_every == 0 && step != f.steps) {
      save(step);
      lastSaved = step;
    }
  }
  save(f.steps);
  cli.check(kilnrt_group_leave());
  return 0;
}

}  // namespace kilnrt
