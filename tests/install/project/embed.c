/* embed.c - a C program running the tiny model through the installed runtime. */
#include <stdio.h>

#include "libtiny_lib.h"

int main(void) {
  kilnrt_session *s;
  const kilnrt_tensor *y;
  int32_t ids[3] = {1, 2, 3};
  kilnrt_tensor t = {KILN_I32, 1, {3}, ids};
  if (kilnrt_session_create(&tiny_lib_model, &s) || kilnrt_session_random_weights(s, 1) ||
      kilnrt_session_set_input(s, "tokens", &t) || kilnrt_session_run(s, "forward") || kilnrt_session_output(s, "y", &y)) {
    fprintf(stderr, "embed: %s\n", kilnrt_last_error());
    return 1;
  }
  printf("embed: y [%lld, %lld] first %g\n", (long long)y->shape[0], (long long)y->shape[1], ((const float *)y->data)[0]);
  kilnrt_session_destroy(s);
  return 0;
}
