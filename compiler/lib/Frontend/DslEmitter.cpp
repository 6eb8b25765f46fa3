// DslEmitter.cpp - kiln DSL -> kiln dialect: one func.func per entry point, one op per node, each
// located at the user's file:line (FileLineColLoc) so that verifier and pass errors point at
// the model. An op without attributes, or a generic one (OpKind::Op: numeric attributes by
// name), is created by its name (the DSL's op names are the dialect's mnemonics), so adding such
// an op needs no case here.
#include "kiln/Frontend/DslEmitter.h"

#include "kiln/Dialect/KilnDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <functional>

using namespace mlir;

namespace kiln {

static Location locOf(MLIRContext *ctx, const SourceLoc &l) {
  return FileLineColLoc::get(ctx, l.file_name(), l.line(), l.column());
}

static RankedTensorType typeOf(MLIRContext *ctx, const Node &n) {
  SmallVector<int64_t> shape;
  for (const Dim &d : n.shape) shape.push_back(d.dynamic() ? ShapedType::kDynamic : d.size);
  Type el = n.dtype == DType::F32 ? Type(Float32Type::get(ctx)) : Type(IntegerType::get(ctx, 32));
  return RankedTensorType::get(shape, el);
}

// The DSL's enums as the dialect's (switches without a default: a new DSL value is a
// compiler warning here until it has its dialect value).
static InitKind initOf(Init i) {
  switch (i) {
    case Init::Normal: return InitKind::normal;
    case Init::Ones: return InitKind::ones;
    case Init::Zeros: return InitKind::zeros;
  }
  return InitKind::normal;
}
static WeightLayoutKind layoutOf(WeightLayout l) {
  switch (l) {
    case WeightLayout::OutIn: return WeightLayoutKind::out_in;
    case WeightLayout::InOut: return WeightLayoutKind::in_out;
  }
  return WeightLayoutKind::out_in;
}
static GeluApproximation approxOf(GeluApprox a) {
  switch (a) {
    case GeluApprox::Erf: return GeluApproximation::erf;
    case GeluApprox::Tanh: return GeluApproximation::tanh;
  }
  return GeluApproximation::erf;
}
static MaskKind maskKindOf(Mask::Kind k) {
  switch (k) {
    case Mask::None: return MaskKind::none;
    case Mask::Causal: return MaskKind::causal;
    case Mask::Window: return MaskKind::window;
    case Mask::Strided: return MaskKind::strided;
    case Mask::Fixed: return MaskKind::fixed;
    case Mask::Layout: return MaskKind::layout;
  }
  return MaskKind::none;
}
static EntryRoleKind roleKindOf(EntryRole r) {
  switch (r) {
    case EntryRole::Other: return EntryRoleKind::other;
    case EntryRole::Forward: return EntryRoleKind::forward;
    case EntryRole::Prefill: return EntryRoleKind::prefill;
    case EntryRole::Decode: return EntryRoleKind::decode;
    case EntryRole::DecodeBatch: return EntryRoleKind::decode_batch;
    case EntryRole::Encode: return EntryRoleKind::encode;
    case EntryRole::Gradients: return EntryRoleKind::gradients;
    case EntryRole::Eval: return EntryRoleKind::eval;
    case EntryRole::TrainStep: return EntryRoleKind::train_step;
    case EntryRole::Extend: return EntryRoleKind::extend;
  }
  return EntryRoleKind::other;
}
static RopeStyleKind ropeStyleOf(RopeStyle s) {
  switch (s) {
    case RopeStyle::HalfSplit: return RopeStyleKind::half_split;
    case RopeStyle::Interleaved: return RopeStyleKind::interleaved;
  }
  return RopeStyleKind::half_split;
}
static PatternPart partOf(Part p) {
  switch (p) {
    case Part::Union: return PatternPart::union_;
    case Part::Local: return PatternPart::local;
    case Part::Global: return PatternPart::global;
  }
  return PatternPart::union_;
}

// One op for one node; `in(i)` is the value of the node's i-th input.
static Value emitNode(OpBuilder &b, MLIRContext &ctx, const Node &n, const std::function<Value(int)> &in) {
  Location loc = locOf(&ctx, n.loc);
  RankedTensorType t = typeOf(&ctx, n);
  Value r;
  switch (n.kind) {
    default: {  // an op with no attributes (add, mul, relu, softmax, ...), or a generic op's
      OperationState state(loc, std::string("kiln.") + op_name(n));
      for (size_t i = 0; i < n.inputs.size(); ++i) state.addOperands(in((int)i));
      for (const OpAttr &a : n.attrs) {
        switch (a.type) {
          case OpAttr::Type::F32: state.addAttribute(a.name, b.getF32FloatAttr((float)a.value)); break;
          case OpAttr::Type::I64: state.addAttribute(a.name, b.getI64IntegerAttr((int64_t)a.value)); break;
          case OpAttr::Type::Unit:
            if (a.value != 0) state.addAttribute(a.name, b.getUnitAttr());
            break;
        }
      }
      state.addTypes(t);
      r = b.create(state)->getResult(0);
      break;
    }
    case OpKind::Input:
    case OpKind::Count:
    case OpKind::Recurrent:  // emitted by emitModel: they own a region or name its results
    case OpKind::StepInput:
    case OpKind::RecurrentResult:
      break;
    case OpKind::DepthwiseConv:
      r = DepthwiseConvOp::create(b, loc, t, in(0), in(1), in(2), n.mask.kind == Mask::Causal);
      break;
    case OpKind::Param: {
      r = ParamOp::create(b, loc, t, b.getStringAttr(n.name), InitKindAttr::get(&ctx, initOf(n.init)), b.getF32FloatAttr(n.init_scale),
                          /*transposed=*/UnitAttr(), /*panel_cols=*/IntegerAttr());
      break;
    }
    case OpKind::Embedding: r = EmbeddingOp::create(b, loc, t, in(0), in(1)); break;
    case OpKind::PositionEmbedding: r = PositionEmbeddingOp::create(b, loc, t, in(0), in(1), n.inputs.size() > 2 ? in(2) : Value()); break;
    case OpKind::Linear:
      r = LinearOp::create(b, loc, t, in(0), in(1), n.inputs.size() > 2 ? in(2) : Value(),
                           WeightLayoutKindAttr::get(&ctx, layoutOf(n.layout)),
                           ActivationKindAttr::get(b.getContext(), ActivationKind::none));
      break;
    case OpKind::MatMul: r = MatMulOp::create(b, loc, t, in(0), in(1), b.getBoolAttr(n.transpose_b)); break;
    case OpKind::BatchMatMul: r = BatchMatMulOp::create(b, loc, t, in(0), in(1), b.getBoolAttr(n.transpose_b)); break;
    case OpKind::Scale: r = ScaleOp::create(b, loc, t, in(0), b.getF32FloatAttr(n.factor)); break;
    case OpKind::Gelu:
      r = GeluOp::create(b, loc, t, in(0), GeluApproximationAttr::get(&ctx, approxOf(n.approx)));
      break;
    case OpKind::LayerNorm: r = LayerNormOp::create(b, loc, t, in(0), in(1), in(2), b.getF32FloatAttr(n.eps)); break;
    case OpKind::Reshape: r = ReshapeOp::create(b, loc, t, in(0)); break;
    case OpKind::Transpose: r = TransposeOp::create(b, loc, t, in(0), b.getDenseI64ArrayAttr(n.perm)); break;
    case OpKind::Concat: {
      SmallVector<Value> xs;
      for (size_t i = 0; i < n.inputs.size(); ++i) xs.push_back(in((int)i));
      r = ConcatOp::create(b, loc, t, xs, b.getI64IntegerAttr(n.axis));
      break;
    }
    case OpKind::Slice:
      r = SliceOp::create(b, loc, t, in(0), b.getI64IntegerAttr(n.axis), b.getI64IntegerAttr(n.offset));
      break;
    case OpKind::Attention: {
      const Mask &mk = n.mask;
      auto op = AttentionOp::create(b, loc, t, Type(), in(0), in(1), in(2), n.inputs.size() > 3 ? in(3) : Value(),
                                    MaskKindAttr::get(&ctx, maskKindOf(mk.kind)), b.getF32FloatAttr(n.factor),
                                    n.key_count ? b.getUnitAttr() : UnitAttr(), IntegerAttr(), IntegerAttr(), PatternPartAttr(),
                                    ArrayAttr(), UnitAttr(), n.key_mask ? b.getUnitAttr() : UnitAttr());
      if (mk.sparse()) op.setPatternSizeAttr(b.getI64IntegerAttr(mk.size));
      if (mk.kind == Mask::Fixed) op.setSummaryAttr(b.getI64IntegerAttr(mk.summary));
      if (mk.kind == Mask::Strided || mk.kind == Mask::Fixed) op.setPartAttr(PatternPartAttr::get(&ctx, partOf(mk.part)));
      if (mk.kind == Mask::Layout) {
        SmallVector<StringRef> rows(mk.layout.begin(), mk.layout.end());
        op.setLayoutAttr(b.getStrArrayAttr(rows));
        if (!mk.layout_causal) op.setNoncausal(true);
      }
      r = op.getResult();
      break;
    }
    case OpKind::Mask: r = MaskOp::create(b, loc, t, in(0), MaskKindAttr::get(&ctx, MaskKind::causal)); break;
    case OpKind::Rope:
      r = RopeOp::create(b, loc, t, in(0), n.inputs.size() > 1 ? in(1) : Value(), b.getF32FloatAttr(n.theta),
                         RopeStyleKindAttr::get(&ctx, ropeStyleOf(n.rope_style)), b.getF32FloatAttr(n.rope_scaling), UnitAttr(),
                         b.getI64IntegerAttr(n.rope_original_context), b.getF32FloatAttr(n.rope_low_freq_factor),
                         b.getF32FloatAttr(n.rope_high_freq_factor));
      break;
    case OpKind::SinusoidalPositions: r = SinusoidalPositionsOp::create(b, loc, t, in(0), n.inputs.size() > 1 ? in(1) : Value()); break;
    case OpKind::State:
      r = StateOp::create(b, loc, t, b.getStringAttr(n.name), n.state_batch >= 0 ? b.getI64IntegerAttr(n.state_batch) : nullptr);
      break;
    case OpKind::LshAttention:
      r = LshAttentionOp::create(b, loc, t, in(0), in(1), in(2), b.getI64IntegerAttr(n.buckets),
                                 b.getI64IntegerAttr(n.hashes), b.getI64IntegerAttr(n.chunk),
                                 n.mask.kind == Mask::Causal ? b.getUnitAttr() : UnitAttr(), b.getF32FloatAttr(n.factor));
      break;
    case OpKind::CrossEntropy:
      r = CrossEntropyOp::create(b, loc, t, in(0), in(1), b.getI64IntegerAttr(n.ignore_index));
      break;
    case OpKind::Mean: r = MeanOp::create(b, loc, t, in(0)); break;
    case OpKind::LossWeight:
      r = LossWeightOp::create(b, loc, t, in(0), in(1), b.getF32FloatAttr(n.factor), b.getF32FloatAttr(n.until));
      break;
    case OpKind::CacheWrite:
      r = CacheWriteOp::create(b, loc, t, in(0), in(1), n.inputs.size() > 2 ? in(2) : Value());
      break;
  }
  return r;
}

// The module's attributes: sequence lengths and their bounds, batch factors, the weights'
// prefix, the precision, the checkpoint's config fields and the weights to ignore.
static void setModuleAttrs(OpBuilder &b, ModuleOp module, const Model &m) {
  MLIRContext &ctx = *b.getContext();
  SmallVector<Attribute> symNames;
  SmallVector<int64_t> symBounds, symFactors;
  bool batched = false;
  for (auto &s : m.symbols()) {
    symNames.push_back(b.getStringAttr(s.name));
    symBounds.push_back(s.max);
    symFactors.append({s.rows_of, s.length});
    batched |= s.rows_of >= 0;
  }
  module->setAttr("kiln.seq_names", b.getArrayAttr(symNames));
  module->setAttr("kiln.seq_bounds", b.getDenseI64ArrayAttr(symBounds));
  // The rows of a batch (Model::rows): per symbol, its batch and length symbols, or -1, -1.
  if (batched) module->setAttr("kiln.seq_factors", b.getDenseI64ArrayAttr(symFactors));
  if (!m.weights_prefix().empty()) module->setAttr("kiln.weights_prefix", b.getStringAttr(m.weights_prefix()));
  if (m.precision() == Precision::BF16) module->setAttr("kiln.precision", ModelPrecisionAttr::get(&ctx, ModelPrecision::bf16));
  if (!m.checkpoint_config().empty()) {
    SmallVector<Attribute> fields;
    for (auto &f : m.checkpoint_config()) {
      SmallVector<NamedAttribute> kv{b.getNamedAttr("key", b.getStringAttr(f.key)),
                                     b.getNamedAttr("value", b.getStringAttr(f.value)),
                                     b.getNamedAttr("what", b.getStringAttr(f.what))};
      if (f.absent) kv.push_back(b.getNamedAttr("absent", b.getStringAttr(*f.absent)));
      if (f.at_least) kv.push_back(b.getNamedAttr("at_least", b.getUnitAttr()));
      fields.push_back(b.getDictionaryAttr(kv));
    }
    module->setAttr("kiln.checkpoint_config", b.getArrayAttr(fields));
  }
  if (!m.ignored_weights().empty()) {
    SmallVector<Attribute> pats;
    for (auto &p : m.ignored_weights()) pats.push_back(b.getStringAttr(p));
    module->setAttr("kiln.ignored_weights", b.getArrayAttr(pats));
  }
}

// The nodes entry `e`'s outputs (and the nodes Model::keep keeps) need.
static std::vector<bool> liveNodes(const Model &m, int e, const std::vector<std::pair<std::string, int>> &outs) {
  const auto &nodes = m.nodes();
  std::vector<bool> live(nodes.size());
  std::vector<int> stack;
  for (auto &o : outs) stack.push_back(o.second);
  for (int id : m.kept())
    if (nodes[id].entry == e) stack.push_back(id);
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (live[id]) continue;
    live[id] = true;
    for (int i : nodes[id].inputs) stack.push_back(i);
    if (nodes[id].kind == OpKind::Recurrent) stack.push_back(nodes[id].body_out), stack.push_back(nodes[id].body_arg);
  }
  return live;
}

// Entry `e`'s function attributes: its inputs' names, lengths and token facts, its outputs'
// names, and what kiln-differentiate and kiln-apply-optimizer read.
static void setEntryAttrs(OpBuilder &b, func::FuncOp f, const Model &m, int e, const std::vector<int> &inputs,
                   const std::vector<std::pair<std::string, int>> &outs, const std::vector<bool> &live) {
  const auto &nodes = m.nodes();
  for (size_t a = 0; a < inputs.size(); ++a) {
    const Node &n = nodes[inputs[a]];
    f.setArgAttr(a, "kiln.name", b.getStringAttr(n.name));
    SmallVector<int64_t> syms;
    for (const Dim &d : n.shape) syms.push_back(d.sym);
    f.setArgAttr(a, "kiln.syms", b.getDenseI64ArrayAttr(syms));
    if (n.vocab) f.setArgAttr(a, "kiln.vocab", b.getI64IntegerAttr(n.vocab));
    if (n.optional) f.setArgAttr(a, "kiln.optional", b.getUnitAttr());
    if (n.optional && n.fill) f.setArgAttr(a, "kiln.fill", b.getI64IntegerAttr(n.fill));
    if (n.ignore_index < 0) f.setArgAttr(a, "kiln.ignore_id", b.getI64IntegerAttr(n.ignore_index));
    if (n.cache_slots) f.setArgAttr(a, "kiln.cache_slots", b.getUnitAttr());  // the rows' per-sequence state slots
    if (n.ahead > 0) f.setArgAttr(a, "kiln.ahead", b.getI64IntegerAttr(n.ahead));  // targets k ahead: what --train sets
    if (n.mask_rate > 0) {  // masked-LM targets: what --train masks
      f.setArgAttr(a, "kiln.mask_rate", b.getF32FloatAttr(n.mask_rate));
      f.setArgAttr(a, "kiln.mask_token", b.getI64IntegerAttr(n.mask_token));
    }
  }
  for (size_t r = 0; r < outs.size(); ++r) f.setResultAttr(r, "kiln.name", b.getStringAttr(outs[r].first));
  if (m.differentiated(e)) f->setAttr("kiln.differentiate", b.getUnitAttr());
  if (const TrainOptions *t = m.training(e)) {
    SmallVector<Attribute> noDecay;
    for (size_t id = 0; id < nodes.size(); ++id) {
      const Node &n = nodes[id];
      if (!live[id] || n.kind != OpKind::Param) continue;
      bool decays = t->decays ? t->decays(n.name, n.shape) : n.shape.size() >= 2;
      if (!decays) noDecay.push_back(b.getStringAttr(n.name));
    }
    const AdamW &a = t->optimizer;
    f->setAttr("kiln.train",
               b.getDictionaryAttr({b.getNamedAttr("lr", b.getF32FloatAttr(a.lr)),
                                    b.getNamedAttr("beta1", b.getF32FloatAttr(a.beta1)),
                                    b.getNamedAttr("beta2", b.getF32FloatAttr(a.beta2)),
                                    b.getNamedAttr("eps", b.getF32FloatAttr(a.eps)),
                                    b.getNamedAttr("weight_decay", b.getF32FloatAttr(a.weight_decay)),
                                    b.getNamedAttr("clip_norm", b.getF32FloatAttr(t->clip_norm)),
                                    b.getNamedAttr("warmup", b.getI64IntegerAttr(t->warmup_steps)),
                                    b.getNamedAttr("decay_steps", b.getI64IntegerAttr(t->decay ? t->decay->steps : 0)),
                                    b.getNamedAttr("min_ratio", b.getF32FloatAttr(t->decay ? t->decay->min_ratio : 1.0f)),
                                    b.getNamedAttr("no_decay", b.getArrayAttr(noDecay))}));
  }
}

OwningOpRef<ModuleOp> emitModel(MLIRContext &ctx, const Model &m) {
  ctx.getOrLoadDialect<KilnDialect>();
  ctx.getOrLoadDialect<func::FuncDialect>();
  OpBuilder b(&ctx);
  Location mloc = FileLineColLoc::get(&ctx, m.name(), 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(mloc, StringRef(m.name()));
  setModuleAttrs(b, *module, m);

  // One function per entry point; each emits only what its outputs need.
  const auto &nodes = m.nodes();
  b.setInsertionPointToEnd(module->getBody());
  for (int e = 0; e < (int)m.entries().size(); ++e) {
    std::vector<std::pair<std::string, int>> outs;
    for (auto &o : m.outputs())
      if (nodes[o.second].entry == e) outs.push_back(o);
    if (outs.empty()) continue;
    std::vector<bool> live = liveNodes(m, e, outs);
    SmallVector<Type> argTypes, resTypes;
    std::vector<int> inputs;
    for (size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i].kind == OpKind::Input && nodes[i].entry == e) {
        inputs.push_back((int)i);
        argTypes.push_back(typeOf(&ctx, nodes[i]));
      }
    for (auto &o : outs) resTypes.push_back(typeOf(&ctx, nodes[o.second]));
    auto f = func::FuncOp::create(b, mloc, m.entries()[e], b.getFunctionType(argTypes, resTypes));
    f->setAttr("kiln.role", EntryRoleKindAttr::get(&ctx, roleKindOf(m.role(e))));
    OpBuilder::InsertionGuard guard(b);
    Block *body = f.addEntryBlock();
    std::vector<Value> val(nodes.size());
    for (size_t a = 0; a < inputs.size(); ++a) val[inputs[a]] = body->getArgument(a);
    setEntryAttrs(b, f, m, e, inputs, outs, live);
    b.setInsertionPointToStart(body);
    auto emitRange = [&](size_t from, size_t to, int region, auto &self) -> void {
      for (size_t id = from; id < to; ++id) {
        const Node &n = nodes[id];
        if (!live[id] || n.kind == OpKind::Input || n.region != region || n.kind == OpKind::StepInput) continue;
        if (n.kind == OpKind::RecurrentResult) {
          val[id] = val[n.inputs[0]].getDefiningOp()->getResult(n.axis);
          continue;
        }
        if (n.kind != OpKind::Recurrent) {
          Block *blk = b.getInsertionBlock();
          Operation *last = blk->empty() ? nullptr : &blk->back();
          val[id] = emitNode(b, ctx, n, [&](int i) { return val[n.inputs[i]]; });
          // Every op the node became: kiln-recompute-checkpoints' block, kiln-reverse-layers' layer.
          for (auto it = last ? std::next(last->getIterator()) : blk->begin(); it != blk->end(); ++it) {
            if (n.checkpoint >= 0) it->setAttr("kiln.checkpoint", b.getI64IntegerAttr(n.checkpoint));
            if (n.reversible >= 0)
              it->setAttr("kiln.reversible", b.getDenseI64ArrayAttr({n.reversible, n.reversible_part}));
          }
          continue;
        }
        // kiln.recurrent: the step's nodes (made between its argument and itself) form the body.
        const Node &x = nodes[n.inputs[0]];
        Type rowF = RankedTensorType::get({typeOf(&ctx, x).getDimSize(0)}, b.getF32Type());
        Type rowI = RankedTensorType::get({typeOf(&ctx, x).getDimSize(0)}, b.getI32Type());
        Location loc = locOf(&ctx, n.loc);
        Type count = RankedTensorType::get({1}, b.getI32Type());
        auto op = RecurrentOp::create(b, loc, TypeRange{typeOf(&ctx, n), rowF, rowI, count}, val[n.inputs[0]], val[n.inputs[1]],
                                      val[n.inputs[2]], b.getI64IntegerAttr(n.max_steps),
                                      b.getF32FloatAttr(1.0f - n.eps));
        OpBuilder::InsertionGuard g(b);
        Block *blk = b.createBlock(&op.getBody(), {}, {typeOf(&ctx, x)}, {loc});
        val[n.body_arg] = blk->getArgument(0);
        self((size_t)n.body_arg + 1, id, n.body, self);
        YieldOp::create(b, loc, ValueRange{val[n.body_out]});
        val[id] = op.getHidden();
      }
    };
    emitRange(0, nodes.size(), -1, emitRange);
    SmallVector<Value> results;
    for (auto &o : outs) results.push_back(val[o.second]);
    func::ReturnOp::create(b, mloc, results);
  }
  return module;
}

}  // namespace kiln
