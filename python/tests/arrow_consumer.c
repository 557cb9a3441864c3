/* SPDX-License-Identifier: Apache-2.0
 *
 * A small Arrow PyCapsule consumer and producer written in C, for the
 * tests only (loaded with ctypes.PyDLL by test_arrow.py): it checks adr's
 * capsules the way a foreign C library would, independently of adr's own
 * importer, and produces capsules adr must import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/arrow_c_device.h"

/* The project builds with -fvisibility=hidden; ctypes needs these. */
#define EXPORT __attribute__((visibility("default")))
EXPORT int adr_test_consume(PyObject* schema_cap, PyObject* array_cap, int device, char* out,
                            size_t n);
EXPORT int adr_test_consume_children(PyObject* schema_cap, PyObject* array_cap, char* out,
                                     size_t n);
EXPORT PyObject* adr_test_make_struct(int bad);
EXPORT int adr_test_consume_stream(PyObject* cap, int device, char* out, size_t n);
EXPORT PyObject* adr_test_make_stream(int device, int nbatches, int fail_at);

/* Moves the structs out of the capsules (as a consumer does), describes
 * them, releases them, and checks each release marked itself released. */
int adr_test_consume(PyObject* schema_cap, PyObject* array_cap, int device, char* out, size_t n) {
  struct ArrowSchema* s = PyCapsule_GetPointer(schema_cap, "arrow_schema");
  void* a = PyCapsule_GetPointer(array_cap, device ? "arrow_device_array" : "arrow_array");
  if (s == NULL || a == NULL) {
    PyErr_Clear();
    snprintf(out, n, "bad capsule names");
    return -1;
  }
  struct ArrowArray* ap = device ? &((struct ArrowDeviceArray*)a)->array : a;
  if (s->release == NULL || ap->release == NULL) {
    snprintf(out, n, "released structs in the capsules");
    return -1;
  }
  struct ArrowSchema schema = *s;
  s->release = NULL;
  struct ArrowDeviceArray darr;
  memset(&darr, 0, sizeof(darr));
  if (device) {
    darr = *(struct ArrowDeviceArray*)a;
  } else {
    darr.array = *ap;
    darr.device_type = ARROW_DEVICE_CPU;
    darr.device_id = -1;
  }
  ap->release = NULL;
  long long sum = 0;
  if (darr.device_type == ARROW_DEVICE_CPU && strcmp(schema.format, "l") == 0 &&
      darr.array.n_buffers == 2) {
    const int64_t* v = darr.array.buffers[1];
    for (int64_t i = 0; i < darr.array.length; i++) sum += v[darr.array.offset + i];
  }
  snprintf(out, n,
           "format=%s length=%lld null_count=%lld n_buffers=%lld n_children=%lld device=%d:%lld "
           "sync=%s sum=%lld",
           schema.format, (long long)darr.array.length, (long long)darr.array.null_count,
           (long long)darr.array.n_buffers, (long long)darr.array.n_children, (int)darr.device_type,
           (long long)darr.device_id, darr.sync_event != NULL ? "yes" : "no", sum);
  darr.array.release(&darr.array);
  schema.release(&schema);
  if (darr.array.release != NULL || schema.release != NULL) {
    snprintf(out, n, "release did not mark the struct released");
    return -1;
  }
  return 0;
}

/* Moves child 0 out of a (CPU) struct array, releases the parent first and
 * the child afterwards, as the C data interface allows. */
int adr_test_consume_children(PyObject* schema_cap, PyObject* array_cap, char* out, size_t n) {
  struct ArrowSchema* s = PyCapsule_GetPointer(schema_cap, "arrow_schema");
  struct ArrowArray* a = PyCapsule_GetPointer(array_cap, "arrow_array");
  if (s == NULL || a == NULL || a->n_children < 1) {
    PyErr_Clear();
    snprintf(out, n, "not a struct array pair");
    return -1;
  }
  struct ArrowArray parent = *a;
  a->release = NULL;
  struct ArrowArray child = *parent.children[0];
  parent.children[0]->release = NULL;
  parent.release(&parent);
  long long sum = 0;
  if (strcmp(s->children[0]->format, "l") == 0) {
    const int64_t* v = child.buffers[1];
    for (int64_t i = 0; i < child.length; i++) sum += v[child.offset + i];
  }
  snprintf(out, n, "child0 format=%s length=%lld sum=%lld", s->children[0]->format,
           (long long)child.length, sum);
  child.release(&child);
  return child.release == NULL ? 0 : -1;
}

/* ---- producer: struct<a: int64, b: int32>, 3 rows ----------------------- */

static void release_schema(struct ArrowSchema* s) {
  for (int64_t i = 0; i < s->n_children; i++)
    if (s->children[i]->release != NULL) s->children[i]->release(s->children[i]);
  if (s->n_children > 0) {
    free(s->children[0]);
    free(s->children);
  }
  s->release = NULL;
}

static void release_leaf_schema(struct ArrowSchema* s) {
  s->release = NULL;
}

static void release_array(struct ArrowArray* a) {
  for (int64_t i = 0; i < a->n_children; i++)
    if (a->children[i]->release != NULL) a->children[i]->release(a->children[i]);
  for (int64_t i = 0; i < a->n_buffers; i++) free((void*)a->buffers[i]);
  free(a->buffers);
  if (a->n_children > 0) {
    free(a->children[0]);
    free(a->children);
  }
  a->release = NULL;
}

static void leaf(struct ArrowArray* a, int64_t length, size_t width, int64_t first) {
  memset(a, 0, sizeof(*a));
  a->length = length;
  a->n_buffers = 2;
  a->buffers = calloc(2, sizeof(void*));
  void* v = calloc((size_t)(length > 0 ? length : 1), width);
  for (int64_t i = 0; i < length; i++) {
    if (width == 8)
      ((int64_t*)v)[i] = first + i;
    else
      ((int32_t*)v)[i] = (int32_t)(first + i);
  }
  a->buffers[1] = v;
  a->release = release_array;
}

static void capsule_schema_free(PyObject* cap) {
  struct ArrowSchema* s = PyCapsule_GetPointer(cap, "arrow_schema");
  if (s != NULL && s->release != NULL) s->release(s);
  free(s);
}

static void capsule_array_free(PyObject* cap) {
  struct ArrowArray* a = PyCapsule_GetPointer(cap, "arrow_array");
  if (a != NULL && a->release != NULL) a->release(a);
  free(a);
}

/* bad: child b has 2 rows where the struct has 3 (validate must name it). */
PyObject* adr_test_make_struct(int bad) {
  struct ArrowSchema* s = calloc(1, sizeof(*s));
  struct ArrowSchema* kids = calloc(2, sizeof(*kids));
  s->format = "+s";
  s->name = "";
  s->n_children = 2;
  s->children = calloc(2, sizeof(void*));
  s->children[0] = &kids[0];
  s->children[1] = &kids[1];
  s->release = release_schema;
  kids[0].format = "l";
  kids[0].name = "a";
  kids[0].flags = ARROW_FLAG_NULLABLE;
  kids[0].release = release_leaf_schema;
  kids[1].format = "i";
  kids[1].name = "b";
  kids[1].flags = ARROW_FLAG_NULLABLE;
  kids[1].release = release_leaf_schema;

  struct ArrowArray* a = calloc(1, sizeof(*a));
  struct ArrowArray* ak = calloc(2, sizeof(*ak));
  leaf(&ak[0], 3, 8, 10);
  leaf(&ak[1], bad ? 2 : 3, 4, 100);
  a->length = 3;
  a->n_buffers = 1;
  a->buffers = calloc(1, sizeof(void*));
  a->n_children = 2;
  a->children = calloc(2, sizeof(void*));
  a->children[0] = &ak[0];
  a->children[1] = &ak[1];
  a->release = release_array;
  return Py_BuildValue("(NN)", PyCapsule_New(s, "arrow_schema", capsule_schema_free),
                       PyCapsule_New(a, "arrow_array", capsule_array_free));
}

/* ---- streams ------------------------------------------------------------ */

/* Moves the stream out of an "arrow_array_stream" / "arrow_device_array_stream"
 * capsule, reads it to the end as a C consumer does, and describes it:
 * "format=l batches=3 rows=9 device=1 sum=..." (sum of int64 CPU values),
 * or "error N: <get_last_error>" when get_next fails (returns 1). */
int adr_test_consume_stream(PyObject* cap, int device, char* out, size_t n) {
  void* p = PyCapsule_GetPointer(cap, device ? "arrow_device_array_stream" : "arrow_array_stream");
  if (p == NULL) {
    PyErr_Clear();
    snprintf(out, n, "bad capsule name");
    return -1;
  }
  struct ArrowDeviceArrayStream ds;
  struct ArrowArrayStream cs;
  if (device) {
    if (((struct ArrowDeviceArrayStream*)p)->release == NULL) goto released;
    ds = *(struct ArrowDeviceArrayStream*)p;
    ((struct ArrowDeviceArrayStream*)p)->release = NULL;
  } else {
    if (((struct ArrowArrayStream*)p)->release == NULL) goto released;
    cs = *(struct ArrowArrayStream*)p;
    ((struct ArrowArrayStream*)p)->release = NULL;
  }
  struct ArrowSchema schema;
  memset(&schema, 0, sizeof(schema));
  int rc = device ? ds.get_schema(&ds, &schema) : cs.get_schema(&cs, &schema);
  int ret = 0;
  if (rc != 0 || schema.release == NULL) {
    snprintf(out, n, "get_schema failed %d", rc);
    ret = -1;
    goto done;
  }
  long long batches = 0, rows = 0, sum = 0;
  int dev_type = device ? (int)ds.device_type : ARROW_DEVICE_CPU;
  for (;;) {
    struct ArrowDeviceArray d;
    memset(&d, 0, sizeof(d));
    if (device) {
      rc = ds.get_next(&ds, &d);
    } else {
      rc = cs.get_next(&cs, &d.array);
      d.device_type = ARROW_DEVICE_CPU;
    }
    if (rc != 0) {
      const char* m = device ? ds.get_last_error(&ds) : cs.get_last_error(&cs);
      snprintf(out, n, "error %d: %s", rc, m != NULL ? m : "(null)");
      ret = 1;
      goto done_schema;
    }
    if (d.array.release == NULL) break;
    if (d.device_type != dev_type) {
      snprintf(out, n, "array on device type %d in a stream of %d", (int)d.device_type, dev_type);
      d.array.release(&d.array);
      ret = -1;
      goto done_schema;
    }
    batches++;
    rows += d.array.length;
    if (d.device_type == ARROW_DEVICE_CPU && strcmp(schema.format, "l") == 0 &&
        d.array.n_buffers == 2 && d.array.buffers[1] != NULL) {
      const int64_t* v = d.array.buffers[1];
      for (int64_t i = 0; i < d.array.length; i++) sum += v[d.array.offset + i];
    }
    d.array.release(&d.array);
    if (d.array.release != NULL) {
      snprintf(out, n, "array release did not mark it released");
      ret = -1;
      goto done_schema;
    }
  }
  snprintf(out, n, "format=%s batches=%lld rows=%lld device=%d sum=%lld", schema.format, batches,
           rows, dev_type, sum);
done_schema:
  schema.release(&schema);
done:
  if (device) {
    ds.release(&ds);
    if (ds.release != NULL) ret = -1;
  } else {
    cs.release(&cs);
    if (cs.release != NULL) ret = -1;
  }
  return ret;
released:
  snprintf(out, n, "released stream in the capsule");
  return -1;
}

/* A producer: nbatches int64 arrays, batch i holding 3 values 10*i, 10*i+1,
 * 10*i+2; with fail_at >= 0, get_next for batch fail_at fails with EIO and
 * get_last_error "producer failed at batch N". */
struct test_stream {
  int nbatches, fail_at, next;
  char error[128];
};

static int ts_schema(struct test_stream* t, struct ArrowSchema* out) {
  (void)t;
  memset(out, 0, sizeof(*out));
  out->format = "l";
  out->name = "";
  out->flags = ARROW_FLAG_NULLABLE;
  out->release = release_leaf_schema;
  return 0;
}

static int ts_next(struct test_stream* t, struct ArrowArray* out) {
  memset(out, 0, sizeof(*out));
  if (t->next == t->fail_at) {
    snprintf(t->error, sizeof(t->error), "producer failed at batch %d", t->next);
    return 5; /* EIO */
  }
  if (t->next >= t->nbatches) return 0;
  leaf(out, 3, 8, 10 * t->next);
  t->next++;
  return 0;
}

static int cts_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) {
  return ts_schema(s->private_data, out);
}
static int cts_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  return ts_next(s->private_data, out);
}
static const char* cts_error(struct ArrowArrayStream* s) {
  struct test_stream* t = s->private_data;
  return t->error[0] ? t->error : NULL;
}
static void cts_release(struct ArrowArrayStream* s) {
  free(s->private_data);
  s->release = NULL;
}
static int dts_schema(struct ArrowDeviceArrayStream* s, struct ArrowSchema* out) {
  return ts_schema(s->private_data, out);
}
static int dts_next(struct ArrowDeviceArrayStream* s, struct ArrowDeviceArray* out) {
  memset(out, 0, sizeof(*out));
  out->device_type = ARROW_DEVICE_CPU;
  out->device_id = -1;
  return ts_next(s->private_data, &out->array);
}
static const char* dts_error(struct ArrowDeviceArrayStream* s) {
  struct test_stream* t = s->private_data;
  return t->error[0] ? t->error : NULL;
}
static void dts_release(struct ArrowDeviceArrayStream* s) {
  free(s->private_data);
  s->release = NULL;
}

static void capsule_cstream_free(PyObject* cap) {
  struct ArrowArrayStream* s = PyCapsule_GetPointer(cap, "arrow_array_stream");
  if (s != NULL && s->release != NULL) s->release(s);
  free(s);
}
static void capsule_dstream_free(PyObject* cap) {
  struct ArrowDeviceArrayStream* s = PyCapsule_GetPointer(cap, "arrow_device_array_stream");
  if (s != NULL && s->release != NULL) s->release(s);
  free(s);
}

PyObject* adr_test_make_stream(int device, int nbatches, int fail_at) {
  struct test_stream* t = calloc(1, sizeof(*t));
  t->nbatches = nbatches;
  t->fail_at = fail_at;
  if (device) {
    struct ArrowDeviceArrayStream* s = calloc(1, sizeof(*s));
    s->device_type = ARROW_DEVICE_CPU;
    s->get_schema = dts_schema;
    s->get_next = dts_next;
    s->get_last_error = dts_error;
    s->release = dts_release;
    s->private_data = t;
    return PyCapsule_New(s, "arrow_device_array_stream", capsule_dstream_free);
  }
  struct ArrowArrayStream* s = calloc(1, sizeof(*s));
  s->get_schema = cts_schema;
  s->get_next = cts_next;
  s->get_last_error = cts_error;
  s->release = cts_release;
  s->private_data = t;
  return PyCapsule_New(s, "arrow_array_stream", capsule_cstream_free);
}
