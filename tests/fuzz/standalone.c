/* SPDX-License-Identifier: Apache-2.0
 *
 * A stand-in for libFuzzer's main where it is not available (gcc builds):
 * runs the target on the files named on the command line, or, without
 * arguments, on every file of the directory ADR_FUZZ_CORPUS (the checked-in
 * seeds and crash regressions), then on random mutations of the seeds for
 * ADR_FUZZ_SECONDS seconds (default 2) from the seed ADR_FUZZ_SEED
 * (default 1), so a CI run is bounded and reproducible. Prints the number
 * of inputs run.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz.h"

static uint64_t rng_state;

static uint64_t rnd(void) {
  /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int run_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  uint8_t* buf = malloc(1 << 20);
  size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
  fclose(f);
  if (buf == NULL) return 1;
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

/* Every regular file of `dir`, in directory order; -1 when it cannot be read. */
static long run_corpus(const char* dir) {
  DIR* d = opendir(dir);
  if (d == NULL) {
    perror(dir);
    return -1;
  }
  long n = 0;
  struct dirent* e;
  char path[4096];
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    if (run_file(path) != 0) {
      closedir(d);
      return -1;
    }
    n++;
  }
  closedir(d);
  return n;
}

int main(int argc, char** argv) {
  if (argc > 1) {
    int rc = 0;
    for (int i = 1; i < argc; i++) rc |= run_file(argv[i]);
    return rc;
  }
  const char* sec = getenv("ADR_FUZZ_SECONDS");
  const char* seed = getenv("ADR_FUZZ_SEED");
  double seconds = sec ? atof(sec) : 2.0;
  rng_state = seed ? strtoull(seed, NULL, 10) : 1;
  if (rng_state == 0) rng_state = 1;
  size_t n_seeds = 0;
  while (fuzz_seeds[n_seeds] != NULL) n_seeds++;
  uint8_t buf[512];
  long runs = 0;
  const char* corpus = getenv("ADR_FUZZ_CORPUS");
  if (corpus != NULL) {
    long n = run_corpus(corpus);
    if (n <= 0) {
      fprintf(stderr, "ADR_FUZZ_CORPUS=%s: %s\n", corpus, n == 0 ? "empty" : "unreadable");
      return 1;
    }
    fprintf(stderr, "%ld corpus files, no crash\n", n);
    runs += n;
  }
  double end = now() + seconds;
  for (size_t i = 0; i < n_seeds; i++, runs++)
    LLVMFuzzerTestOneInput((const uint8_t*)fuzz_seeds[i], strlen(fuzz_seeds[i]));
  while (now() < end) {
    for (int batch = 0; batch < 256; batch++, runs++) {
      size_t len;
      if (rnd() % 8 == 0) {
        /* plain random bytes */
        len = rnd() % 64;
        for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)rnd();
      } else {
        const char* s = fuzz_seeds[rnd() % n_seeds];
        len = strlen(s);
        memcpy(buf, s, len);
        int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits; e++) {
          size_t pos = len ? rnd() % (len + 1) : 0;
          switch (rnd() % 5) {
            case 0: /* flip a byte */
              if (len) buf[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
              break;
            case 1: /* insert an interesting byte */
              if (len < sizeof(buf) - 1) {
                static const char interesting[] = "+:,-0123456789lLvwsudmrnzZbtDiM\0\xff";
                memmove(buf + pos + 1, buf + pos, len - pos);
                buf[pos] = (uint8_t)interesting[rnd() % (sizeof(interesting) - 1)];
                len++;
              }
              break;
            case 2: /* truncate */
              len = pos;
              break;
            case 3: /* duplicate a chunk */
              if (len && len * 2 < sizeof(buf)) {
                memcpy(buf + len, buf, len);
                len *= 2;
              }
              break;
            default: /* overwrite with a random byte */
              if (len) buf[rnd() % len] = (uint8_t)rnd();
          }
        }
      }
      LLVMFuzzerTestOneInput(buf, len);
    }
  }
  fprintf(stderr, "%ld inputs in %.1f s, no crash\n", runs, seconds);
  return 0;
}
