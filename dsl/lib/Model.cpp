// kiln DSL: the Model graph, its inputs, parameters and outputs.
#include <filesystem>

#include "kiln/dsl/Model.h"

#include <cmath>

#include "kiln/dsl/Ops.h"
#include "kilnrt/model.h"

namespace kiln {

static std::string where(const SourceLoc &loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line());
}

Error::Error(const std::string &msg, const SourceLoc &loc)
    : std::runtime_error(where(loc) + ": error: " + msg), file(loc.file_name()), line(loc.line()) {}

const char *dtype_name(DType t) { return t == DType::F32 ? "f32" : "i32"; }

const Node &Tensor::node() const { return m_->node(id_); }

std::string Model::dim_str(const Dim &d) const {
  return d.dynamic() ? syms_.at(d.sym).name + "(<=" + std::to_string(d.size) + ")" : std::to_string(d.size);
}
std::string Model::shape_str(const Shape &s) const {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + dim_str(s[i]);
  return r + "]";
}

void Model::check_new_name(const std::string &what, const std::string &name, const SourceLoc &loc) {
  if (name.empty()) throw Error(what + ": the name must not be empty", loc);
  for (const Node &n : nodes_)
    if ((n.kind == OpKind::Input || n.kind == OpKind::Param || n.kind == OpKind::State) && n.name == name)
      throw Error(what + ": the name '" + name + "' is already used by another input, parameter or state", loc);
  for (auto &o : outputs_)
    if (o.first == name) throw Error(what + ": the name '" + name + "' is already used by an output", loc);
}

Dim Model::seq(const std::string &name, int64_t max, SourceLoc loc) {
  if (max < 1) throw Error("seq: the bound of '" + name + "' must be at least 1, got " + std::to_string(max), loc);
  if (max > kMaxSeqBound)
    throw Error("seq: the bound of '" + name + "' is " + std::to_string(max) + ", more than kiln supports (" +
                    std::to_string(kMaxSeqBound) + ")",
                loc);
  for (auto &s : syms_)
    if (s.name == name) throw Error("seq: a sequence length named '" + name + "' already exists", loc);
  if (syms_.size() == 8) throw Error("seq: a model has at most 8 lengths, batches and rows of batches", loc);
  syms_.push_back({name, max});
  return Dim(max, (int)syms_.size() - 1);
}

Dim Model::batch(const std::string &name, int64_t max, SourceLoc loc) {
  Dim b = seq(name, max, loc);
  syms_[b.sym].batch = true;
  return b;
}

Dim Model::rows(Dim batch, Dim length, SourceLoc loc) {
  if (!batch.dynamic() || !syms_.at(batch.sym).batch)
    throw Error("rows: the first dim must be a batch (Model::batch), got " + dim_str(batch), loc);
  if (!length.dynamic() || syms_.at(length.sym).batch || syms_.at(length.sym).rows_of >= 0)
    throw Error("rows: the second dim must be a sequence length (Model::seq), got " + dim_str(length), loc);
  for (size_t i = 0; i < syms_.size(); ++i)
    if (syms_[i].rows_of == batch.sym && syms_[i].length == length.sym) return Dim(syms_[i].max, (int)i);
  int64_t max = batch.size * length.size;
  if (max > kMaxSeqBound)
    throw Error("rows: " + dim_str(batch) + " x " + dim_str(length) + " = " + std::to_string(max) +
                    " rows, more than kiln supports (" + std::to_string(kMaxSeqBound) + ")",
                loc);
  if (syms_.size() == 8) throw Error("rows: a model has at most 8 lengths, batches and rows of batches", loc);
  syms_.push_back({syms_[batch.sym].name + "*" + syms_[length.sym].name, max, false, batch.sym, length.sym});
  return Dim(max, (int)syms_.size() - 1);
}

Dim Model::per_sequence(const Dim &d) const {
  if (!d.dynamic() || syms_.at(d.sym).rows_of < 0) return d;
  const Symbol &l = syms_[syms_[d.sym].length];
  return Dim(l.max, syms_[d.sym].length);
}

static void check_shape(const Model &m, const std::string &what, const Shape &s, const SourceLoc &loc) {
  if (s.empty() || s.size() > 4) throw Error(what + ": rank must be 1 to 4, got " + std::to_string(s.size()), loc);
  for (auto &d : s) {
    if (!d.dynamic() && d.size < 1)
      throw Error(what + ": dimensions must be positive, got " + m.shape_str(s), loc);
    if (d.dynamic() && d.sym >= (int)m.symbols().size()) throw Error(what + ": unknown sequence length", loc);
  }
}

Tensor Model::input(const std::string &name, Shape shape, InputOptions opt, SourceLoc loc) {
  if (region_ >= 0) throw Error("input '" + name + "': declare inputs outside a recurrent step", loc);
  if (int prev = shared(OpKind::Input, name, shape, loc); prev >= 0) {  // the same input in another entry
    Node n = nodes_[prev];
    if (n.dtype != opt.dtype || n.vocab != opt.vocab || n.optional != opt.optional || n.fill != opt.fill ||
        n.ignore_index != opt.ignore_index)
      throw Error("input '" + name + "' is shared between entries but its options differ from entry '" +
                      entries_[n.entry] + "'",
                  loc);
    n.loc = loc;
    return add(n);
  }
  check_new_name("input", name, loc);
  check_shape(*this, "input '" + name + "'", shape, loc);
  if (opt.vocab < 0) throw Error("input '" + name + "': vocab must be positive", loc);
  Node n{.kind = OpKind::Input, .shape = shape, .dtype = opt.dtype, .name = name};
  n.vocab = opt.vocab;
  n.optional = opt.optional;
  if (opt.fill && !opt.optional) throw Error("input '" + name + "': fill applies to an optional input", loc);
  n.fill = opt.fill;
  n.ignore_index = opt.ignore_index;
  n.loc = loc;
  return add(n);
}

Tensor Model::optional_tokens(const std::string &name, Dim length, int64_t vocab, SourceLoc loc) {
  if (vocab < 1) throw Error("optional_tokens '" + name + "': vocab must be at least 1, got " + std::to_string(vocab), loc);
  return input(name, {length}, {.dtype = DType::I32, .vocab = vocab, .optional = true}, loc);
}

Tensor Model::targets(const std::string &name, Dim length, int64_t vocab, int64_t ignore_index, SourceLoc loc) {
  if (vocab < 1) throw Error("targets '" + name + "': vocab must be at least 1, got " + std::to_string(vocab), loc);
  if (ignore_index >= 0)
    throw Error("targets '" + name + "': ignore_index must be negative (ids in [0, vocab) are targets), got " +
                    std::to_string(ignore_index),
                loc);
  return input(name, {length}, {.dtype = DType::I32, .vocab = vocab, .ignore_index = ignore_index}, loc);
}

Tensor Model::targets(const std::string &name, Dim length, int64_t vocab, Ahead ahead, SourceLoc loc) {
  if (ahead.k < 1 || ahead.k > 1024)
    throw Error("targets '" + name + "': the target must be 1 to 1024 positions ahead, got " + std::to_string(ahead.k), loc);
  Tensor t = targets(name, length, vocab, ahead.ignore_index, loc);
  nodes_[t.id()].ahead = ahead.k;
  return t;
}

Tensor Model::targets(const std::string &name, Dim length, int64_t vocab, MaskedLM mlm, SourceLoc loc) {
  if (mlm.mask_token < 0 || mlm.mask_token >= vocab)
    throw Error("targets '" + name + "': the mask token must be an id in [0, " + std::to_string(vocab) + "), got " +
                    std::to_string(mlm.mask_token),
                loc);
  if (!(mlm.rate > 0 && mlm.rate <= 1))
    throw Error("targets '" + name + "': the masked fraction must be in (0, 1], got " + std::to_string(mlm.rate), loc);
  Tensor t = targets(name, length, vocab, -1, loc);
  nodes_[t.id()].mask_rate = mlm.rate;
  nodes_[t.id()].mask_token = mlm.mask_token;
  return t;
}

void Model::loss(Tensor t, LossOptions opt, SourceLoc loc) {
  if (!t || t.model() != this) throw Error("loss: the tensor does not belong to this model", loc);
  if (t.node().entry != current_entry())
    throw Error("loss: the tensor belongs to entry '" + entries_[t.node().entry] + "', not '" +
                    entries_[current_entry()] + "'",
                loc);
  if (t.dtype() != DType::F32 || t.rank() != 1 || t.dim(0) != Dim(1))
    throw Error("loss: a loss term must be an f32 scalar of shape [1] (such as a cross_entropy), got " +
                    shape_str(t.shape()),
                loc);
  if (!std::isfinite(opt.weight)) throw Error("loss: the weight must be finite", loc);
  if (!(opt.until >= 0.0f && opt.until <= 1.0f))
    throw Error("loss: until must be a fraction of the training steps in (0, 1], or 0 for a term that always counts, got " +
                    std::to_string(opt.until),
                loc);
  if (!opt.name.empty()) output("loss." + opt.name, kiln::scale(t, 1.0f, loc), loc);  // its own kernel: t may be the loss
  Tensor term;
  if (opt.until > 0.0f) {  // weight · t while this step is within the first until · T, else 0 · t
    auto counter = [&](const char *name) {  // this entry's state, made by its first scheduled term
      for (size_t i = 0; i < nodes_.size(); ++i)
        if (nodes_[i].kind == OpKind::State && nodes_[i].name == name && nodes_[i].entry == current_entry()) return (int)i;
      return state(name, {1}, loc).id();
    };
    Node w{.kind = OpKind::LossWeight, .inputs = {counter(KILN_STATE_STEP), counter(KILN_STATE_STEPS)}, .shape = {1}};
    w.factor = opt.weight;
    w.until = opt.until;
    w.loc = loc;
    term = kiln::mul(t, add(w), loc);
  } else {
    term = opt.weight == 1.0f ? t : kiln::scale(t, opt.weight, loc);
  }
  bool added = false;
  for (auto &o : outputs_)
    if (o.first == KILN_OUTPUT_LOSS && nodes_[o.second].entry == current_entry()) {
      o.second = kiln::add(Tensor(this, o.second), term, loc).id();
      added = true;
      break;
    }
  if (!added) output(KILN_OUTPUT_LOSS, term, loc);
  // Terms waiting for this entry's loss (loss_if_any).
  for (size_t i = 0; i < pending_terms_.size();) {
    if (nodes_[pending_terms_[i].tensor].entry != current_entry()) {
      ++i;
      continue;
    }
    PendingTerm p = pending_terms_[i];
    pending_terms_.erase(pending_terms_.begin() + (long)i);
    loss(kiln::mean(Tensor(this, p.tensor), p.loc), {.weight = p.weight, .name = p.name}, p.loc);
  }
}

void Model::loss_if_any(Tensor t, float weight, const std::string &name, SourceLoc loc) {
  if (!t || t.model() != this) throw Error("loss: the tensor does not belong to this model", loc);
  if (!std::isfinite(weight)) throw Error("loss: the weight of '" + name + "' must be finite", loc);
  for (auto &o : outputs_)
    if (o.first == KILN_OUTPUT_LOSS && nodes_[o.second].entry == t.node().entry) {
      loss(kiln::mean(t, loc), {.weight = weight, .name = name}, loc);
      return;
    }
  pending_terms_.push_back({t.id(), weight, name, loc});
}

void Model::gradients(SourceLoc loc) {
  bool has = false;
  for (auto &o : outputs_) has |= o.first == KILN_OUTPUT_LOSS && nodes_[o.second].entry == current_entry();
  if (!has) throw Error("gradients: entry '" + entries_[current_entry()] + "' has no loss yet (add one with loss())", loc);
  if ((int)differentiate_.size() <= current_entry()) differentiate_.resize(current_entry() + 1);
  differentiate_[current_entry()] = true;
}

Tensor Model::checkpoint(const std::function<Tensor()> &block, SourceLoc loc) {
  if (checkpoint_ >= 0) throw Error("checkpoint: a checkpointed block inside another one is not supported", loc);
  if (region_ >= 0) throw Error("checkpoint: not supported inside a recurrent step", loc);
  if (!block) throw Error("checkpoint: no block given", loc);
  checkpoint_ = checkpoints_++;
  struct Reset {
    int &c;
    ~Reset() { c = -1; }
  } reset{checkpoint_};
  return block();
}

int Model::new_reversible(SourceLoc loc) {
  if (reversible_ >= 0) throw Error("reversible: a reversible layer inside another one's F or G is not supported", loc);
  return reversibles_++;
}

Tensor Model::reversible_part(int layer, int part, const std::function<Tensor()> &fn, SourceLoc loc) {
  if (layer < 0 || layer >= reversibles_ || part < 0 || part > 2)
    throw Error("reversible: layer " + std::to_string(layer) + " part " + std::to_string(part) + " was not made by new_reversible", loc);
  if (reversible_ >= 0 && reversible_ != layer)
    throw Error("reversible: a reversible layer inside another one's F or G is not supported", loc);
  struct Restore {
    int &l, &p, l0, p0;
    ~Restore() { l = l0, p = p0; }
  } restore{reversible_, reversible_part_, reversible_, reversible_part_};
  reversible_ = layer, reversible_part_ = part;
  return fn();
}

void Model::train(TrainOptions opt, SourceLoc loc) {
  gradients(loc);
  const AdamW &a = opt.optimizer;
  auto bad = [&](const std::string &what) { throw Error("train: " + what, loc); };
  if (!(a.lr > 0) || !std::isfinite(a.lr)) bad("the learning rate must be positive, got " + std::to_string(a.lr));
  if (!(a.beta1 >= 0 && a.beta1 < 1) || !(a.beta2 >= 0 && a.beta2 < 1)) bad("betas must lie in [0, 1)");
  if (!(a.eps > 0)) bad("eps must be positive");
  if (!(a.weight_decay >= 0) || !std::isfinite(a.weight_decay)) bad("weight_decay must be non-negative");
  if (!(opt.clip_norm >= 0) || !std::isfinite(opt.clip_norm)) bad("clip_norm must be non-negative (0: no clipping)");
  if (opt.warmup_steps < 0) bad("warmup_steps must be non-negative");
  if (opt.decay && (opt.decay->steps <= opt.warmup_steps || !(opt.decay->min_ratio >= 0 && opt.decay->min_ratio <= 1)))
    bad("the cosine decay needs steps beyond the warmup and min_ratio in [0, 1]");
  // The entry's role is now the training step's (the runtime's --train finds it so).
  for (int e = 0; e < (int)roles_.size(); ++e)
    if (e != current_entry() && roles_[e] == EntryRole::TrainStep)
      bad("entry '" + entries_[e] + "' is the training step already (one per model)");
  roles_[current_entry()] = EntryRole::TrainStep;
  train_[current_entry()] = std::move(opt);
}

Tensor Model::tokens(const std::string &name, Dim length, int64_t vocab, SourceLoc loc) {
  if (vocab < 1) throw Error("tokens '" + name + "': vocab must be at least 1, got " + std::to_string(vocab), loc);
  return input(name, {length}, {.dtype = DType::I32, .vocab = vocab}, loc);
}

int Model::shared(OpKind kind, const std::string &name, const Shape &shape, const SourceLoc &loc) {
  for (const Node &n : nodes_)
    if (n.kind == kind && n.name == name && n.entry == current_entry())
      throw Error(std::string(op_name(kind)) + ": the name '" + name + "' is already used in this entry", loc);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node &n = nodes_[i];
    if (n.kind != kind || n.name != name) continue;
    if (!(n.shape == shape))
      throw Error(std::string(op_name(kind)) + " '" + name + "' is shared between entries but has shape " +
                      shape_str(shape) + " here and " + shape_str(n.shape) + " in entry '" + entries_[n.entry] + "'",
                  loc);
    return (int)i;
  }
  return -1;
}

void Model::entry(const std::string &name, EntryRole role, SourceLoc loc) {
  if (region_ >= 0) throw Error("entry: a new entry cannot start inside a recurrent step", loc);
  for (auto &e : entries_)
    if (e == name) throw Error("entry: an entry point named '" + name + "' already exists", loc);
  if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
    throw Error("entry: the name must be lower-case letters, digits and '_', got '" + name + "'", loc);
  for (size_t e = 0; e < roles_.size(); ++e)
    if (role != EntryRole::Other && roles_[e] == role)
      throw Error("entry: '" + name + "' has the role of entry '" + entries_[e] + "' already (one entry per role)", loc);
  entries_.push_back(name);
  roles_.push_back(role);
}

void training_entries(Model &m, const std::function<void(EntryRole)> &loss, TrainOptions opt, SourceLoc loc) {
  m.entry("gradients", EntryRole::Gradients, loc);
  loss(EntryRole::Gradients);
  m.gradients(loc);
  m.entry("eval", EntryRole::Eval, loc);
  loss(EntryRole::Eval);
  m.entry("train_step", EntryRole::TrainStep, loc);
  loss(EntryRole::TrainStep);
  m.train(std::move(opt), loc);
}

Tensor Model::state(const std::string &name, Shape shape, SourceLoc loc) { return state(name, shape, Dim(), loc); }

Tensor Model::state(const std::string &name, Shape shape, Dim batch, SourceLoc loc) {
  if (region_ >= 0) throw Error("state '" + name + "': states cannot be used inside a recurrent step", loc);
  check_shape(*this, "state '" + name + "'", shape, loc);
  for (auto &d : shape)
    if (d.dynamic()) throw Error("state '" + name + "': states have static shapes (size them by the bound)", loc);
  int sym = -1;
  if (batch.size != 0 || batch.dynamic()) {
    if (!batch.dynamic() || !syms_.at(batch.sym).batch)
      throw Error("state '" + name + "': the per-sequence dim must be a batch (Model::batch), got " + dim_str(batch), loc);
    sym = batch.sym;
  }
  if (int prev = shared(OpKind::State, name, shape, loc); prev < 0)
    check_new_name("state", name, loc);
  else if (nodes_[prev].state_batch != sym)
    throw Error("state '" + name + "' is shared between entries but is " + (sym >= 0 ? "per sequence" : "one buffer") +
                    " here and " + (nodes_[prev].state_batch >= 0 ? "per sequence" : "one buffer") + " in entry '" +
                    entries_[nodes_[prev].entry] + "'",
                loc);
  Node n{.kind = OpKind::State, .shape = shape, .name = name};
  n.state_batch = sym;
  n.loc = loc;
  return add(n);
}

Tensor Model::cache_slots(const std::string &name, Dim rows, Dim batch, SourceLoc loc) {
  if (!batch.dynamic() || !syms_.at(batch.sym).batch)
    throw Error("cache_slots '" + name + "': the slots are those of a batch (Model::batch), got " + dim_str(batch), loc);
  if (rows != batch && (rows.dynamic() || rows.size != 1))
    throw Error("cache_slots '" + name + "': one slot per row of the batch " + dim_str(batch) + " or a single one (1), got " +
                    dim_str(rows), loc);
  for (const Node &n : nodes_)
    if (n.kind == OpKind::Input && n.cache_slots && n.entry == current_entry())
      throw Error("cache_slots '" + name + "': entry '" + entries_[current_entry()] + "' already takes its slots from '" + n.name + "'",
                  loc);
  Tensor t = input(name, {rows}, {.dtype = DType::I32, .vocab = batch.size, .optional = true}, loc);
  nodes_[t.id()].cache_slots = true;
  return t;
}

Tensor Model::param(const std::string &name, Shape shape, ParamOptions opt, SourceLoc loc) {
  if (int prev = shared(OpKind::Param, name, shape, loc); prev >= 0) {
    Node n = nodes_[prev];  // the same parameter, used from another entry
    n.loc = loc;
    return add(n);
  }
  check_new_name("param", name, loc);
  check_shape(*this, "param '" + name + "'", shape, loc);
  for (auto &d : shape)
    if (d.dynamic()) throw Error("param '" + name + "': parameters must have static shapes", loc);
  Node n{.kind = OpKind::Param, .shape = shape, .name = name};
  n.init = opt.init;
  n.init_scale = opt.scale;
  n.loc = loc;
  return add(n);
}

void Model::output(const std::string &name, Tensor t, SourceLoc loc) {
  if (!t || t.model() != this) throw Error("output '" + name + "': the tensor does not belong to this model", loc);
  if (t.node().entry != current_entry())
    throw Error("output '" + name + "': the tensor belongs to entry '" + entries_[t.node().entry] + "', not '" +
                    entries_[current_entry()] + "'",
                loc);
  if (t.node().region >= 0)
    throw Error("output '" + name + "': the tensor was made inside a recurrent step; output the recurrent's results", loc);
  // The same name in several entries (each entry's "loss") is one output of one shape.
  bool shared = false;
  for (auto &o : outputs_) {
    if (o.first != name) continue;
    const Node &prev = nodes_[o.second];
    if (prev.entry == current_entry()) throw Error("output: the name '" + name + "' is already used by an output", loc);
    if (!(prev.shape == t.shape()) || prev.dtype != t.dtype())
      throw Error("output '" + name + "' is shared between entries but has shape " + shape_str(t.shape()) + " here and " +
                      shape_str(prev.shape) + " in entry '" + entries_[prev.entry] + "'",
                  loc);
    shared = true;
  }
  if (!shared) check_new_name("output", name, loc);
  outputs_.push_back({name, t.id()});
}

void Model::keep(Tensor t, SourceLoc loc) {
  if (!t || t.model() != this || t.node().kind != OpKind::CacheWrite)
    throw Error("keep: only a cache_write of this model can be kept without an output", loc);
  kept_.push_back(t.id());
}

int Model::begin_region(SourceLoc loc) {
  if (region_ >= 0) throw Error("recurrent: a recurrent step inside another recurrent step is not supported", loc);
  region_ = regions_++;
  return region_;
}

Tensor Model::add(Node n) {
  n.entry = current_entry();
  n.region = region_;
  n.checkpoint = checkpoint_;
  n.reversible = reversible_;
  n.reversible_part = reversible_part_;
  for (int in : n.inputs)
    if (nodes_.at(in).region >= 0 && nodes_[in].region != n.region)
      throw Error(std::string(op_name(n)) + ": an operand was made inside a recurrent step and is used outside "
                      "it; only the recurrent's results (hidden, ponder, steps, iterations) leave the step",
                  n.loc);
  for (int in : n.inputs)
    if (nodes_.at(in).entry != n.entry)
      throw Error(std::string(op_name(n)) + ": an operand belongs to entry '" + entries_[nodes_[in].entry] +
                      "' but this op is in entry '" + entries_[n.entry] + "' (declare parameters and states again in each entry)",
                  n.loc);
  nodes_.push_back(std::move(n));
  return Tensor(this, (int)nodes_.size() - 1);
}

}  // namespace kiln
