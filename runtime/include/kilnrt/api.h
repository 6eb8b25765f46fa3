/* kilnrt/api.h - the kiln runtime C API: weights, inputs, arena planning, running a model.
 *
 * Usage (what a compiled model's main does; tests/unit/api_example.sh compiles it as C):
 *
 *   extern const kiln_model_info kiln_model;
 *   kilnrt_session *s;
 *   if (kilnrt_session_create(&kiln_model, &s)) die(kilnrt_last_error());
 *   if (kilnrt_session_load_weights(s, "model.safetensors"))  // or kilnrt_session_random_weights(s, 1)
 *     die(kilnrt_last_error());
 *   int32_t ids[3] = {1, 2, 3};
 *   kilnrt_tensor tokens = {KILN_I32, 1, {3}, ids};
 *   if (kilnrt_session_set_input(s, "tokens", &tokens) || kilnrt_session_run(s, "forward")) die(kilnrt_last_error());
 *   const kilnrt_tensor *out;
 *   kilnrt_session_output(s, "logits", &out);  // out->shape: [3, vocab]
 *   kilnrt_session_destroy(s);
 *
 * Every fallible call returns a kilnrt_status; on failure kilnrt_last_error() (thread local)
 * says what went wrong. Thread safety: a session is used by one thread at a time; distinct
 * sessions are independent. No MLIR, LLVM or Halide library is linked.
 */
#ifndef KILNRT_API_H
#define KILNRT_API_H
#include <stddef.h>
#include <stdint.h>
#include "kilnrt/model.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum kilnrt_status {
  KILNRT_OK = 0,
  KILNRT_USER_ERROR = 1,     /* bad input, bad file, bad option: the message says which */
  KILNRT_INTERNAL_ERROR = 2, /* a kiln bug or a kernel failure */
} kilnrt_status;

const char *kilnrt_last_error(void);

/* A dense host tensor, row-major. */
typedef struct kilnrt_tensor {
  kiln_dtype dtype;
  int32_t rank;
  int64_t shape[KILN_MAX_RANK];
  void *data;
} kilnrt_tensor;
/* The element count; -1 when the rank is outside [0, 4], a dimension is negative or the product
 * overflows int64 (never a wrapped-around small count). */
int64_t kilnrt_tensor_numel(const kilnrt_tensor *t);
/* A float tensor's values as f32 into `out` (numel floats): F32 copied, F16 and BF16 widened,
 * Q8_0 / Q4_0 / Q4_1 blocks decoded. USER_ERROR for other dtypes. */
kilnrt_status kilnrt_tensor_to_f32(const kilnrt_tensor *t, float *out);

/* ---- weights files (safetensors or GGUF, read with mmap) ---- */
typedef struct kilnrt_weights kilnrt_weights;
/* `path`: a .safetensors file, a sharded checkpoint's model.safetensors.index.json (its shards
 * beside it, each mapped), or a folder holding either; or a GGUF file (recognized by its magic:
 * versions 2 and 3; F32, F16, BF16, Q8_0, Q4_0 and Q4_1 tensors, the block formats dequantized
 * to f32; architecture "llama", its tensors under Hugging Face's names). F16 and BF16 tensors
 * read as such (kilnrt_session_load_weights converts them to f32). */
kilnrt_status kilnrt_weights_open(const char *path, kilnrt_weights **out);
/* The file opened (a folder's model.safetensors or index). */
const char *kilnrt_weights_path(const kilnrt_weights *w);
void kilnrt_weights_close(kilnrt_weights *w);
int32_t kilnrt_weights_count(const kilnrt_weights *w);
/* The i-th tensor in file order; data points into the mapping (f32 data is copied to an aligned
 * buffer when the file places it misaligned). */
kilnrt_status kilnrt_weights_get(const kilnrt_weights *w, int32_t i, const char **name, kilnrt_tensor *t);
kilnrt_status kilnrt_weights_find(const kilnrt_weights *w, const char *name, kilnrt_tensor *t);
kilnrt_status kilnrt_weights_save(const char *path, int32_t n, const char *const *names, const kilnrt_tensor *ts);

/* ---- .npy files ---- */
/* Reads f32, i32 or i64 (converted to i32, range-checked) arrays, C order. Free with kilnrt_tensor_free. */
kilnrt_status kilnrt_npy_read(const char *path, kilnrt_tensor *out);
kilnrt_status kilnrt_npy_write(const char *path, const kilnrt_tensor *t);
void kilnrt_tensor_free(kilnrt_tensor *t);

/* ---- arena planning ---- */
/* Sizes every buffer from the symbol values, places them (first fit, largest first, buffers
 * live at the same time never overlap), 64-byte aligned. */
kilnrt_status kilnrt_arena_plan(const kiln_buffer_info *buffers, int32_t n, const int64_t *syms,
                                int64_t *offsets, int64_t *total_bytes);

/* ---- sessions ---- */
typedef struct kilnrt_session kilnrt_session;
kilnrt_status kilnrt_session_create(const kiln_model_info *model, kilnrt_session **out);
void kilnrt_session_destroy(kilnrt_session *s);
/* Every parameter must be in the file (under its name, or without the model's weights prefix)
 * with its shape and dtype (f32 parameters may be stored as F16 or BF16: converted to f32 here);
 * tensors matching the model's ignore patterns are skipped. Otherwise USER_ERROR lists the
 * missing, unexpected and mis-shaped tensors. `path` as for kilnrt_weights_open. */
kilnrt_status kilnrt_session_load_weights(kilnrt_session *s, const char *path);
/* How weights are loaded; zero-initialize for the defaults. */
typedef struct kilnrt_load_options {
  /* 0 (default): a NaN or infinity in an f32 parameter is a USER_ERROR naming the tensor and the
   * first flat index (such weights give silently wrong outputs: max-based ops drop a NaN on some
   * rows); 1: loaded as they are. */
  int32_t allow_non_finite;
  /* 0 (default): a config.json beside the weights is compared with the model (kilnrt_config_check);
   * 1: not read. */
  int32_t ignore_config;
} kilnrt_load_options;
/* A checkpoint's config.json against the fields a model was compiled for (kiln_model_info.config):
 * USER_ERROR listing each that differs ("the checkpoint has n_layer 24, this model was compiled
 * with 12 layers"). */
kilnrt_status kilnrt_config_check(const char *config_path, const kiln_config_field *fields, int32_t n);
/* A GGUF file's metadata as the config.json of a Hugging Face checkpoint (num_hidden_layers,
 * hidden_size, rope_theta, tie_word_embeddings, ...): *json_text is valid until the next call
 * on this thread. USER_ERROR when the file is no readable GGUF. */
kilnrt_status kilnrt_gguf_config(const char *path, const char **json_text);
/* A GGUF file's tensor types by the model's tensor names, as a JSON object ({"lm_head.weight":
 * "Q8_0", ...}; names and validity as kilnrt_gguf_config's). What a compiler keeps quantized. */
kilnrt_status kilnrt_gguf_tensor_types(const char *path, const char **json_text);
/* kilnrt_session_load_weights with options (NULL: the defaults). */
kilnrt_status kilnrt_session_load_weights_with(kilnrt_session *s, const char *path, const kilnrt_load_options *options);
/* The tensors the last load skipped (the model's ignore patterns); valid until the next load. */
int32_t kilnrt_session_ignored_count(const kilnrt_session *s);
const char *kilnrt_session_ignored_name(const kilnrt_session *s, int32_t i);
kilnrt_status kilnrt_session_random_weights(kilnrt_session *s, uint64_t seed);
kilnrt_status kilnrt_session_save_weights(kilnrt_session *s, const char *path);
/* Copies the data; int64 ids must already be converted. Checks dtype, rank, static dims, the
 * compiled bound of each sequence length, the id range of token inputs, and that f32 inputs
 * are finite (a NaN or infinity is a USER_ERROR naming its index). */
kilnrt_status kilnrt_session_set_input(kilnrt_session *s, const char *name, const kilnrt_tensor *t);
kilnrt_status kilnrt_session_run(kilnrt_session *s, const char *entry);
kilnrt_status kilnrt_session_output(kilnrt_session *s, const char *name, const kilnrt_tensor **out);
/* A view of the state `name` (a KV cache): its shape and the session's own storage, valid for
 * the session's life. Reading shows what the runs wrote; writing through it sets the state.
 * Models with device-resident buffers (--target=cuda --gpu-buffers=device): a snapshot copied
 * from the device at this call; writes do not reach the device. */
kilnrt_status kilnrt_session_state(kilnrt_session *s, const char *name, kilnrt_tensor *out);
/* Bytes of the arena the last run planned. */
int64_t kilnrt_session_arena_bytes(const kilnrt_session *s);

/* ---- kernel scratch: what the kernels allocate while they run (panels, score strips), from
 * blocks kilnrt keeps and reuses (installed by the first session): after a first run at a given
 * length, a run allocates nothing. Process-wide. */
typedef struct kilnrt_scratch_stats {
  int64_t in_use_bytes;      /* handed to running kernels now */
  int64_t peak_in_use_bytes; /* the most at once since the last reset */
  int64_t held_bytes;        /* every block kept (in use + idle) */
  int64_t idle_bytes;        /* kept, free for the next request of its size */
  int64_t requests;          /* allocations the kernels asked for */
  int64_t blocks_allocated;  /* of which served by new memory (the rest reused a block) */
} kilnrt_scratch_stats;
void kilnrt_scratch_get_stats(kilnrt_scratch_stats *out);
void kilnrt_scratch_reset_peak(void);
/* Returns the idle blocks to the system. */
void kilnrt_scratch_trim(void);

/* The model a session runs. */
const kiln_model_info *kilnrt_session_model(const kilnrt_session *s);

/* ---- generation (models with a `decode` entry: inputs `token` [1] and `past` [1]) ---- */
typedef struct kilnrt_generate_options {
  int32_t max_new_tokens; /* at most this many tokens (the compiled context may stop it sooner) */
  float temperature;      /* 0 (default): greedy; > 0: sample from softmax(logits / temperature) */
  int32_t top_k;          /* > 0: sample among the k most likely tokens only */
  float top_p;            /* in (0, 1): sample within the smallest set of tokens whose probability reaches top_p */
  uint64_t seed;          /* the sampling stream: one seed, one text */
  int32_t has_eos;        /* 1: stop after generating the token `eos` */
  int32_t eos;
  int32_t start_token;    /* encoder-decoder models: the decoder's first token */
  const int32_t *stop_ids; /* n_stop_ids more tokens to stop after (end of turn, end of text, ...), as `eos` */
  int32_t n_stop_ids;
  int64_t past;           /* > 0: the caches already hold this sequence's first `past` positions (an earlier
                           * turn); the prompt is appended after them through the model's extend entry */
} kilnrt_generate_options;
typedef enum kilnrt_stop_reason {
  KILNRT_STOP_LENGTH = 0,   /* max_new_tokens generated */
  KILNRT_STOP_EOS = 1,      /* the end-of-text token, or one of the stop ids */
  KILNRT_STOP_CONTEXT = 2,  /* the compiled context is full */
  KILNRT_STOP_CALLBACK = 3, /* the callback asked to stop */
} kilnrt_stop_reason;
typedef struct kilnrt_generate_stats {
  int64_t prompt_tokens, generated_tokens;
  int64_t prompt_ns;   /* the prompt's run (prefill or encode), which also gives the first token's logits */
  int64_t generate_ns; /* from the end of the prompt's run to the last token */
  int64_t context;     /* the compiled context (cache length) */
  kilnrt_stop_reason stop;
} kilnrt_generate_stats;
/* Called for each new token with the logits row it was drawn from (valid during the call);
 * returning nonzero stops generation after this token. */
typedef int32_t (*kilnrt_token_fn)(void *user, int32_t token, const float *logits, int64_t vocab);
/* Runs the prompt through the model's prefill entry (decoder-only models: `prefill` if it has
 * one, else its first entry; encoder-decoder models: `encode`), or with options->past > 0 through
 * its extend entry at that past, then decodes token by token with the KV cache. After a call the
 * caches hold past + the prompt + every generated token but the last (which no step has run yet):
 * a conversation's next call passes that count as `past` and the new tokens, starting with it. `prompt` (n_prompt ids) goes to that entry's token input; with prompt NULL the
 * inputs already set are used. Every token goes to `fn` (may be NULL). `stats` may be NULL.
 * A non-finite logit is a USER_ERROR naming the step. */
kilnrt_status kilnrt_generate(kilnrt_session *s, const int32_t *prompt, int64_t n_prompt,
                              const kilnrt_generate_options *options, kilnrt_token_fn fn, void *user,
                              kilnrt_generate_stats *stats);
/* The model's entry of `role` (one per role but KILN_ROLE_OTHER), or NULL. */
const kiln_entry_info *kilnrt_entry_by_role(const kiln_model_info *model, kiln_entry_role role);
/* The entry kilnrt_generate runs the prompt through: the encode entry (encoder-decoder models),
 * else the prefill entry, else the forward entry; NULL when there is none. */
const kiln_entry_info *kilnrt_prefill_entry(const kiln_model_info *model);
/* One token from a logits row, as kilnrt_generate draws it; `state` is the sampling stream
 * (start it at the seed). */
kilnrt_status kilnrt_sample(const float *logits, int64_t vocab, const kilnrt_generate_options *options, uint64_t *state,
                            int32_t *token);

/* ---- training data ---- */
/* Masked-LM masking of one window of `n` ids (what --train does for a masked-LM targets input,
 * kiln_tensor_info.mask_rate > 0): each position is picked with probability `rate` (at least one
 * is); a picked position's target is its id, and its token becomes mask_token (80%), a random id
 * in [0, vocab) (10%) or stays (10%); every other target is -1 and its token stays. The same
 * `seed` gives the same masks. */
kilnrt_status kilnrt_tokens_mask(const int32_t *ids, int64_t n, int64_t vocab, int64_t mask_token, float rate,
                                 uint64_t seed, int32_t *tokens, int32_t *targets);

/* ---- data parallel: the ranks of an `mpirun -np P` run ---- */
/* Joins the process group: under Open MPI's mpirun with more than one rank
 * (OMPI_COMM_WORLD_SIZE > 1), loads libmpi.so.40 with dlopen and initializes MPI; anywhere else
 * the group is this process alone (rank 0 of 1) and nothing is loaded. Idempotent. */
kilnrt_status kilnrt_group_join(int32_t *rank, int32_t *size);
/* This rank's share of the global batch's loss count (its rows, or its masked positions), which
 * weights its gradients in the training step's kiln.all_reduce: the shares of the ranks sum to 1. */
kilnrt_status kilnrt_group_set_share(double share);
/* Sums `n` values over the ranks, in place (alone: nothing to do). */
kilnrt_status kilnrt_group_sum(double *values, int64_t n);
/* Leaves the group (MPI_Finalize), once every rank is done. */
kilnrt_status kilnrt_group_leave(void);

/* ---- host checks, timing ---- */
/* USER_ERROR naming the missing features when this CPU lacks any of `features` (comma list). */
kilnrt_status kilnrt_cpu_check(const char *features);
/* Models compiled with --target=cuda: loads the CUDA driver (libcuda.so.1, made visible to the
 * kernels' runtime) and checks for a device. A user error "no CUDA driver or device: ..."
 * otherwise. kilnrt_session_create calls it for such models. */
kilnrt_status kilnrt_cuda_check(void);
/* Models compiled with --target=opencl: loads the OpenCL loader (libOpenCL.so.1, made visible to
 * the kernels' runtime) and checks for a platform with a device. A user error "no OpenCL
 * platform or device: ..." otherwise. kilnrt_session_create calls it for such models. */
kilnrt_status kilnrt_opencl_check(void);
int64_t kilnrt_time_now_ns(void);
void kilnrt_threads_set(int n);

#ifdef __cplusplus
}
#endif
#include "kilnrt/tokenizer.h"
#endif
