/* SPDX-License-Identifier: Apache-2.0
 *
 * Interoperability with an independent Arrow implementation: the Apache
 * Arrow JavaScript library (npm `apache-arrow`, pinned in
 * tests/ipc/interop/package.json, installed by scripts/deps.sh).
 *
 *  - adr -> arrow-js: every case of the array catalogue (the columns whose
 *    types arrow-js knows), as a stream of two batches (whole, then sliced),
 *    is written with adr's encoder; the source batches are dumped as JSON
 *    here; interop/check.mjs reads the stream with arrow-js and compares.
 *  - arrow-js -> adr: check.mjs builds tables of every type it supports and
 *    writes them with its stream writer, with a JSON dump of the source;
 *    adr reads each stream (full validation), dumps it here, and check.mjs
 *    compares the dumps.
 *
 * The dump (same on both sides): the schema as Arrow C format strings
 * (decimals with their width), names, nullability and flags; each value
 * as null, a boolean, the hex of its bytes (fixed width: little-endian
 * bytes; binary and strings: the bytes), an array (lists, structs, maps
 * as lists of [key, value]), [type id, value] for unions, the dictionary's
 * value for dictionary-encoded fields.
 *
 * Exit 77 (skip) when node or the module is missing (ADR_IPC_INTEROP_DIR
 * names tests/ipc/interop; ADR_NODE the node binary, default `node`).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc_test.h"

static const char* interop_dir;
static const char* node_bin;
static char work_dir[256];

/* ---- JSON dump ------------------------------------------------------------ */

static void put_hex(FILE* f, const uint8_t* p, int64_t n) {
  fputc('"', f);
  for (int64_t k = 0; k < n; k++) fprintf(f, "%02x", p[k]);
  fputc('"', f);
}

static void put_string(FILE* f, const char* s) {
  if (s == NULL) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

static bool bit(const void* bits, int64_t i) {
  return (((const uint8_t*)bits)[i >> 3] >> (i & 7)) & 1;
}

static int64_t read_int(const void* p, int64_t i, int bytes, bool is_signed) {
  switch (bytes) {
    case 1:
      return is_signed ? (int64_t)((const int8_t*)p)[i] : (int64_t)((const uint8_t*)p)[i];
    case 2:
      return is_signed ? (int64_t)((const int16_t*)p)[i] : (int64_t)((const uint16_t*)p)[i];
    case 4:
      return is_signed ? (int64_t)((const int32_t*)p)[i] : (int64_t)((const uint32_t*)p)[i];
    default:
      return ((const int64_t*)p)[i];
  }
}

static void parse(const struct ArrowSchema* s, struct adr_format* f) {
  struct adr_error err;
  ASSERT_OK(adr_format_parse(s->format, f, &err), &err);
}

static void dump_value(FILE* f, const struct ArrowSchema* s, const struct ArrowArray* a, int64_t i);

static void dump_range(FILE* f, const struct ArrowSchema* child, const struct ArrowArray* a,
                       int64_t from, int64_t to) {
  fputc('[', f);
  for (int64_t k = from; k < to; k++) {
    if (k > from) fputc(',', f);
    dump_value(f, child, a, k);
  }
  fputc(']', f);
}

/* Value i of a (logical index: a->offset is added here). */
static void dump_value(FILE* f, const struct ArrowSchema* s, const struct ArrowArray* a,
                       int64_t i) {
  struct adr_format fmt;
  parse(s, &fmt);
  int64_t j = a->offset + i;
  if (fmt.layout == ADR_LAYOUT_NULL) {
    fputs("null", f);
    return;
  }
  if (fmt.layout == ADR_LAYOUT_SPARSE_UNION || fmt.layout == ADR_LAYOUT_DENSE_UNION) {
    int8_t id = ((const int8_t*)a->buffers[0])[j];
    int64_t c = 0;
    while (c < fmt.n_type_ids && fmt.type_ids[c] != id) c++;
    assert_true(c < fmt.n_type_ids);
    int64_t at = fmt.layout == ADR_LAYOUT_DENSE_UNION ? ((const int32_t*)a->buffers[1])[j] : j;
    fprintf(f, "[%d,", id);
    dump_value(f, s->children[c], a->children[c], at);
    fputc(']', f);
    return;
  }
  if (fmt.layout == ADR_LAYOUT_RUN_END) {
    const struct ArrowArray* re = a->children[0];
    struct adr_format rf;
    parse(s->children[0], &rf);
    int64_t r = 0;
    while (read_int(re->buffers[1], re->offset + r, rf.bit_width / 8, true) <= j) r++;
    dump_value(f, s->children[1], a->children[1], r);
    return;
  }
  if (a->buffers[0] != NULL && !bit(a->buffers[0], j)) {
    fputs("null", f);
    return;
  }
  if (s->dictionary != NULL) {
    int64_t idx = read_int(
        a->buffers[1], j, fmt.bit_width / 8,
        fmt.type != ADR_TYPE_UINT8 && fmt.type != ADR_TYPE_UINT16 && fmt.type != ADR_TYPE_UINT32);
    dump_value(f, s->dictionary, a->dictionary, idx);
    return;
  }
  switch (fmt.layout) {
    case ADR_LAYOUT_FIXED:
      if (fmt.bit_width == 1)
        fputs(bit(a->buffers[1], j) ? "true" : "false", f);
      else
        put_hex(f, (const uint8_t*)a->buffers[1] + j * (fmt.bit_width / 8), fmt.bit_width / 8);
      return;
    case ADR_LAYOUT_VAR_BINARY: {
      int64_t lo = read_int(a->buffers[1], j, fmt.offset_bytes, true);
      int64_t hi = read_int(a->buffers[1], j + 1, fmt.offset_bytes, true);
      put_hex(f, (const uint8_t*)a->buffers[2] + lo, hi - lo);
      return;
    }
    case ADR_LAYOUT_BINARY_VIEW: {
      const uint8_t* v = (const uint8_t*)a->buffers[1] + 16 * j;
      int32_t len, buf, off;
      memcpy(&len, v, 4);
      if (len <= 12) {
        put_hex(f, v + 4, len);
      } else {
        memcpy(&buf, v + 8, 4);
        memcpy(&off, v + 12, 4);
        put_hex(f, (const uint8_t*)a->buffers[2 + buf] + off, len);
      }
      return;
    }
    case ADR_LAYOUT_LIST: {
      int64_t lo = read_int(a->buffers[1], j, fmt.offset_bytes, true);
      int64_t hi = read_int(a->buffers[1], j + 1, fmt.offset_bytes, true);
      dump_range(f, s->children[0], a->children[0], lo, hi);
      return;
    }
    case ADR_LAYOUT_LIST_VIEW: {
      int64_t lo = read_int(a->buffers[1], j, fmt.offset_bytes, true);
      int64_t n = read_int(a->buffers[2], j, fmt.offset_bytes, true);
      dump_range(f, s->children[0], a->children[0], lo, lo + n);
      return;
    }
    case ADR_LAYOUT_FIXED_LIST:
      dump_range(f, s->children[0], a->children[0], j * fmt.fixed_size, (j + 1) * fmt.fixed_size);
      return;
    case ADR_LAYOUT_STRUCT:
      fputc('[', f);
      for (int64_t c = 0; c < s->n_children; c++) {
        if (c) fputc(',', f);
        dump_value(f, s->children[c], a->children[c], j);
      }
      fputc(']', f);
      return;
    default:
      fail_msg("dump: layout %d", (int)fmt.layout);
  }
}

/* The format as both sides spell it: decimals with their width. */
static void put_format(FILE* f, const struct ArrowSchema* s) {
  struct adr_format fmt;
  parse(s, &fmt);
  if (fmt.type >= ADR_TYPE_DECIMAL32 && fmt.type <= ADR_TYPE_DECIMAL256) {
    fprintf(f, "\"d:%d,%d,%d\"", fmt.precision, fmt.scale, fmt.bit_width);
    return;
  }
  put_string(f, s->format);
}

static void dump_field(FILE* f, const struct ArrowSchema* s, bool is_dictionary_values) {
  fputs("{\"format\":", f);
  put_format(f, s);
  if (!is_dictionary_values) {
    fputs(",\"name\":", f);
    put_string(f, s->name != NULL ? s->name : "");
    fprintf(f, ",\"nullable\":%s", (s->flags & ARROW_FLAG_NULLABLE) ? "true" : "false");
  }
  if (strcmp(s->format, "+m") == 0)
    fprintf(f, ",\"keysSorted\":%s", (s->flags & ARROW_FLAG_MAP_KEYS_SORTED) ? "true" : "false");
  if (s->dictionary != NULL) {
    fprintf(f, ",\"ordered\":%s,\"dictionary\":",
            (s->flags & ARROW_FLAG_DICTIONARY_ORDERED) ? "true" : "false");
    dump_field(f, s->dictionary, true);
  }
  fputs(",\"children\":[", f);
  for (int64_t c = 0; c < s->n_children; c++) {
    if (c) fputc(',', f);
    dump_field(f, s->children[c], false);
  }
  fputs("]}", f);
}

static void dump_schema(FILE* f, const struct ArrowSchema* schema) {
  fputs("{\"fields\":[", f);
  for (int64_t c = 0; c < schema->n_children; c++) {
    if (c) fputs(",\n", f);
    dump_field(f, schema->children[c], false);
  }
  fputs("],\n\"batches\":[", f);
}

static void dump_batch(FILE* f, const struct ArrowSchema* schema, const struct ArrowArray* a,
                       bool first) {
  if (!first) fputs(",\n", f);
  fprintf(f, "{\"length\":%lld,\"columns\":[", (long long)a->length);
  for (int64_t c = 0; c < schema->n_children; c++) {
    if (c) fputs(",\n", f);
    /* A record batch's columns start where the root does. */
    struct ArrowArray col = *a->children[c];
    col.offset += a->offset;
    col.length = a->length;
    dump_range(f, schema->children[c], &col, 0, a->length);
  }
  fputs("]}", f);
}

/* ---- helpers -------------------------------------------------------------- */

static int run_node(const char* args) {
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "'%s' '%s/check.mjs' %s", node_bin, interop_dir, args);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static void write_file(const char* path, const struct bytes* b) {
  FILE* f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b->data, 1, b->len, f), b->len);
  assert_int_equal(fclose(f), 0);
}

/* Whether arrow-js knows every type of the field's tree. */
static bool js_supported(const struct ArrowSchema* s) {
  struct adr_format fmt;
  parse(s, &fmt);
  switch (fmt.type) {
    case ADR_TYPE_LIST_VIEW:
    case ADR_TYPE_LARGE_LIST_VIEW:
    case ADR_TYPE_RUN_END_ENCODED:
      return false;
    default:
      break;
  }
  for (int64_t c = 0; c < s->n_children; c++)
    if (!js_supported(s->children[c])) return false;
  return s->dictionary == NULL || js_supported(s->dictionary);
}

static void noop_schema_release(struct ArrowSchema* s) {
  s->release = NULL;
}

static void noop_array_release(struct ArrowArray* a) {
  a->release = NULL;
}

/* Delta DictionaryBatches in a stream file. */
static int count_deltas(const char* path) {
  FILE* f = fopen(path, "rb");
  assert_non_null(f);
  struct bytes b = {0};
  uint8_t chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) bytes_append(&b, chunk, n);
  fclose(f);
  int deltas = 0;
  struct adr_error err;
  for (size_t at = 0, index = 0; at + 8 <= b.len; index++) {
    int64_t meta;
    ASSERT_OK(adr_ipc_decode_prefix(b.data + at, (int64_t)index, &meta, &err), &err);
    if (meta == 0) break;
    struct adr_ipc_decoded m;
    ASSERT_OK(adr_ipc_decode_message(b.data + at + 8, (size_t)meta, (int64_t)index, &m, &err),
              &err);
    deltas += m.type == ADR_IPC_MESSAGE_DICTIONARY_BATCH && m.is_delta;
    at += 8 + (size_t)meta + (size_t)m.body_size;
    adr_ipc_decoded_release(&m);
  }
  bytes_free(&b);
  return deltas;
}

/* ---- adr -> arrow-js ------------------------------------------------------ */

/* adr_ipc_write_stream with dictionary_deltas: three batches whose
 * dictionaries are growing prefixes of one string array (3, 5 and 6
 * values: two deltas), for arrow-js to read. */
static void adr_delta_stream(void) {
  static const char* const words[] = {"a", "bb", NULL, "dddd", "e", "ff"};
  static const int64_t lens[3] = {3, 5, 6};
  struct adr_error err;
  struct ArrowSchema schema, copy;
  test_schema(&schema, "+s", "", 0, 1);
  test_schema(schema.children[0], "i", "d", ARROW_FLAG_NULLABLE, 0);
  ASSERT_OK(adr_schema_alloc_dictionary(schema.children[0], &err), &err);
  test_schema(schema.children[0]->dictionary, "u", NULL, ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray values;
  test_strings(&values, words, 6, 0, false);
  char path[512];
  snprintf(path, sizeof(path), "%s/adr-delta.json", work_dir);
  FILE* jf = fopen(path, "w");
  assert_non_null(jf);
  dump_schema(jf, &schema);
  struct ArrowDeviceArray batches[3];
  for (int i = 0; i < 3; i++) {
    struct ArrowArray a;
    test_node(&a, 1, 1, lens[i], 0, 0);
    struct ArrowArray* d = a.children[0];
    test_node(d, 2, 0, lens[i], 0, 0);
    int32_t* idx = test_buffer(d, 1, (size_t)lens[i] * 4, NULL);
    for (int64_t k = 0; k < lens[i]; k++) idx[k] = (int32_t)(lens[i] - 1 - k);
    ASSERT_OK(adr_array_alloc_dictionary(d, &err), &err);
    *d->dictionary = values;
    d->dictionary->length = lens[i];
    d->dictionary->null_count = -1;
    d->dictionary->release = noop_array_release;
    dump_batch(jf, &schema, &a, i == 0);
    test_export(&a, &batches[i]);
  }
  fputs("]}\n", jf);
  assert_int_equal(fclose(jf), 0);
  ASSERT_OK(adr_schema_copy(&schema, &copy, &err), &err);
  struct ArrowDeviceArrayStream in;
  ASSERT_OK(adr_device_array_stream_from_arrays(&copy, batches, 3, ARROW_DEVICE_CPU, &in, &err),
            &err);
  snprintf(path, sizeof(path), "%s/adr-delta.arrows", work_dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  struct adr_ipc_write_options opts = {.struct_size = sizeof(opts), .dictionary_deltas = true};
  ASSERT_OK(adr_ipc_write_stream(fd, &in, &opts, NULL, &err), &err);
  assert_int_equal(close(fd), 0);
  assert_int_equal(count_deltas(path), 2);
  values.release(&values);
  schema.release(&schema);
}

static void adr_to_js(void** state) {
  (void)state;
  struct adr_error err;
  int n_streams = 0;
  for (size_t t = 0; t < test_case_count; t++) {
    const struct test_case* c = &test_cases[t];
    struct ArrowSchema schema;
    struct ArrowDeviceArray owner;
    bool wrapped;
    ipc_test_build(c, &schema, &owner, &wrapped);
    /* The columns arrow-js knows. */
    struct ArrowSchema* keep_s[64];
    struct ArrowSchema renamed[64];
    char names[64][32];
    int64_t keep[64], n_keep = 0;
    assert_true(schema.n_children <= 64);
    for (int64_t k = 0; k < schema.n_children; k++) {
      if (!js_supported(schema.children[k])) continue;
      /* arrow-js 21 mixes up the types of top-level fields of the same name
       * (the "strings" case has four "str"): such columns get their index
       * appended (a shallow copy; the encoder only reads it). */
      renamed[n_keep] = *schema.children[k];
      const char* nm = renamed[n_keep].name ? renamed[n_keep].name : "";
      for (int64_t o = 0; o < schema.n_children; o++) {
        const char* other = schema.children[o]->name ? schema.children[o]->name : "";
        if (o != k && strcmp(nm, other) == 0) {
          snprintf(names[n_keep], sizeof(names[n_keep]), "%.20s_%d", nm, (int)k);
          renamed[n_keep].name = names[n_keep];
          break;
        }
      }
      keep_s[n_keep] = &renamed[n_keep];
      keep[n_keep++] = k;
    }
    if (n_keep == 0) {
      owner.array.release(&owner.array);
      schema.release(&schema);
      continue;
    }
    struct ArrowSchema sub = schema;
    sub.children = keep_s;
    sub.n_children = n_keep;
    sub.release = noop_schema_release;

    char path[512];
    snprintf(path, sizeof(path), "%s/adr-%s.json", work_dir, c->name);
    FILE* jf = fopen(path, "w");
    assert_non_null(jf);
    dump_schema(jf, &sub);

    struct bytes b = {0};
    struct adr_ipc_message m;
    ASSERT_OK(adr_ipc_encode_schema(&sub, &m, &err), &err);
    ipc_test_append_message(&b, &m);
    adr_ipc_message_release(&m);
    int64_t nd = 0;
    ASSERT_OK(adr_ipc_schema_dictionary_count(&sub, &nd, &err), &err);
    int64_t len = owner.array.length;
    int64_t cuts[2][2] = {{0, 0}, {1, 1}};
    int n_batches = len >= 3 ? 2 : 1;
    struct ArrowDeviceArray views[2], batches[2];
    struct ArrowArray* kids[2][64];
    for (int bi = 0; bi < n_batches; bi++) {
      ipc_test_view(&owner, wrapped, cuts[bi][0], cuts[bi][1], &views[bi]);
      for (int64_t k = 0; k < n_keep; k++) kids[bi][k] = views[bi].array.children[keep[k]];
      batches[bi] = views[bi];
      batches[bi].array.children = kids[bi];
      batches[bi].array.n_children = n_keep;
      batches[bi].array.release = noop_array_release; /* views[bi] owns the view */
    }
    /* Message level: every dictionary before every batch. */
    for (int bi = 0; bi < n_batches; bi++) {
      for (int64_t k = 0; k < nd; k++) {
        ASSERT_OK(adr_ipc_encode_dictionary_batch(&sub, &batches[bi], k, &m, &err), &err);
        ipc_test_append_message(&b, &m);
        adr_ipc_message_release(&m);
      }
      ASSERT_OK(adr_ipc_encode_record_batch(&sub, &batches[bi], &m, &err), &err);
      ipc_test_append_message(&b, &m);
      adr_ipc_message_release(&m);
      dump_batch(jf, &sub, &batches[bi].array, bi == 0);
    }
    uint8_t eos[ADR_IPC_PREFIX_SIZE];
    adr_ipc_end_of_stream(eos);
    bytes_append(&b, eos, sizeof(eos));
    fputs("]}\n", jf);
    assert_int_equal(fclose(jf), 0);
    snprintf(path, sizeof(path), "%s/adr-%s.arrows", work_dir, c->name);
    write_file(path, &b);
    bytes_free(&b);
    /* Stream level (adr_ipc_write_stream): the batches share their
     * dictionaries, which are sent once; the same expected values. */
    struct ArrowSchema sub_copy;
    ASSERT_OK(adr_schema_copy(&sub, &sub_copy, &err), &err);
    struct ArrowDeviceArrayStream st_in;
    ASSERT_OK(adr_device_array_stream_from_arrays(&sub_copy, batches, (size_t)n_batches,
                                                  ARROW_DEVICE_CPU, &st_in, &err),
              &err);
    snprintf(path, sizeof(path), "%s/adr-stream-%s.arrows", work_dir, c->name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    struct adr_ipc_stream_stats stats = {.struct_size = sizeof(stats)};
    ASSERT_OK(adr_ipc_write_stream(fd, &st_in, NULL, &stats, &err), &err);
    assert_int_equal(stats.messages, 1 + nd + n_batches);
    assert_int_equal(close(fd), 0);
    char from[512];
    snprintf(from, sizeof(from), "%s/adr-%s.json", work_dir, c->name);
    snprintf(path, sizeof(path), "%s/adr-stream-%s.json", work_dir, c->name);
    assert_int_equal(link(from, path), 0);
    for (int bi = 0; bi < n_batches; bi++) views[bi].array.release(&views[bi].array);
    owner.array.release(&owner.array);
    schema.release(&schema);
    n_streams++;
  }
  adr_delta_stream();
  print_message("adr wrote %d streams and one with delta dictionaries\n", n_streams);
  char args[600];
  snprintf(args, sizeof(args), "read '%s'", work_dir);
  assert_int_equal(run_node(args), 0);
}

/* ---- arrow-js -> adr ------------------------------------------------------ */

static void read_and_dump(const char* in, const char* out) {
  struct adr_error err;
  int fd = open(in, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  struct ArrowDeviceArrayStream s;
  ASSERT_OK(adr_ipc_read_stream(fd, NULL, &s, &err), &err);
  struct ArrowSchema schema;
  ASSERT_OK(adr_device_array_stream_get_schema(&s, &schema, &err), &err);
  FILE* f = fopen(out, "w");
  assert_non_null(f);
  dump_schema(f, &schema);
  for (int k = 0;; k++) {
    struct ArrowDeviceArray batch;
    int st = adr_device_array_stream_next(&s, &batch, &err);
    if (st) fail_msg("%s: %s", in, err.message);
    if (batch.array.release == NULL) break;
    dump_batch(f, &schema, &batch.array, k == 0);
    adr_device_array_release(&batch);
  }
  fputs("]}\n", f);
  assert_int_equal(fclose(f), 0);
  schema.release(&schema);
  s.release(&s);
  close(fd);
}

static void js_to_adr(void** state) {
  (void)state;
  char args[600];
  snprintf(args, sizeof(args), "write '%s'", work_dir);
  assert_int_equal(run_node(args), 0);
  /* check.mjs lists what it wrote, one name a line. */
  char path[512];
  snprintf(path, sizeof(path), "%s/js-list.txt", work_dir);
  FILE* list = fopen(path, "r");
  assert_non_null(list);
  char name[128];
  int n = 0;
  while (fscanf(list, "%127s", name) == 1) {
    char in[512], out[512];
    snprintf(in, sizeof(in), "%s/%s.arrows", work_dir, name);
    snprintf(out, sizeof(out), "%s/%s.adr.json", work_dir, name);
    read_and_dump(in, out);
    n++;
  }
  fclose(list);
  assert_true(n > 0);
  print_message("adr read %d arrow-js streams\n", n);
  snprintf(args, sizeof(args), "compare '%s'", work_dir);
  assert_int_equal(run_node(args), 0);

  /* js-delta (compared above) really holds delta dictionary batches. */
  snprintf(path, sizeof(path), "%s/js-delta.arrows", work_dir);
  assert_int_equal(count_deltas(path), 2);
}

static void remove_work_dir(void) {
  if (getenv("ADR_IPC_INTEROP_KEEP") != NULL) {
    fprintf(stderr, "interop: files kept in %s\n", work_dir);
    return;
  }
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work_dir);
  if (system(cmd) != 0) fprintf(stderr, "interop: could not remove %s\n", work_dir);
}

int main(void) {
  interop_dir = getenv("ADR_IPC_INTEROP_DIR");
  node_bin = getenv("ADR_NODE") ? getenv("ADR_NODE") : "node";
  if (interop_dir == NULL) {
    printf("skip: ADR_IPC_INTEROP_DIR is not set\n");
    return 77;
  }
  char probe[1024];
  snprintf(probe, sizeof(probe), "'%s' -e 'process.exit(0)' >/dev/null 2>&1", node_bin);
  if (system(probe) != 0) {
    printf("skip: Node.js (%s) is not installed (scripts/deps.sh installs it)\n", node_bin);
    return 77;
  }
  snprintf(probe, sizeof(probe), "%s/node_modules/apache-arrow/package.json", interop_dir);
  struct stat st;
  if (stat(probe, &st) != 0) {
    printf(
        "skip: apache-arrow is not installed in %s/node_modules (scripts/deps.sh runs npm ci "
        "there)\n",
        interop_dir);
    return 77;
  }
  const char* tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(work_dir, sizeof(work_dir), "%s/adr-interop-XXXXXX", tmp);
  if (mkdtemp(work_dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(adr_to_js),
      cmocka_unit_test(js_to_adr),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  remove_work_dir();
  return rc;
}
