// KilnEnums.td - every enumerated value of the kiln dialect, one C++ enum each (namespace kiln,
// KilnEnums.h): the op variants and gradient selectors that ops carry as attributes
// (#kiln.<mnemonic><value>), the decisions the passes make inside #kiln.schedule and
// #kiln.sparse_schedule, and the compile options that travel from a driver flag (or a kiln-opt
// pipeline option) to the pass that reads them. The printed names are the IR's and the kernel
// keys' text; only names (parameters, states, inputs) stay strings.
#ifndef KILN_ENUMS
#define KILN_ENUMS

include "mlir/IR/EnumAttr.td"
include "kiln/Dialect/KilnBase.td"

class Kiln_I32Enum<string name, string summary, list<I32EnumAttrCase> cases> : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}
// An enum an op carries as an attribute, printed #kiln.<mnemonic><value>.
class Kiln_EnumAttr<EnumAttrInfo e, string mnemonic> : EnumAttr<Kiln_Dialect, e, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

// ================================================================ op variants
// The activations a linear or an FFN applies in its epilogue, and the standalone activation ops.
def Kiln_Activation : Kiln_I32Enum<"ActivationKind", "an elementwise activation", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"relu", 1>, I32EnumAttrCase<"gelu_erf", 2>,
    I32EnumAttrCase<"gelu_tanh", 3>, I32EnumAttrCase<"silu", 4>]>;
def Kiln_ActivationAttr : Kiln_EnumAttr<Kiln_Activation, "activation">;

// How a GEMM's weight is stored: out_in [out, in] (nn.Linear: x·Wᵀ), in_out [in, out] (x·W), or
// panels [ceil(out / w), in, w] (the [in, out] matrix in panels of w columns, the last one
// zero-padded: kiln-prepack-weights).
def Kiln_WeightLayout : Kiln_I32Enum<"WeightLayoutKind", "how a GEMM weight is stored", [
    I32EnumAttrCase<"out_in", 0>, I32EnumAttrCase<"in_out", 1>, I32EnumAttrCase<"panels", 2>]>;
def Kiln_WeightLayoutAttr : Kiln_EnumAttr<Kiln_WeightLayout, "weight_layout">;

// An embedding table: rows [vocab, d], or the tied head's [d, vocab] weight in panels.
def Kiln_TableLayout : Kiln_I32Enum<"TableLayoutKind", "how an embedding table is stored", [
    I32EnumAttrCase<"rows", 0>, I32EnumAttrCase<"panels", 1>]>;
def Kiln_TableLayoutAttr : Kiln_EnumAttr<Kiln_TableLayout, "table_layout">;

// How a GEMM weight or an embedding table keeps its values (kiln-quantize-weights): f32 (or the
// element type its tensor has), or ggml's blocks of 32 weights along a row, as GGUF files store
// them: q8_0 (an f16 scale, 32 int8: 34 bytes), q4_0 (an f16 scale, 32 nibbles minus 8: 18
// bytes), q4_1 (an f16 scale and an f16 minimum, 32 nibbles: 20 bytes). A quantized [rows, in]
// tensor is kept as bytes [rows, in / 32, block bytes].
def Kiln_WeightFormat : Kiln_I32Enum<"WeightFormat", "how a weight's values are stored", [
    I32EnumAttrCase<"f32", 0>, I32EnumAttrCase<"q8_0", 1>, I32EnumAttrCase<"q4_0", 2>, I32EnumAttrCase<"q4_1", 3>]>;
def Kiln_WeightFormatAttr : Kiln_EnumAttr<Kiln_WeightFormat, "weight_format">;

// A parameter's initializer for --random-weights.
def Kiln_Init : Kiln_I32Enum<"InitKind", "a parameter's initializer", [
    I32EnumAttrCase<"normal", 0>, I32EnumAttrCase<"ones", 1>, I32EnumAttrCase<"zeros", 2>]>;
def Kiln_InitAttr : Kiln_EnumAttr<Kiln_Init, "init">;

def Kiln_GeluApproximation : Kiln_I32Enum<"GeluApproximation", "GELU exact (erf) or tanh-approximated", [
    I32EnumAttrCase<"erf", 0>, I32EnumAttrCase<"tanh", 1>]>;
def Kiln_GeluApproximationAttr : Kiln_EnumAttr<Kiln_GeluApproximation, "gelu">;

// How rotary positions pair a head's features: feature i with i + d/2 (half_split: Hugging
// Face's rotate_half, Llama, Qwen2, Mistral) or 2i with 2i + 1 (interleaved: GPT-J, GGUF's
// unpermuted layout).
def Kiln_RopeStyle : Kiln_I32Enum<"RopeStyleKind", "how rotary positions pair a head's features", [
    I32EnumAttrCase<"half_split", 0>, I32EnumAttrCase<"interleaved", 1>]>;
def Kiln_RopeStyleAttr : Kiln_EnumAttr<Kiln_RopeStyle, "rope_style">;

// Which keys a query sees: all, causal, or a sparse pattern (kiln.attention's description).
def Kiln_Mask : Kiln_I32Enum<"MaskKind", "an attention mask", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"causal", 1>, I32EnumAttrCase<"window", 2>,
    I32EnumAttrCase<"strided", 3>, I32EnumAttrCase<"fixed", 4>, I32EnumAttrCase<"layout", 5>]>;
def Kiln_MaskAttr : Kiln_EnumAttr<Kiln_Mask, "mask">;

// Which half of a factorized pattern (strided, fixed) a head attends to, or both merged.
def Kiln_PatternPart : Kiln_I32Enum<"PatternPart", "a factorized pattern's half", [
    I32EnumAttrCase<"union_", 0, "union">, I32EnumAttrCase<"local", 1>, I32EnumAttrCase<"global", 2>]>;
def Kiln_PatternPartAttr : Kiln_EnumAttr<Kiln_PatternPart, "part">;

// A result of the ACT carry (kiln.act_output).
def Kiln_ActField : Kiln_I32Enum<"ActField", "a result of the ACT carry", [
    I32EnumAttrCase<"hidden", 0>, I32EnumAttrCase<"ponder", 1>, I32EnumAttrCase<"steps", 2>,
    I32EnumAttrCase<"iterations", 3>]>;
def Kiln_ActFieldAttr : Kiln_EnumAttr<Kiln_ActField, "act_field">;

// What an entry point is for (an entry function's kiln.role; kiln_entry_role in kilnrt/model.h,
// value for value): the runtime's generation and training find their entries by role.
def Kiln_EntryRole : Kiln_I32Enum<"EntryRoleKind", "what an entry point is for", [
    I32EnumAttrCase<"other", 0>,         // run by its name only (--entry)
    I32EnumAttrCase<"forward", 1>,       // every row's outputs (and, with a cache, fills it)
    I32EnumAttrCase<"prefill", 2>,       // a prompt into the caches, the last row's logits
    I32EnumAttrCase<"decode", 3>,        // one token at `past`, over the caches
    I32EnumAttrCase<"decode_batch", 4>,  // one token per sequence of a batch
    I32EnumAttrCase<"encode", 5>,        // an encoder-decoder's source into the cross-attention caches
    I32EnumAttrCase<"gradients", 6>,     // the loss and every parameter's gradient
    I32EnumAttrCase<"eval", 7>,          // the loss alone
    I32EnumAttrCase<"train_step", 8>,    // the loss, the gradients and the optimizer's update
    I32EnumAttrCase<"extend", 9>]>;      // a chunk of tokens appended at `past` of a cache
def Kiln_EntryRoleAttr : Kiln_EnumAttr<Kiln_EntryRole, "entry_role">;

// ================================================================ gradient selectors
// The operand a gradient op differentiates with respect to, one enum per op family (the same
// kernel family computes each: a selector that would change the family is a separate op).
def Kiln_AttentionGradWrt : Kiln_I32Enum<"AttentionGradWrt", "kiln.attention_grad's operand", [
    I32EnumAttrCase<"query", 0>, I32EnumAttrCase<"key", 1>, I32EnumAttrCase<"value", 2>]>;
def Kiln_AttentionGradWrtAttr : Kiln_EnumAttr<Kiln_AttentionGradWrt, "attention_wrt">;

def Kiln_LshGradWrt : Kiln_I32Enum<"LshGradWrt", "kiln.lsh_chunk_attention_grad's operand", [
    I32EnumAttrCase<"qk", 0>, I32EnumAttrCase<"value", 1>]>;
def Kiln_LshGradWrtAttr : Kiln_EnumAttr<Kiln_LshGradWrt, "lsh_wrt">;

def Kiln_ActGradWrt : Kiln_I32Enum<"ActGradWrt", "kiln.act_update_grad's operand", [
    I32EnumAttrCase<"carry", 0>, I32EnumAttrCase<"x", 1>, I32EnumAttrCase<"y", 2>,
    I32EnumAttrCase<"halt_weight", 3>, I32EnumAttrCase<"halt_bias", 4>]>;
def Kiln_ActGradWrtAttr : Kiln_EnumAttr<Kiln_ActGradWrt, "act_wrt">;

def Kiln_ConvGradWrt : Kiln_I32Enum<"ConvGradWrt", "kiln.depthwise_conv_grad's operand", [
    I32EnumAttrCase<"x", 0>, I32EnumAttrCase<"weight", 1>]>;
def Kiln_ConvGradWrtAttr : Kiln_EnumAttr<Kiln_ConvGradWrt, "conv_wrt">;

// ================================================================ compile options
// What a model is computed in (Model::set_precision, --precision, the module's kiln.precision):
// kiln-assign-precision's input.
def Kiln_ModelPrecision : Kiln_I32Enum<"ModelPrecision", "a model's GEMM precision", [
    I32EnumAttrCase<"f32", 0>, I32EnumAttrCase<"bf16", 1>]>;
def Kiln_ModelPrecisionAttr : Kiln_EnumAttr<Kiln_ModelPrecision, "precision">;

// --precision and kiln-assign-precision's option: the model's precision (its kiln.precision, else
// f32), or f32 or bf16 whatever the model says.
def Kiln_PrecisionOption : Kiln_I32Enum<"PrecisionOption", "the precision a compile asks for", [
    I32EnumAttrCase<"model", 0>, I32EnumAttrCase<"f32", 1>, I32EnumAttrCase<"bf16", 2>]>;

// --recompute-ffn: what the backward recomputes of each FFN (kiln-checkpoint-ffn).
def Kiln_RecomputeFfn : Kiln_I32Enum<"RecomputeFfn", "what the backward recomputes of each FFN", [
    I32EnumAttrCase<"off", 0>, I32EnumAttrCase<"activation", 1>, I32EnumAttrCase<"all", 2>]>;

// --reversible-backward: reversible layers' backward reconstructs each input (kiln-reverse-layers)
// or stores every layer's activations.
def Kiln_ReversibleBackward : Kiln_I32Enum<"ReversibleBackward", "the backward of reversible layers", [
    I32EnumAttrCase<"reconstruct", 0>, I32EnumAttrCase<"store", 1>]>;

// --gpu-buffers: where a GPU target's buffers live between kernel calls.
def Kiln_GpuBuffers : Kiln_I32Enum<"GpuBuffers", "where a GPU target's buffers live", [
    I32EnumAttrCase<"host", 0>, I32EnumAttrCase<"device", 1>]>;

// ================================================================ decisions (#kiln.schedule, #kiln.sparse_schedule, #kiln.view)
def Kiln_AttentionEngine : Kiln_I32Enum<"AttentionEngine", "the kernel that computes an attention", [
    I32EnumAttrCase<"unset", 0>,
    // per query block of q_block rows: the score strip against every valid key, softmax, P·V
    // (attention over a cache, decode steps)
    I32EnumAttrCase<"row_strip", 1>,
    // the online-softmax engine over q_block x q_block blocks, key blocks past the diagonal
    // never visited (whole-sequence attention)
    I32EnumAttrCase<"online_block", 2>,
    // the online-softmax engine over a sparse pattern's block schedule (#kiln.sparse_schedule)
    I32EnumAttrCase<"block_sparse", 3>]>;

def Kiln_Packing : Kiln_I32Enum<"Packing", "how a GEMM's weight is packed into contiguous panels", [
    I32EnumAttrCase<"unset", 0>,
    I32EnumAttrCase<"none", 1>,      // read in place
    I32EnumAttrCase<"per_task", 2>,  // a [K x tile_n] panel per parallel task (a column tile, or a tile)
    I32EnumAttrCase<"per_call", 3>,  // every panel once per call (the FFN's weights on a GPU)
    // read in place from the panels the weight is kept in since load (weight layout "panels",
    // kiln-prepack-weights)
    I32EnumAttrCase<"at_load", 4>]>;

def Kiln_GemmEngine : Kiln_I32Enum<"GemmEngine", "how a GEMM (a linear, matmul or the FFN) is computed", [
    I32EnumAttrCase<"unset", 0>,
    // register blocks of tile_m x tile_n over task tiles of rows (prefill, forward)
    I32EnumAttrCase<"register_block", 1>,
    // a few static rows (a decode step): every weight read once, in place, in the layout it
    // is stored in, column tiles of tile_n split among the threads, the rows' activations in
    // registers; an [N, K] weight is read along K (vec lanes of partial sums per column)
    I32EnumAttrCase<"stream", 2>]>;

def Kiln_OperandPrecision : Kiln_I32Enum<"OperandPrecision", "the precision a GEMM's operands are rounded to", [
    I32EnumAttrCase<"unset", 0>,  // f32
    I32EnumAttrCase<"f32", 1>,
    // operands rounded to bfloat16 (round to nearest, ties to even), products summed in f32
    I32EnumAttrCase<"bf16", 2>,
    // the same rounding, the products of pairs along K summed by AVX-512 BF16 dot products
    // (vdpbf16ps, f32 accumulators): a target with avx512bf16
    I32EnumAttrCase<"bf16_dot", 3>]>;

def Kiln_ViewKind : Kiln_I32Enum<"ViewKind", "how a tensor shares the buffer of another (kiln-fold-views)", [
    // a strided view of its operand's buffer: a slice, transpose or reshape that runs no kernel
    I32EnumAttrCase<"read", 0>,
    // a kernel's result written, strided, into the buffer of its single user (a transpose)
    I32EnumAttrCase<"write", 1>,
    // a transpose whose operand's kernel wrote it in place: it runs no kernel
    I32EnumAttrCase<"placed", 2>]>;

// The sparse pattern's orders, block rules and element masks (kiln/Support/SparsePattern.h,
// whose enums these mirror case for case, checked by static_asserts where they meet).
def Kiln_SparseOrder : Kiln_I32Enum<"SparseOrder", "the order queries or keys are visited in", [
    I32EnumAttrCase<"sequence", 0>, I32EnumAttrCase<"stride_transpose", 1>, I32EnumAttrCase<"summary_gather", 2>]>;
def Kiln_SparseRule : Kiln_I32Enum<"SparseRule", "the key blocks a query block visits", [
    I32EnumAttrCase<"window_to_diagonal", 0>, I32EnumAttrCase<"residue_class_to_diagonal", 1>,
    I32EnumAttrCase<"own_block_to_diagonal", 2>, I32EnumAttrCase<"summaries_before_last_row", 3>,
    I32EnumAttrCase<"layout_table", 4>]>;
def Kiln_SparseMask : Kiln_I32Enum<"SparseMask", "an element mask on (query, key) positions", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"window", 1>, I32EnumAttrCase<"strided_local", 2>,
    I32EnumAttrCase<"strided_global", 3>, I32EnumAttrCase<"fixed_local", 4>, I32EnumAttrCase<"fixed_global", 5>,
    I32EnumAttrCase<"layout", 6>]>;

#endif  // KILN_ENUMS
