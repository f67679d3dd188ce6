/* Line tokenizer shared by the fake vendor libraries (fake_nvml.c, fake_rocm_smi.c).
 *
 * A script is a text file, one directive per line:  WORD key=value key="value with spaces" ...
 * '#' starts a comment. The value "na" means "the library answers NOT_SUPPORTED" where the fake
 * supports it. */
#ifndef GPUGEEK_HW_TESTING_FAKE_SCRIPT_H_
#define GPUGEEK_HW_TESTING_FAKE_SCRIPT_H_

#include <stdlib.h>
#include <string.h>

#define FAKE_MAX_TOKENS 40
#define FAKE_MAX_TOKEN 128

typedef struct {
  char word[FAKE_MAX_TOKEN];
  int count;
  char key[FAKE_MAX_TOKENS][FAKE_MAX_TOKEN];
  char value[FAKE_MAX_TOKENS][FAKE_MAX_TOKEN];
} fake_line_t;

/* Splits `line` into a directive word and key=value pairs; returns 0 for a blank or comment line. */
static int fake_parse_line(const char* line, fake_line_t* out) {
  const char* p = line;
  memset(out, 0, sizeof(*out));
  while (*p == ' ' || *p == '\t') ++p;
  if (*p == '\0' || *p == '\n' || *p == '#') return 0;
  size_t n = 0;
  while (*p && *p != ' ' && *p != '\t' && *p != '\n' && n + 1 < FAKE_MAX_TOKEN) out->word[n++] = *p++;
  while (*p && out->count < FAKE_MAX_TOKENS) {
    while (*p == ' ' || *p == '\t' || *p == '\n') ++p;
    if (*p == '\0' || *p == '#') break;
    char* k = out->key[out->count];
    char* v = out->value[out->count];
    n = 0;
    while (*p && *p != '=' && *p != ' ' && *p != '\n' && n + 1 < FAKE_MAX_TOKEN) k[n++] = *p++;
    if (*p == '=') {
      ++p;
      n = 0;
      if (*p == '"') {
        ++p;
        while (*p && *p != '"' && n + 1 < FAKE_MAX_TOKEN) v[n++] = *p++;
        if (*p == '"') ++p;
      } else {
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && n + 1 < FAKE_MAX_TOKEN) v[n++] = *p++;
      }
    }
    out->count++;
  }
  return 1;
}

/* The value of `key`, or NULL. */
static const char* fake_get(const fake_line_t* line, const char* key) {
  for (int i = 0; i < line->count; ++i) {
    if (strcmp(line->key[i], key) == 0) return line->value[i];
  }
  return NULL;
}

/* A number (decimal or 0x hex); `na` gives -1 (NOT_SUPPORTED); absent gives `dflt`. */
static long long fake_num(const fake_line_t* line, const char* key, long long dflt) {
  const char* v = fake_get(line, key);
  if (v == NULL) return dflt;
  if (strcmp(v, "na") == 0) return -1;
  return (long long)strtoull(v, NULL, 0);
}

static void fake_copy(char* dst, size_t size, const char* src) {
  if (src == NULL) return;
  size_t n = strlen(src);
  if (n >= size) n = size - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

#endif /* GPUGEEK_HW_TESTING_FAKE_SCRIPT_H_ */
