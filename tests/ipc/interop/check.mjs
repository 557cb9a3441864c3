// SPDX-License-Identifier: Apache-2.0
//
// The Apache Arrow JavaScript side of tests/ipc/test_interop.c.
//
//   node check.mjs read DIR     read every DIR/adr-*.arrows with arrow-js and
//                               compare with DIR/adr-*.json (adr's dump of
//                               the batches it wrote)
//   node check.mjs write DIR    write arrow-js streams DIR/js-*.arrows, their
//                               dumps DIR/js-*.json and the list DIR/js-list.txt
//   node check.mjs compare DIR  compare DIR/js-*.json with adr's dumps of the
//                               same streams, DIR/js-*.adr.json
//
// The dump format is described in test_interop.c.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  tableFromIPC, tableToIPC, makeData, makeVector, vectorFromArray, Table, Field, Schema,
  Type, Null, Bool, Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Float16,
  Float32, Float64, Decimal, Utf8, LargeUtf8, Binary, LargeBinary, FixedSizeBinary,
  Utf8View, BinaryView, DateDay, DateMillisecond, TimeSecond, TimeMillisecond, TimeMicrosecond,
  TimeNanosecond, Timestamp, TimeUnit, Duration, Interval, IntervalUnit, List, LargeList,
  FixedSizeList, Struct, Map_, Dictionary, DenseUnion, SparseUnion, Vector,
} from 'apache-arrow';

// ---- dump -------------------------------------------------------------------

const UNIT = ['s', 'm', 'u', 'n'];

function format(t) {
  switch (t.typeId) {
    case Type.Null: return 'n';
    case Type.Bool: return 'b';
    case Type.Int: {
      const c = { 8: 'c', 16: 's', 32: 'i', 64: 'l' }[t.bitWidth];
      return t.isSigned ? c : c.toUpperCase();
    }
    case Type.Float: return ['e', 'f', 'g'][t.precision];
    case Type.Decimal: return `d:${t.precision},${t.scale},${t.bitWidth}`;
    case Type.Utf8: return 'u';
    case Type.LargeUtf8: return 'U';
    case Type.Binary: return 'z';
    case Type.LargeBinary: return 'Z';
    case Type.Utf8View: return 'vu';
    case Type.BinaryView: return 'vz';
    case Type.FixedSizeBinary: return `w:${t.byteWidth}`;
    case Type.Date: return t.unit === 0 ? 'tdD' : 'tdm';
    case Type.Time: return 'tt' + UNIT[t.unit];
    case Type.Timestamp: return `ts${UNIT[t.unit]}:${t.timezone ?? ''}`;
    case Type.Duration: return 'tD' + UNIT[t.unit];
    case Type.Interval: return ['tiM', 'tiD', 'tin'][t.unit];
    case Type.List: return '+l';
    case Type.LargeList: return '+L';
    case Type.FixedSizeList: return `+w:${t.listSize}`;
    case Type.Struct: return '+s';
    case Type.Map: return '+m';
    case Type.Union: return (t.mode === 1 ? '+ud:' : '+us:') + Array.from(t.typeIds).join(',');
    case Type.Dictionary: return format(t.indices);
    default: throw new Error(`no format for ${t}`);
  }
}

function dumpType(t, out) {
  if (t.typeId === Type.Map) out.keysSorted = !!t.keysSorted;
  if (t.typeId === Type.Dictionary) {
    out.ordered = !!t.isOrdered;
    out.dictionary = dumpType(t.dictionary, { format: format(t.dictionary) });
    out.children = [];
  } else {
    out.children = (t.children ?? []).map(dumpField);
  }
  return out;
}

function dumpField(f) {
  return dumpType(f.type, { format: format(f.type), name: f.name, nullable: !!f.nullable });
}

function byteWidth(t) {
  switch (t.typeId) {
    case Type.Int: case Type.Time: case Type.Decimal: return t.bitWidth / 8;
    case Type.Float: return [2, 4, 8][t.precision];
    case Type.Date: return t.unit === 0 ? 4 : 8;
    case Type.Timestamp: case Type.Duration: return 8;
    case Type.Interval: return [4, 8, 16][t.unit];
    case Type.FixedSizeBinary: return t.byteWidth;
    default: return 0;
  }
}

const hex = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('hex');

function vectorValue(vector, i) {
  for (const d of vector.data) {
    if (i < d.length) return value(d, i);
    i -= d.length;
  }
  throw new Error('dictionary index out of range');
}

function range(child, from, to) {
  const out = [];
  for (let k = from; k < to; k++) out.push(value(child, k));
  return out;
}

// Value i of a Data (arrow-js slices its value buffers, not its bitmaps).
function value(data, i) {
  const t = data.type;
  if (t.typeId === Type.Null) return null;
  if (t.typeId === Type.Union) {
    const id = data.typeIds[i];
    const c = t.typeIdToChildIndex[id];
    const at = t.mode === 1 ? data.valueOffsets[i] : i;
    return [id, value(data.children[c], at)];
  }
  if (!data.getValid(i)) return null;
  switch (t.typeId) {
    case Type.Dictionary: return vectorValue(data.dictionary, Number(data.values[i]));
    case Type.Bool: {
      const j = data.offset + i;
      return ((data.values[j >> 3] >> (j & 7)) & 1) === 1;
    }
    case Type.Utf8: case Type.LargeUtf8: case Type.Binary: case Type.LargeBinary: {
      const lo = Number(data.valueOffsets[i]);
      const hi = Number(data.valueOffsets[i + 1]);
      return hex(data.values.subarray(lo, hi));
    }
    case Type.Utf8View: case Type.BinaryView: {
      const v = makeVector(data).get(i);
      return hex(typeof v === 'string' ? new TextEncoder().encode(v) : v);
    }
    case Type.List: case Type.LargeList: case Type.Map:
      return range(data.children[0], Number(data.valueOffsets[i]), Number(data.valueOffsets[i + 1]));
    case Type.FixedSizeList:
      return range(data.children[0], i * t.listSize, (i + 1) * t.listSize);
    case Type.Struct: return data.children.map((c) => value(c, i));
    default: {
      const w = byteWidth(t);
      if (!w) throw new Error(`no value dump for ${t}`);
      const v = data.values;
      return hex(new Uint8Array(v.buffer, v.byteOffset + i * w, w));
    }
  }
}

function dumpTable(table) {
  const fields = table.schema.fields.map(dumpField);
  const batches = table.batches.map((b) => ({
    length: b.numRows,
    columns: b.data.children.map((c) => range(c, 0, b.numRows)),
  }));
  return { fields, batches };
}

// ---- compare ----------------------------------------------------------------

function diff(want, got, path, out) {
  if (out.length >= 10) return;
  if (Array.isArray(want) || Array.isArray(got)) {
    if (!Array.isArray(want) || !Array.isArray(got) || want.length !== got.length) {
      out.push(`${path}: expected ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
      return;
    }
    want.forEach((w, k) => diff(w, got[k], `${path}[${k}]`, out));
    return;
  }
  if (want !== null && typeof want === 'object' && got !== null && typeof got === 'object') {
    const keys = new Set([...Object.keys(want), ...Object.keys(got)]);
    for (const k of keys) diff(want[k], got[k], `${path}.${k}`, out);
    return;
  }
  if (want !== got) out.push(`${path}: expected ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
}

function check(name, want, got) {
  const out = [];
  diff(want, got, name, out);
  for (const line of out) console.log(`MISMATCH ${line}`);
  return out.length === 0;
}

// ---- arrow-js tables --------------------------------------------------------

// Deterministic values with nulls at every 4th row (phase 1).
const N = 11;
const rows = (f) => Array.from({ length: N }, (_, k) => (k % 4 === 1 ? null : f(k)));
const vec = (type, f) => vectorFromArray(rows(f), type);
const big = (k) => BigInt(k) * 1000000007n - 3000000000n;

function primitives() {
  return {
    b: vec(new Bool(), (k) => k % 3 === 0),
    i8: vec(new Int8(), (k) => k * 23 - 120),
    i16: vec(new Int16(), (k) => k * 3001 - 30000),
    i32: vec(new Int32(), (k) => k * 400000001 - 2000000000),
    i64: vec(new Int64(), big),
    u8: vec(new Uint8(), (k) => k * 23),
    u16: vec(new Uint16(), (k) => k * 6000),
    u32: vec(new Uint32(), (k) => k * 400000001),
    u64: vec(new Uint64(), (k) => BigInt(k) * 1844674407370955161n),
    f16: vec(new Float16(), (k) => k * 0.5 - 2),
    f32: vec(new Float32(), (k) => k * 1.25 - 3.5),
    f64: vec(new Float64(), (k) => k / 3 - 1e10),
  };
}

function temporal() {
  return {
    date_day: vec(new DateDay(), (k) => new Date(Date.UTC(1970 + k * 7, k, 1 + k))),
    date_ms: vec(new DateMillisecond(), (k) => new Date(Date.UTC(1960 + k * 9, k, 3, k))),
    time_s: vec(new TimeSecond(), (k) => k * 3000),
    time_ms: vec(new TimeMillisecond(), (k) => k * 3000001),
    time_us: vec(new TimeMicrosecond(), (k) => BigInt(k) * 7000000001n),
    time_ns: vec(new TimeNanosecond(), (k) => BigInt(k) * 7000000000001n),
    ts_s: vec(new Timestamp(TimeUnit.SECOND), (k) => k * 100000000 - 500000000),
    ts_ms_utc: vec(new Timestamp(TimeUnit.MILLISECOND, 'UTC'), (k) => k * 100000000000 - 1),
    ts_us_paris: vec(new Timestamp(TimeUnit.MICROSECOND, 'Europe/Paris'), (k) => k * 1e15),
    ts_ns: vec(new Timestamp(TimeUnit.NANOSECOND), (k) => k * 1e17),
    dur_s: vec(new Duration(TimeUnit.SECOND), (k) => BigInt(k) * 86400n - 7n),
    dur_ms: vec(new Duration(TimeUnit.MILLISECOND), (k) => BigInt(k) * 1000n),
    dur_us: vec(new Duration(TimeUnit.MICROSECOND), (k) => BigInt(-k)),
    dur_ns: vec(new Duration(TimeUnit.NANOSECOND), (k) => big(k)),
    iv_ym: vec(new Interval(IntervalUnit.YEAR_MONTH), (k) => new Int32Array([k * 13 - 50])),
    iv_dt: vec(new Interval(IntervalUnit.DAY_TIME), (k) => new Int32Array([k - 5, k * 1000])),
    iv_mdn: vec(new Interval(IntervalUnit.MONTH_DAY_NANO),
      (k) => new Int32Array([k, -k, k * 1000000001 % 4294967296 | 0, k])),
  };
}

function decimals() {
  // Unscaled values as 32-bit little-endian words.
  const words = (n, k) => {
    const w = new Uint32Array(n);
    for (let j = 0; j < n; j++) w[j] = (k * 2654435761 + j * 40503) >>> 0;
    if (k % 2) w[n - 1] |= 0x80000000; // negative
    return w;
  };
  return {
    dec128: vec(new Decimal(10, 38, 128), (k) => words(4, k)),
    dec256: vec(new Decimal(5, 76, 256), (k) => words(8, k)),
  };
}

const WORDS = ['', 'a', 'été', 'a somewhat longer string, past twelve bytes', '€', 'x'.repeat(40),
  'Zürich', 'tab\there', '0123456789ab', '0123456789abc', 'end'];
const word = (k) => WORDS[k % WORDS.length];
const bytes = (k) => Uint8Array.from({ length: (k * 5) % 17 }, (_, j) => (j * 31 + k) & 255);

function binaries() {
  return {
    utf8: vec(new Utf8(), word),
    large_utf8: vec(new LargeUtf8(), word),
    binary: vec(new Binary(), bytes),
    large_binary: vec(new LargeBinary(), bytes),
    fsb: vec(new FixedSizeBinary(5), (k) => Uint8Array.from([k, k + 1, 255 - k, 7, k * 9])),
  };
}

function views() {
  return {
    utf8_view: vec(new Utf8View(), word),
    binary_view: vec(new BinaryView(), bytes),
  };
}

function nested() {
  const item = (t) => new Field('item', t, true);
  const ints = (k) => Array.from({ length: k % 4 }, (_, j) => (j === 1 ? null : k * 10 + j));
  return {
    list: vec(new List(item(new Int32())), ints),
    large_list: vec(new LargeList(item(new Utf8())), (k) => ints(k).map((v) => (v === null ? null : word(v)))),
    fsl: vec(new FixedSizeList(3, item(new Int16())), (k) => [k, null, -k]),
    struct: vec(new Struct([new Field('x', new Float64(), true), new Field('s', new Utf8(), true),
      new Field('l', new List(item(new Int64())), true)]),
    (k) => ({ x: k * 1.5, s: k % 3 ? word(k) : null, l: [BigInt(k), BigInt(-k)] })),
    map: vec(new Map_(new Field('entries', new Struct([new Field('key', new Utf8(), false),
      new Field('value', new Int32(), true)]), false)),
    (k) => new Map(Array.from({ length: k % 3 }, (_, j) => [`k${k}-${j}`, j === 1 ? null : k * j]))),
    list_of_struct: vec(new List(item(new Struct([new Field('a', new Bool(), true),
      new Field('b', new Utf8(), true)]))),
    (k) => Array.from({ length: k % 3 }, (_, j) => ({ a: j % 2 === 0, b: word(k + j) }))),
  };
}

function unions() {
  // Built from children and type ids directly (ids 3 and 7, not 0..n-1).
  const n = N;
  const ids = Int8Array.from({ length: n }, (_, k) => (k % 3 === 0 ? 7 : 3));
  const i32 = makeData({ type: new Int32(), length: n, nullCount: 0, data: Int32Array.from({ length: n }, (_, k) => k * 11) });
  const strs = vectorFromArray(Array.from({ length: n }, (_, k) => (k % 5 === 0 ? null : word(k))), new Utf8()).data[0];
  const sparseType = new SparseUnion([3, 7], [new Field('i', new Int32(), true), new Field('s', new Utf8(), true)]);
  const sparse = makeData({ type: sparseType, length: n, nullCount: 0, typeIds: ids, children: [i32, strs] });
  // Dense: child offsets count up per type.
  const off = new Int32Array(n);
  const cnt = { 3: 0, 7: 0 };
  ids.forEach((id, k) => { off[k] = cnt[id]++; });
  const di = makeData({ type: new Int32(), length: cnt[3], nullCount: 0, data: Int32Array.from({ length: cnt[3] }, (_, k) => -k) });
  const ds = vectorFromArray(Array.from({ length: cnt[7] }, (_, k) => (k === 1 ? null : word(k + 3))), new Utf8()).data[0];
  const denseType = new DenseUnion([3, 7], [new Field('i', new Int32(), true), new Field('s', new Utf8(), true)]);
  const dense = makeData({ type: denseType, length: n, nullCount: 0, typeIds: ids, valueOffsets: off, children: [di, ds] });
  return { sparse: makeVector(sparse), dense: makeVector(dense) };
}

function dictionaries(seed) {
  const dict = (values, indexType, valueType) => {
    const dv = vectorFromArray(values, valueType);
    const idx = Array.from({ length: N }, (_, k) => (k % 4 === 1 ? 0 : (k * 7 + seed) % values.length));
    const valid = new Uint8Array(Math.ceil(N / 8));
    for (let k = 0; k < N; k++) if (k % 4 !== 1) valid[k >> 3] |= 1 << (k & 7);
    const type = new Dictionary(valueType, indexType, null, false);
    return makeVector(makeData({ type, length: N, nullBitmap: valid, data: indexType.ArrayType.from(idx), dictionary: dv }));
  };
  return {
    d_utf8: dict(['red', 'green', 'blue', `seed-${seed}`], new Int32(), new Utf8()),
    d_i64: dict([5n, -7n, BigInt(seed)], new Int8(), new Int64()),
    d_u16: dict(['x', 'yy', 'zzz'], new Uint16(), new LargeUtf8()),
  };
}

// Two batches over one dictionary (the same arrow-js Data): arrow-js sends
// it once, and adr must keep using it for the second batch.
function sharedDictionary() {
  const dv = vectorFromArray(['one', 'two', 'three', null, 'five'], new Utf8());
  const type = new Dictionary(new Utf8(), new Int16(), null, false);
  const batch = (seed) => ({
    d: makeVector(makeData({ type, length: N, data: Int16Array.from({ length: N }, (_, k) => (k * 3 + seed) % 5), dictionary: dv })),
  });
  return [batch(0), batch(1)];
}

// Sliced columns: arrow-js writes what a slice holds.
function sliced() {
  const t = new Table({ ...primitives(), ...binaries(), ...nested() });
  return t.slice(3, 9);
}

function nulls() {
  return { nothing: makeVector(makeData({ type: new Null(), length: N })), i: vec(new Int32(), (k) => k) };
}

// name -> list of batches (column objects); several batches exercise
// dictionary replacement and messages after the first.
const TABLES = {
  primitives: () => [primitives(), primitives()],
  temporal: () => [temporal()],
  decimals: () => [decimals()],
  binaries: () => [binaries(), binaries()],
  views: () => [views()],
  nested: () => [nested()],
  unions: () => [unions()],
  dictionaries: () => [dictionaries(1), dictionaries(2)],
  nulls: () => [nulls()],
  empty: () => [{ i: vectorFromArray([], new Int32()), s: vectorFromArray([], new Utf8()) }],
  dictionary_shared: sharedDictionary,
  sliced,
};

function build(name) {
  const made = TABLES[name]();
  if (made instanceof Table) return made;
  const tables = made.map((cols) => new Table(cols));
  return tables.slice(1).reduce((t, u) => t.concat(u), tables[0]);
}

// ---- modes ------------------------------------------------------------------

const [mode, dir] = process.argv.slice(2);
let ok = true;
if (mode === 'read') {
  const files = readdirSync(dir).filter((f) => f.startsWith('adr-') && f.endsWith('.arrows'));
  for (const f of files) {
    const name = f.slice(0, -'.arrows'.length);
    let got;
    try {
      got = dumpTable(tableFromIPC(readFileSync(join(dir, f))));
    } catch (e) {
      console.log(`MISMATCH ${name}: arrow-js cannot read it: ${e.stack}`);
      ok = false;
      continue;
    }
    const want = JSON.parse(readFileSync(join(dir, name + '.json'), 'utf8'));
    if (check(name, want, got)) console.log(`ok ${name}: ${got.batches.length} batches`);
    else ok = false;
  }
  console.log(`arrow-js read ${files.length} adr streams`);
  if (files.length === 0) ok = false;
} else if (mode === 'write') {
  const names = [];
  for (const name of Object.keys(TABLES)) {
    const table = build(name);
    writeFileSync(join(dir, `js-${name}.arrows`), tableToIPC(table, 'stream'));
    writeFileSync(join(dir, `js-${name}.json`), JSON.stringify(dumpTable(table)));
    // arrow-js reads its own stream back the same (sanity of the dump).
    ok = check(`js-${name} (arrow-js self)`, dumpTable(table),
      dumpTable(tableFromIPC(readFileSync(join(dir, `js-${name}.arrows`))))) && ok;
    names.push(`js-${name}`);
  }
  // Delta dictionary batches: arrow-js sends one when a batch's dictionary
  // is the previous one's chunks plus more (here twice: 2 + 2 + 1 values).
  const c0 = vectorFromArray(['a', 'b'], new Utf8()).data[0];
  const c1 = vectorFromArray(['c', null], new Utf8()).data[0];
  const c2 = vectorFromArray(['e'], new Utf8()).data[0];
  const dt = new Dictionary(new Utf8(), new Int32(), null, false);
  const b1 = makeData({ type: dt, length: 2, data: Int32Array.from([0, 1]), dictionary: new Vector([c0]) });
  const b2 = makeData({ type: dt, length: 3, data: Int32Array.from([2, 3, 0]), dictionary: new Vector([c0, c1]) });
  const b3 = makeData({ type: dt, length: 2, data: Int32Array.from([4, 1]), dictionary: new Vector([c0, c1, c2]) });
  const delta = new Table({ d: makeVector(b1) })
    .concat(new Table({ d: makeVector(b2) }))
    .concat(new Table({ d: makeVector(b3) }));
  writeFileSync(join(dir, 'js-delta.arrows'), tableToIPC(delta, 'stream'));
  writeFileSync(join(dir, 'js-delta.json'), JSON.stringify(dumpTable(delta)));
  names.push('js-delta');
  writeFileSync(join(dir, 'js-list.txt'), names.join('\n') + '\n');
  console.log(`arrow-js wrote ${names.length} streams`);
} else if (mode === 'compare') {
  const names = readFileSync(join(dir, 'js-list.txt'), 'utf8').split('\n').filter(Boolean);
  for (const name of names) {
    const want = JSON.parse(readFileSync(join(dir, name + '.json'), 'utf8'));
    const got = JSON.parse(readFileSync(join(dir, name + '.adr.json'), 'utf8'));
    if (check(name, want, got)) console.log(`ok ${name}: ${got.batches.length} batches`);
    else ok = false;
  }
} else {
  console.error('usage: node check.mjs read|write|compare DIR');
  process.exit(2);
}
process.exit(ok ? 0 : 1);
