/* kilnrt/model.h - the contract between a compiled kiln model and the kiln runtime.
 *
 * The kiln compiler emits one `kiln_model` table (names, shapes, the buffer plan, entry points)
 * and one orchestration function per entry point. The runtime reads the table to validate
 * weights and inputs, plans the arena from the actual sequence lengths, and calls the entry.
 *
 * Buffer ids seen by an entry function: [0, n_params) are parameters, [n_params,
 * n_params + n_io) are the model's inputs and outputs, then its states (persistent, zero at
 * start), then the entry's arena buffers.
 */
#ifndef KILNRT_MODEL_H
#define KILNRT_MODEL_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_VERSION 16
#define KILN_MAX_RANK 4
#define KILN_MAX_SYMS 8

/* KILN_F16 and KILN_BF16: half-precision tensors of a weights file, converted to f32 when loaded
 * for an f32 parameter. KILN_OTHER: a dtype a weights file may hold (BOOL, I64, ...) that kiln
 * validates and can skip, never computes with. */
/* KILN_Q8_0, KILN_Q4_0, KILN_Q4_1: ggml's blocks of 32 weights along a row (a GGUF file's, or
 * a parameter kept quantized: kiln-quantize-weights). A weights file's tensor of these types has
 * the logical shape [rows, in]; a parameter's dims are its bytes [rows, in / 32, block bytes]. */
typedef enum kiln_dtype {
  KILN_F32 = 0,
  KILN_I32 = 1,
  KILN_F16 = 2,
  KILN_BF16 = 3,
  KILN_Q8_0 = 4,
  KILN_Q4_0 = 5,
  KILN_Q4_1 = 6,
  KILN_OTHER = 255
} kiln_dtype;

/* One dimension: static (`sym` < 0, `size` is the extent) or a sequence length (`sym` >= 0 is
 * the index of the symbol; `size` is its compile-time upper bound). A batch is a symbol too (B
 * sequences); the kernels see a batch of B sequences of L positions as B·L rows, a symbol of its
 * own whose value is the product of its two factors (kiln_model_info.sym_factors). Inputs and
 * outputs show such rows as two dims, [B, L]. */
typedef struct kiln_dim {
  int64_t size;
  int32_t sym;
} kiln_dim;

/* The GPU API a model's kernels run on. */
typedef enum kiln_gpu_api { KILN_GPU_NONE = 0, KILN_GPU_CUDA = 1, KILN_GPU_OPENCL = 2 } kiln_gpu_api;

typedef enum kiln_init { KILN_INIT_NORMAL = 0, KILN_INIT_ONES = 1, KILN_INIT_ZEROS = 2 } kiln_init;

typedef struct kiln_tensor_info {
  const char *name;
  int32_t dtype; /* kiln_dtype */
  int32_t rank;
  kiln_dim dims[KILN_MAX_RANK];
  int64_t max_value; /* token inputs: ids must lie in [0, max_value); 0 = unchecked */
  int32_t init;      /* parameters: kiln_init for --random-weights */
  float init_scale;  /* parameters: standard deviation of KILN_INIT_NORMAL */
  int32_t optional;  /* inputs: may be left out, and are then all `fill` (BERT's token_type_ids: 0) */
  int32_t transposed; /* parameters: kept as the transpose of the 2-D tensor that weights files hold
                         (kiln-prepack-weights); dims are the kept layout's */
  int64_t panel_cols; /* parameters: > 0 when the [K, N] matrix (the transpose of the file's tensor
                         if `transposed`) is kept as panels: dims [ceil(N / w), K, w], N =
                         panel_cols; panel p holds columns p*w .. p*w + w - 1 of every row,
                         contiguously, the last one zero-padded (kiln-prepack-weights) */
  int64_t ignore_id;  /* target inputs: this negative id marks a position without a target (a loss
                         ignores it), accepted besides [0, max_value); 0 = none */
  float mask_rate;    /* masked-LM target inputs (> 0): --train masks this fraction of a window's
                         positions (80% become mask_token, 10% a random id, 10% stay) in the entry's
                         "tokens" and keeps their ids as targets, ignore_id elsewhere; 0 = next-token
                         targets */
  int64_t mask_token; /* masked-LM target inputs: the mask id */
  int64_t ahead;      /* target inputs: --train sets position i to the token `ahead` positions after
                         token i (Al-Rfou et al.'s multiple targets); 0 = the input "targets"
                         takes the next token (1), other inputs are not set by --train */
  int64_t fill;       /* optional inputs: the value they hold when left out (an attention mask: 1) */
  int32_t cache_slots; /* inputs: the per-sequence state slot each sequence of the entry reads and
                          writes (ids in [0, max_value), no two alike; left out: 0, 1, 2, ...) */
} kiln_tensor_info;

/* An arena buffer: bytes = static_bytes * prod(sym_value[s] ^ sym_pow[s]), live over the
 * kernels [first, last] of its entry. */
typedef struct kiln_buffer_info {
  int64_t static_bytes;
  uint8_t sym_pow[KILN_MAX_SYMS];
  int32_t first, last;
} kiln_buffer_info;

/* What an entry point is for (the dialect's EntryRole, value for value): the runtime's generation
 * and training find their entries by role, never by name. A decode_batch entry may take a past
 * per sequence and cache slots (kiln_tensor_info.cache_slots); an extend entry a single slot. */
typedef enum kiln_entry_role {
  KILN_ROLE_OTHER = 0,        /* run by its name only (--entry) */
  KILN_ROLE_FORWARD = 1,      /* every row's outputs (and, with a cache, fills it) */
  KILN_ROLE_PREFILL = 2,      /* a prompt into the caches, the last row's logits */
  KILN_ROLE_DECODE = 3,       /* one token at `past`, over the caches */
  KILN_ROLE_DECODE_BATCH = 4, /* one token per sequence of a batch */
  KILN_ROLE_ENCODE = 5,       /* an encoder-decoder's source into the cross-attention caches */
  KILN_ROLE_GRADIENTS = 6,    /* the loss and every parameter's gradient (grad.<name>) */
  KILN_ROLE_EVAL = 7,         /* the loss alone */
  KILN_ROLE_TRAIN_STEP = 8,   /* the loss, the gradients and the optimizer's update in place */
  KILN_ROLE_EXTEND = 9        /* a chunk of tokens appended at `past` of the caches, its last row's logits */
} kiln_entry_role;

/* The names of what a training step reads and writes besides the parameters
 * (kiln-apply-optimizer's): its states, saved in a training checkpoint, and its outputs. */
#define KILN_OPTIMIZER_PREFIX "optimizer."     /* every optimizer state */
#define KILN_STATE_STEP "optimizer.step"       /* steps taken ([1] f32) */
#define KILN_STATE_STEPS "optimizer.steps"     /* the run's total (--steps; 0 outside a run) */
#define KILN_STATE_LR "optimizer.lr"           /* the peak learning rate (--lr; 0: the model's) */
#define KILN_STATE_MOMENT1 "optimizer.m."      /* + a parameter's name: AdamW's first moment */
#define KILN_STATE_MOMENT2 "optimizer.v."      /* + a parameter's name: its second moment */
#define KILN_OUTPUT_LOSS "loss"                /* an entry's loss ([1]) */
#define KILN_OUTPUT_LR "lr"                    /* a training step's learning rate */
#define KILN_OUTPUT_GRAD_SUMSQ "grad_sumsq"    /* its gradients' sum of squares, before clipping */
#define KILN_OUTPUT_GRAD_PREFIX "grad."        /* + a parameter's name: its gradient */

/* Returns 0, or a Halide error code (< 0) and the index of the failing kernel. */
typedef int32_t (*kiln_entry_fn)(void **buffers, const int64_t *syms, int32_t *failed_kernel);

typedef struct kiln_entry_info {
  const char *name;
  kiln_entry_fn fn;
  int32_t n_inputs, n_outputs;
  const int32_t *inputs;  /* indices into kiln_model_info.io */
  const int32_t *outputs; /* indices into kiln_model_info.io */
  int32_t n_buffers;
  const kiln_buffer_info *buffers;
  int32_t n_kernels;
  const char *const *kernel_names;
  /* Non-NULL when the entry runs one sequence at a time (every batch symbol must be 1): why, for
   * the error message ("it writes a KV cache"). */
  const char *single_sequence;
  int32_t role; /* kiln_entry_role */
} kiln_entry_info;

/* A field of the checkpoint config.json the model was compiled for: the runtime compares it with
 * the config.json beside the weights. Values are JSON text. */
typedef struct kiln_config_field {
  const char *key;    /* "n_layer"; alternatives separated by '|' ("layer_norm_epsilon|layer_norm_eps") */
  const char *value;  /* 12, 1e-05, "gelu_new", true */
  const char *absent; /* what the field means when config.json omits it or sets null; NULL: it must be given */
  const char *what;   /* the model's own word for it, for messages ("layers") */
  int32_t at_least;   /* nonzero: a number no smaller than value, or null (none), passes (a sliding window no shorter than the context) */
} kiln_config_field;

typedef struct kiln_model_info {
  int32_t abi_version;
  const char *name;
  const char *kiln_version;
  const char *model_hash;
  const char *target;
  const char *cpu_features; /* comma separated, as __builtin_cpu_supports names them */
  int32_t n_syms;
  const char *const *sym_names;
  const int64_t *sym_max;
  int32_t n_params;
  const kiln_tensor_info *params;
  int32_t n_io;
  const kiln_tensor_info *io;
  int32_t n_entries;
  const kiln_entry_info *entries;
  /* Weights files may omit this prefix of parameter names ("transformer." for GPT-2). */
  const char *weights_prefix;
  /* Glob patterns (fnmatch) of tensors a weights file may carry that are not parameters
   * (mask buffers, heads of other tasks): skipped and reported, never an error. */
  int32_t n_ignored;
  const char *const *ignored;
  /* State buffers (KV caches): static shapes, shared by the entries, zero when a session starts. */
  int32_t n_states;
  const kiln_tensor_info *states;
  /* kiln_gpu_api; and with a GPU, 1 when every buffer lives on the device (--gpu-buffers=device):
   * the entries then take a device pointer per buffer after the host table. */
  int32_t gpu_api;
  int32_t gpu_resident;
  /* The checkpoint config.json fields this model was compiled for (may be none). */
  int32_t n_config;
  const kiln_config_field *config;
  /* 1 when an entry updates parameters in place (a training step): the runtime then keeps
   * every parameter in memory of its own, never in a weights file's mapping. */
  int32_t params_written;
  /* Per symbol, two symbol indices: the batch and the sequence length whose product it is (the
   * rows of a batch), or -1, -1 for a length or batch of its own (set by the inputs). */
  const int32_t *sym_factors;
} kiln_model_info;

#ifdef __cplusplus
}
#endif
#endif
