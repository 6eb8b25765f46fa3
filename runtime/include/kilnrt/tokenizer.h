/* kilnrt/tokenizer.h - text to token ids and back, read at run time from the files a checkpoint
 * ships with (included by kilnrt/api.h).
 *
 * Two kinds, as Hugging Face `tokenizers` computes them:
 *  * byte-level BPE (GPT-2): `tokenizer.json` with a BPE model and a ByteLevel pre-tokenizer, or
 *    `vocab.json` + `merges.txt`. Text is split by GPT-2's pattern (PCRE2, Unicode classes),
 *    each piece's bytes mapped to the byte-level alphabet and merged by rank. Any byte string
 *    encodes, invalid UTF-8 included (byte by byte), and decodes back to the same bytes.
 *  * WordPiece (BERT): `tokenizer.json` with a WordPiece model, or `vocab.txt` (with
 *    `tokenizer_config.json` beside it when present: do_lower_case, strip_accents,
 *    tokenize_chinese_chars). BERT's normalizer (control characters removed, CJK ideographs
 *    split, accents stripped, lower-cased, as configured), split on whitespace and
 *    punctuation, greedy longest-match subwords.
 * Added tokens (`<|endoftext|>`, `[CLS]`, ...) written in the text are matched as themselves.
 *
 *   kilnrt_tokenizer *t;
 *   if (kilnrt_tokenizer_open("checkpoint-folder", &t)) die(kilnrt_last_error());
 *   const int32_t *ids; int64_t n;
 *   kilnrt_tokenizer_encode(t, "Hello world", 11, 1, &ids, &n);
 *
 * A tokenizer is used by one thread at a time: the results of encode, decode and piece live in
 * the tokenizer until its next call.
 */
#ifndef KILNRT_TOKENIZER_H
#define KILNRT_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "kilnrt/api.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct kilnrt_tokenizer kilnrt_tokenizer;
typedef enum kilnrt_tokenizer_kind { KILNRT_TOKENIZER_BPE = 1, KILNRT_TOKENIZER_WORDPIECE = 2 } kilnrt_tokenizer_kind;

/* `path`: a folder (its tokenizer.json, else vocab.json + merges.txt, else vocab.txt) or one of
 * those files. A missing or malformed file is a USER_ERROR naming the file and the problem. */
kilnrt_status kilnrt_tokenizer_open(const char *path, kilnrt_tokenizer **out);
void kilnrt_tokenizer_close(kilnrt_tokenizer *t);
kilnrt_tokenizer_kind kilnrt_tokenizer_kind_of(const kilnrt_tokenizer *t);
/* One more than the largest token id. */
int32_t kilnrt_tokenizer_vocab_size(const kilnrt_tokenizer *t);
/* The end-of-text token (`<|endoftext|>`, `</s>`, ...), or -1 when it has none. */
int32_t kilnrt_tokenizer_eos(const kilnrt_tokenizer *t);
/* The tokens generation stops at (sorted; *ids valid while the tokenizer is open): the end-of-text
 * token, a GGUF file's end-of-turn and end-of-message ids (tokenizer.ggml.eot_token_id,
 * eom_token_id), generation_config.json's eos_token_id (one or a list) beside the files, and the
 * special tokens that end a turn in the common chat formats (<|im_end|>, <|eot_id|>, <|eom_id|>,
 * <|end|>, <end_of_turn>, <|endoftext|>). Returns their count. */
int64_t kilnrt_tokenizer_stop_ids(const kilnrt_tokenizer *t, const int32_t **ids);
/* The beginning-of-text token a GGUF file names (tokenizer.ggml.bos_token_id), or -1. */
int32_t kilnrt_tokenizer_bos(const kilnrt_tokenizer *t);
/* The id of a token given by its text, or -1. */
int32_t kilnrt_tokenizer_token_id(const kilnrt_tokenizer *t, const char *token);
/* `len` bytes of text (any bytes) to ids; add_special = 1 adds the template's special tokens
 * (BERT: [CLS] ... [SEP]; GPT-2 has none). */
kilnrt_status kilnrt_tokenizer_encode(kilnrt_tokenizer *t, const char *text, size_t len, int32_t add_special,
                                      const int32_t **ids, int64_t *n);
/* Ids to text (bytes, not NUL-terminated: byte-level BPE may produce any bytes);
 * skip_special = 1 leaves out special tokens. An id outside the vocabulary is a USER_ERROR. */
kilnrt_status kilnrt_tokenizer_decode(kilnrt_tokenizer *t, const int32_t *ids, int64_t n, int32_t skip_special,
                                      const char **text, size_t *len);
/* The text one token adds after `index` earlier tokens (for streaming: the pieces of ids
 * 0, 1, ... concatenated are their decode). Special tokens give their text unless skip_special. */
kilnrt_status kilnrt_tokenizer_piece(kilnrt_tokenizer *t, int32_t id, int64_t index, int32_t skip_special,
                                     const char **text, size_t *len);

/* The chat template the tokenizer's files hold (a GGUF file's tokenizer.chat_template, or the
 * chat_template of tokenizer_config.json beside tokenizer.json), or NULL when they hold none. */
const char *kilnrt_tokenizer_chat_template(const kilnrt_tokenizer *t);
/* Renders a chat template with the variables of `context_json`, a JSON object ("messages":
 * [{"role": ..., "content": ...}], "add_generation_prompt": true, "bos_token": ..., ...), as
 * transformers' apply_chat_template does, by kiln's own interpreter of the Jinja subset chat
 * templates use. A construct outside the subset is a USER_ERROR naming it and the template's
 * line. *text is valid until the next call on this thread. */
kilnrt_status kilnrt_chat_render(const char *template_text, const char *context_json, const char **text, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
