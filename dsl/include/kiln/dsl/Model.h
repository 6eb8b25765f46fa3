// kiln/dsl/Model.h - the kiln model DSL: a model is a graph of tensors built by ordinary C++.
//
// Usage:
//
//   kiln::Model m("mlp");
//   kiln::Dim L = m.seq("L", 128);                       // dynamic length, compiled bound 128
//   kiln::Tensor x = m.input("x", {L, 64});
//   kiln::Tensor w = m.param("w", {64, 32});              // random init: normal(0, 0.02)
//   kiln::Tensor y = kiln::relu(kiln::linear(x, w, {.layout = kiln::WeightLayout::InOut}));
//   m.output("y", y);
//
// Ops only check shapes and record their sources (ggml style); nothing runs until the model is
// compiled. Every op records the caller's file:line; a shape error throws kiln::Error naming the
// op, the role of each operand, both sizes and that line.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <source_location>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include "kiln/dsl/OpKind.h"

namespace kiln {

using SourceLoc = std::source_location;

// The largest compiled bound of a sequence length (the DSL and kilnc input alike): lengths and
// per-dimension extents stay far inside Halide's 32-bit extents.
inline constexpr int64_t kMaxSeqBound = int64_t(1) << 24;

// A user error in a model program, reported at the user's line.
class Error : public std::runtime_error {
 public:
  Error(const std::string &msg, const SourceLoc &loc);
  std::string file;
  unsigned line;
};

enum class DType { F32, I32 };  // bf16 and f16 slot in here
const char *dtype_name(DType t);

// One dimension: static (sym < 0) or a sequence length symbol with a compile-time bound.
struct Dim {
  int64_t size = 0;  // static extent, or the symbol's upper bound
  int sym = -1;
  Dim() = default;
  Dim(int64_t s) : size(s) {}  // NOLINT: static dims read like integers
  Dim(int64_t bound, int symbol) : size(bound), sym(symbol) {}
  bool dynamic() const { return sym >= 0; }
  bool operator==(const Dim &o) const { return sym == o.sym && (sym >= 0 || size == o.size); }
  bool operator!=(const Dim &o) const { return !(*this == o); }
};
using Shape = std::vector<Dim>;

enum class WeightLayout { OutIn, InOut };  // x·Wᵀ with W [out, in] (nn.Linear); x·W with W [in, out] (Conv1D)
enum class GeluApprox { Erf, Tanh };
// Rotary positions pair feature i with i + d/2 (HalfSplit: Hugging Face's rotate_half) or 2i
// with 2i + 1 (Interleaved: GPT-J, GGUF's own layout).
enum class RopeStyle { HalfSplit, Interleaved };
enum class Init { Normal, Ones, Zeros };

// Which of a factorized pattern's two halves a head attends to (the Sparse Transformer's A(1)
// and A(2)), or their union (one merged head).
enum class Part { Union, Local, Global };

// The Sparse Transformer's strided pattern: Local, the previous `stride` positions
// (i - stride < j <= i); Global, every stride-th position before (j <= i, (i - j) % stride == 0).
struct StridedPattern {
  int64_t stride = 0;
  Part part = Part::Union;
};
// The fixed pattern: Local, the query's own block of `block` positions (j / block == i / block,
// j <= i); Global, the last `summary` positions of every block (j % block >= block - summary,
// j <= i).
struct FixedPattern {
  int64_t block = 0;
  int64_t summary = 1;
  Part part = Part::Union;
};
// A user's block layout: rows[r][c] == '#' lets query block r see key block c (blocks of
// `block` positions; '.' elsewhere); causal adds j <= i. Covers rows.size() * block positions.
struct BlockLayout {
  int64_t block = 0;
  std::vector<std::string> rows;
  bool causal = true;
};

// Which keys each query may see. Every pattern but a non-causal layout is causal (j <= i).
enum class Precision { F32, BF16 };

// What an entry point is for (the runtime's kiln_entry_role): generation runs the Prefill (or
// Encode) and Decode entries, ./model --train the TrainStep and Eval ones; any entry also runs by
// its name (--entry). The first entry, "forward", is Forward. Extend appends a chunk of tokens at
// `past` of the caches (a conversation continued: only the new turn runs).
enum class EntryRole { Other, Forward, Prefill, Decode, DecodeBatch, Encode, Gradients, Eval, TrainStep, Extend };

struct Mask {
  enum Kind { None, Causal, Window, Strided, Fixed, Layout } kind = None;
  int64_t size = 0;     // window: w; strided: the stride; fixed and layout: the block
  int64_t summary = 0;  // fixed: summary positions per block
  Part part = Part::Union;
  std::vector<std::string> layout;
  bool layout_causal = true;
  static Mask none() { return {}; }
  static Mask causal() { return {Causal}; }
  // i - w < j <= i (a local window of w positions, the query's own included).
  static Mask window(int64_t w) { return {Window, w}; }
  static Mask strided(StridedPattern p) { return {Strided, p.stride, 0, p.part}; }
  static Mask fixed(FixedPattern p) { return {Fixed, p.block, p.summary, p.part}; }
  static Mask block_layout(BlockLayout l) { return {Layout, l.block, 0, Part::Union, l.rows, l.causal}; }
  bool sparse() const { return kind > Causal; }  // a pattern for kiln-tile-sparse-pattern
};

class Model;

// An attribute of a generic op (OpKind::Op), by the name the dialect op declares it under:
// an f32 or i64 value, or a unit attribute (present when set).
struct OpAttr {
  enum class Type { F32, I64, Unit };
  std::string name;
  Type type = Type::F32;
  double value = 0;
};

// A node of the graph: everything an op needs is here, filled by the op constructors.
struct Node {
  OpKind kind;
  std::vector<int> inputs;
  Shape shape;
  DType dtype = DType::F32;
  std::string name;  // inputs, parameters
  // attributes (each op uses the ones its kind names)
  WeightLayout layout = WeightLayout::OutIn;
  bool transpose_b = false;
  GeluApprox approx = GeluApprox::Erf;
  RopeStyle rope_style = RopeStyle::HalfSplit;  // rope: the pairing, theta, the position scaling
  float theta = 0, rope_scaling = 1;
  int64_t rope_original_context = 0;  // rope: Llama 3.1's frequency-dependent scaling (0: none)
  float rope_low_freq_factor = 0, rope_high_freq_factor = 0;
  Mask mask;
  float eps = 0, factor = 1;
  float until = 0;  // loss_weight: the fraction of the training steps its term counts for
  int64_t axis = 0, offset = 0, vocab = 0;
  std::vector<int64_t> perm;
  Init init = Init::Normal;
  float init_scale = 0.02f;
  bool optional = false;
  int64_t fill = 0;
  bool key_count = false;
  bool key_mask = false;
  int64_t buckets = 0, hashes = 0, chunk = 0;  // lsh_attention  // attention: the extra operand counts valid keys (not past positions)
  int entry = 0;  // the entry point whose function the node belongs to
  // recurrent: the step's region, its argument node and its result node; max_steps; eps is the
  // ACT epsilon (halting threshold 1 - eps). recurrent_result: axis is the result (1 ponder, 2 steps, 3 iterations).
  int region = -1;  // the recurrent step this node was made in (-1: the entry's top level)
  int body = -1, body_arg = -1, body_out = -1;
  int64_t max_steps = 0;
  int64_t ignore_index = 0;  // cross_entropy; target inputs: the id of a position without a target
  int checkpoint = -1;       // the checkpointed block (Model::checkpoint) this node was made in
  std::string op;            // a generic op (OpKind::Op): the dialect op's name without "kiln."
  std::vector<OpAttr> attrs;  // and its attributes
  int reversible = -1;       // the reversible layer (Model::reversible_part) this node was made in
  int reversible_part = 0;   // ... and its part: 0 the halves, sums and concat; 1 F; 2 G
  float mask_rate = 0;       // masked-LM target inputs: the fraction --train masks, and the mask id
  int64_t mask_token = 0;
  int64_t ahead = 0;  // target inputs: --train's target is the token this many positions on (0: "targets"' convention)
  int state_batch = -1;  // a state: the batch symbol it holds one copy per sequence of (-1: one copy)
  bool cache_slots = false;  // an input: the per-sequence state slot each row of its entry uses (Model::cache_slots)
  SourceLoc loc;
};
// The op's name (a generic op's own).
inline const char *op_name(const Node &n) { return n.kind == OpKind::Op ? n.op.c_str() : op_name(n.kind); }

// A handle to a node. Cheap to copy; valid while its Model lives.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Model *m, int id) : m_(m), id_(id) {}
  Model *model() const { return m_; }
  int id() const { return id_; }
  const Node &node() const;
  const Shape &shape() const { return node().shape; }
  DType dtype() const { return node().dtype; }
  int rank() const { return (int)shape().size(); }
  Dim dim(int i) const { return shape().at(i < 0 ? i + rank() : i); }
  explicit operator bool() const { return m_ != nullptr; }

 private:
  Model *m_ = nullptr;
  int id_ = -1;
};

struct InputOptions {
  DType dtype = DType::F32;
  int64_t vocab = 0;      // token inputs: ids must be in [0, vocab)
  bool optional = false;  // may be left out at run time, and is then all `fill`
  int64_t fill = 0;       // optional inputs: their value when left out (1: an attention mask that keeps all)
  int64_t ignore_index = 0;  // token inputs: this negative id is accepted too (a target to ignore)
};
struct ParamOptions {
  Init init = Init::Normal;
  float scale = 0.02f;
};

// Masked-LM targets (BERT's pretraining): `./model --train` masks `rate` of each window's
// positions in the entry's "tokens" (80% become mask_token, 10% a random id, 10% stay) and
// gives their original ids as targets, -1 elsewhere.
struct MaskedLM {
  int64_t mask_token = -1;
  float rate = 0.15f;
};

// Targets `k` positions ahead (Al-Rfou et al. 2018's multiple targets): position i's target is
// the token at i + k. `./model --train` fills such an input from the same window as the
// entry's "targets" (the next token, k = 1), which then spans T + k ids.
struct Ahead {
  int64_t k = 2;
  int64_t ignore_index = -1;
};

struct LossOptions {
  float weight = 1.0f;
  // A term for the first part of training only (an auxiliary loss that is dropped, as Al-Rfou et
  // al. 2018 drop each intermediate layer's): with `until` in (0, 1], the term counts at the
  // training steps t <= until · T (t from 1; T the run's total, `./model --train --steps T`)
  // and is multiplied by 0 after them (kiln.loss_weight). Outside such a run (T unknown: an
  // entry run on its own) it always counts. 0: always.
  float until = 0.0f;
  // Non-empty: the entry also outputs the term before its weight as "loss.<name>" (`--train`
  // logs each such output beside the total, so the next-token loss of a run with auxiliary
  // terms can be followed on its own).
  std::string name;
};

// AdamW as torch.optim.AdamW: decoupled weight decay, bias-corrected moments.
struct AdamW {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};
// After the warmup, the learning rate follows a half cosine from lr down to min_ratio · lr at
// step `steps` (counted from the first step), then stays there.
struct Cosine {
  int64_t steps = 0;
  float min_ratio = 0.1f;
};
struct TrainOptions {
  AdamW optimizer;
  float clip_norm = 1.0f;  // global gradient norm clipping (0: none)
  int64_t warmup_steps = 0;  // linear warmup from lr / warmup_steps to lr
  std::optional<Cosine> decay;  // none: constant after the warmup
  // Which parameters get weight decay (null: those of rank >= 2, not biases and norms).
  std::function<bool(const std::string &name, const Shape &shape)> decays;
};

class Model {
 public:
  explicit Model(std::string name) : name_(std::move(name)) {}
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  // A sequence length: dynamic at run time, at most `max` (the compiled bound).
  Dim seq(const std::string &name, int64_t max, SourceLoc loc = SourceLoc::current());
  // A batch: B sequences (at most `max`) that share one length and run together.
  //   Dim B = m.batch("B", 8), L = m.seq("L", 1024);
  //   Tensor tokens = m.tokens("tokens", m.rows(B, L), vocab);   // [B, L] at run time
  // kiln keeps a batch as rows: rows(B, L) is B·L rows, sequence b's positions at rows
  // [b·L, (b+1)·L). Row-wise ops (linears, norms, activations, losses) run over all B·L rows;
  // attention, learned and sinusoidal positions restart every L rows (each sequence attends to
  // itself only). Inputs and outputs over such rows are [B, L, ...] arrays; a run given one
  // sequence without the batch dim ([L, ...]) is a batch of one and returns its outputs without
  // it too. An entry that writes a KV cache of one buffer (not one per sequence: see state()) or
  // takes the last row runs one sequence at a time.
  Dim batch(const std::string &name, int64_t max, SourceLoc loc = SourceLoc::current());
  Dim rows(Dim batch, Dim length, SourceLoc loc = SourceLoc::current());
  // The length of one sequence of `d`: L for rows(B, L), d itself otherwise.
  Dim per_sequence(const Dim &d) const;
  Tensor input(const std::string &name, Shape shape, InputOptions opt = {}, SourceLoc loc = SourceLoc::current());
  Tensor tokens(const std::string &name, Dim length, int64_t vocab, SourceLoc loc = SourceLoc::current());
  // Token ids that may be left out (then all 0), like BERT's token_type_ids.
  Tensor optional_tokens(const std::string &name, Dim length, int64_t vocab, SourceLoc loc = SourceLoc::current());
  Tensor param(const std::string &name, Shape shape, ParamOptions opt = {}, SourceLoc loc = SourceLoc::current());
  void output(const std::string &name, Tensor t, SourceLoc loc = SourceLoc::current());
  // Training targets: token ids in [0, vocab), or `ignore_index` (negative) where a position has
  // no target (cross_entropy skips it).
  Tensor targets(const std::string &name, Dim length, int64_t vocab, int64_t ignore_index = -1,
                 SourceLoc loc = SourceLoc::current());
  // Masked-LM targets (-1 where a position is not masked): --train masks the entry's "tokens"
  // (MaskedLM) and sets these, instead of shifting the window by one.
  Tensor targets(const std::string &name, Dim length, int64_t vocab, MaskedLM mlm, SourceLoc loc = SourceLoc::current());
  // Targets k positions ahead (Ahead): --train sets them with the entry's "targets".
  Tensor targets(const std::string &name, Dim length, int64_t vocab, Ahead ahead, SourceLoc loc = SourceLoc::current());
  // Adds weight · t (a [1] scalar of this entry, such as a cross_entropy) to the entry's loss,
  // its output "loss" (the sum of every term added).
  void loss(Tensor t, LossOptions opt = {}, SourceLoc loc = SourceLoc::current());
  // weight · mean(t) is added to the current entry's loss if it has one, else when it gets its
  // first term (loss()); never in an entry without a loss. Named "loss.<name>". recurrent()'s
  // ponder cost: an entry that trains a recurrent pays for its steps, one that runs it does not.
  void loss_if_any(Tensor t, float weight, const std::string &name, SourceLoc loc = SourceLoc::current());
  // The current entry also returns the gradient of its loss with respect to every parameter it
  // uses, as outputs "grad.<name>" (kiln-differentiate builds them in the compiler).
  void gradients(SourceLoc loc = SourceLoc::current());
  // Gradient checkpointing: calls `block` and marks every op it makes as one checkpointed block.
  // A differentiated entry then keeps only the block's inputs for its backward pass and
  // recomputes the block's activations there (kiln-recompute-checkpoints), trading the block's
  // forward FLOPs once more for its saved activations. Returns what `block` returns:
  //   x = m.checkpoint([&] { return transformer_block(x); });
  Tensor checkpoint(const std::function<Tensor()> &block, SourceLoc loc = SourceLoc::current());
  // Reversible layers (Blocks.h's reversible builds them with these): new_reversible() numbers
  // a layer; reversible_part(layer, part, fn) calls fn and marks every op it makes as `part` of
  // that layer (0: the halves, the sums and the concat; 1: F; 2: G). A differentiated entry's
  // backward then reconstructs the layer's input from its output instead of keeping its
  // activations (kiln-reverse-layers).
  int new_reversible(SourceLoc loc = SourceLoc::current());
  Tensor reversible_part(int layer, int part, const std::function<Tensor()> &fn, SourceLoc loc = SourceLoc::current());
  // The current entry becomes a training step (EntryRole::TrainStep, whatever its role was): its
  // loss is differentiated and every parameter it uses is updated in place by AdamW (moments and
  // the step count are states named "optimizer.*"); it returns "loss", "lr" and "grad_sumsq".
  // No dropout.
  void train(TrainOptions opt = {}, SourceLoc loc = SourceLoc::current());
  const TrainOptions *training(int entry) const {
    auto it = train_.find(entry);
    return it == train_.end() ? nullptr : &it->second;
  }
  bool differentiated(int entry) const {
    return entry < (int)differentiate_.size() && differentiate_[entry];
  }
  // Entry points: nodes made after entry("decode", EntryRole::Decode) belong to a second function
  // of the model. Parameters and states are shared between entries by name (same shape); inputs
  // and outputs belong to their entry, with names unique in the model (an output name may recur
  // in another entry with the same shape: one output, such as each entry's "loss"). One entry
  // per role but Other.
  void entry(const std::string &name, EntryRole role = EntryRole::Other, SourceLoc loc = SourceLoc::current());
  const std::vector<std::string> &entries() const { return entries_; }
  EntryRole role(int entry) const { return roles_.at(entry); }
  int current_entry() const { return (int)entries_.size() - 1; }
  // A state buffer: persistent across runs and entries, zero when the executable starts (a KV
  // cache). Written with cache_write, read by attention.
  Tensor state(const std::string &name, Shape shape, SourceLoc loc = SourceLoc::current());
  // One state of `shape` per sequence of `batch` (Model::batch; its bound many): a KV cache that
  // entries over rows(batch, L), or over one row per sequence ([batch] tokens: a batched decode
  // step), write and read sequence by sequence; an entry without the batch uses sequence 0's.
  Tensor state(const std::string &name, Shape shape, Dim batch, SourceLoc loc = SourceLoc::current());
  // The slots of the per-sequence states (state(name, shape, batch)) that this entry's rows read
  // and write: an i32 input of `rows` ids in [0, batch's bound), one per sequence of the entry
  // (`rows`: the batch itself for a batched decode step, 1 for an entry of one sequence such as
  // a chunk appended to one slot's cache). Row r uses slot slots[r] instead of slot r, so a
  // server decodes only its active sequences, whichever slots they hold; the runtime refuses a
  // slot given twice, and one left out is 0, 1, 2, ... (slot r). One per entry.
  //   Tensor slots = m.cache_slots("slots", B, B);
  Tensor cache_slots(const std::string &name, Dim rows, Dim batch, SourceLoc loc = SourceLoc::current());
  // Runs `t` (a cache_write) even though no output depends on it.
  void keep(Tensor t, SourceLoc loc = SourceLoc::current());
  const std::vector<int> &kept() const { return kept_; }

  // Used by recurrent(): nodes made between begin_region and end_region form one step's body.
  int begin_region(SourceLoc loc = SourceLoc::current());
  void end_region() { region_ = -1; }
  int current_region() const { return region_; }

  // Mixed precision: with Precision::BF16 the model's GEMMs (linear, matmul, the FFN)
  // round both operands to bfloat16 and sum in f32 (kiln-assign-precision); the driver's
  // --precision overrides it.
  void set_precision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }

  // Checkpoint conventions: files may omit `prefix` from parameter names (Hugging Face saves
  // GPT-2 both with and without "transformer."), and may carry tensors matching the glob
  // `patterns` that are not parameters (mask buffers, other heads); those are skipped.
  void weights_prefix(const std::string &prefix) { weights_prefix_ = prefix; }
  void ignore_weights(std::vector<std::string> patterns) {
    for (auto &p : patterns) ignored_.push_back(p);
  }
  const std::string &weights_prefix() const { return weights_prefix_; }
  // The checkpoint config.json this model is built for, field by field: a compiled model
  // compares them with the config.json beside its weights, `--config` with the one it is given.
  // `value` and `absent` are JSON text; `absent` is what the field means when config.json omits
  // it or sets it to null (none: it must be given); `key` may list alternatives "a|b".
  // `at_least`: any number no smaller than `value` passes, and null (a window of "none").
  struct ConfigField {
    std::string key, value, what;
    std::optional<std::string> absent;
    bool at_least = false;
  };
  void checkpoint_config(std::vector<ConfigField> fields) {
    for (auto &f : fields) config_.push_back(std::move(f));
  }
  const std::vector<ConfigField> &checkpoint_config() const { return config_; }
  const std::vector<std::string> &ignored_weights() const { return ignored_; }

  const std::string &name() const { return name_; }
  struct Symbol {
    std::string name;
    int64_t max;
    bool batch = false;              // made by batch()
    int rows_of = -1, length = -1;  // rows(B, L): the batch's and the length's symbols
  };
  const std::vector<Symbol> &symbols() const { return syms_; }
  const std::vector<Node> &nodes() const { return nodes_; }
  const std::vector<std::pair<std::string, int>> &outputs() const { return outputs_; }  // node's entry
  const Node &node(int id) const { return nodes_.at(id); }

  // Used by op constructors: append a node and return its handle.
  Tensor add(Node n);
  std::string dim_str(const Dim &d) const;
  std::string shape_str(const Shape &s) const;

 private:
  std::string name_;
  std::vector<Symbol> syms_;
  std::vector<Node> nodes_;
  std::vector<std::pair<std::string, int>> outputs_;
  std::string weights_prefix_;
  Precision precision_ = Precision::F32;
  std::vector<std::string> ignored_;
  std::vector<ConfigField> config_;
  std::vector<std::string> entries_{"forward"};
  std::vector<EntryRole> roles_{EntryRole::Forward};
  std::vector<int> kept_;
  struct PendingTerm {
    int tensor;
    float weight;
    std::string name;
    SourceLoc loc;
  };
  std::vector<PendingTerm> pending_terms_;  // loss_if_any's, until their entry has a loss
  std::vector<bool> differentiate_;
  std::map<int, TrainOptions> train_;
  int region_ = -1, regions_ = 0;
  int checkpoint_ = -1, checkpoints_ = 0;
  int reversible_ = -1, reversible_part_ = 0, reversibles_ = 0;
  // A parameter or state already declared under this name (shared across entries), or -1.
  int shared(OpKind kind, const std::string &name, const Shape &shape, const SourceLoc &loc);
  void check_new_name(const std::string &what, const std::string &name, const SourceLoc &loc);
};

// The training entries of a model: `gradients` (its loss and every parameter's gradient),
// `eval` (the loss alone) and `train_step` (the loss, its backward and `opt`'s optimizer:
// ./model --train), in that order. `loss(role)` declares the entry's inputs and its loss terms
// (Model::loss) anew each time, the same model; `role` says which of the three it builds (an
// auxiliary term may be left out of Eval).
void training_entries(Model &m, const std::function<void(EntryRole)> &loss, TrainOptions opt = {},
                      SourceLoc loc = SourceLoc::current());

}  // namespace kiln
