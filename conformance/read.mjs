// read.mjs: reads walkstage output with readers other than walkstage's own,
// for conformance_test.go. Usage: node read.mjs SPEC.json > RESULTS.json
//
// SPEC holds checks ({name, kind, glob, files, sample}) and queries
// ({name, sql}). Every check is read twice: by DuckDB through `glob`, the
// reader query docs/reference/messages.md gives for its kind (hive partitioning on),
// and by hyparquet through `files`, the parts its manifest lists. Each
// reader reports the rows, totals over every row (64-bit sums as decimal
// strings) and the first `sample` rows, or the error it failed with; the
// Go test compares them with the manifests and the graph. A query is run
// by DuckDB and reports its row count or its error.
import { readFileSync } from 'node:fs'
import { DuckDBInstance } from '@duckdb/node-api'
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const db = await DuckDBInstance.create(':memory:')
const conn = await db.connect()

const sqlString = s => `'${s.replaceAll("'", "''")}'`

// Per kind: DuckDB's totals and sample, and the same computed over
// hyparquet's rows. Totals: rows, then sums whose meaning is the kind's.
const kinds = {
  walks: {
    totals: `count(*)::BIGINT, sum(length)::BIGINT, sum(len(walk))::BIGINT, sum(list_sum(walk))::HUGEINT`,
    sample: `walk_id, walk`, order: `walk_id`,
    fold: (t, r) => { t[1] += BigInt(r.length); t[2] += BigInt(r.walk.length); for (const v of r.walk) t[3] += v },
    row: r => [r.walk_id, r.walk],
  },
  visits: {
    totals: `count(*)::BIGINT, sum(steps)::BIGINT, sum(len(candidates))::BIGINT, sum(list_sum(list_transform(candidates, lambda c: c.vertex)))::HUGEINT`,
    sample: `query_id, list_transform(candidates, lambda c: c.vertex)`, order: `query_id`,
    fold: (t, r) => { t[1] += BigInt(r.steps); t[2] += BigInt(r.candidates.length); for (const c of r.candidates) t[3] += c.vertex },
    row: r => [r.query_id, r.candidates.map(c => c.vertex)],
  },
  samples: {
    totals: `count(*)::BIGINT, count(DISTINCT instance_id)::BIGINT, sum(hop)::BIGINT, (sum(src)::HUGEINT + sum(dst)::HUGEINT)`,
    sample: `src, dst`, order: `instance_id, hop, src, dst`,
    fold: (t, r) => { t[2] += BigInt(r.hop); t[3] += r.src + r.dst },
    row: r => [r.src, r.dst],
  },
}

// plain turns BigInts (and DuckDB's values) into JSON: integers as decimal
// strings, so nothing is rounded on the way to Go.
function plain(v) {
  if (typeof v === 'bigint') return v.toString()
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : v
  if (Array.isArray(v)) return v.map(plain)
  if (v && typeof v === 'object' && 'items' in v) return plain(v.items) // DuckDB LIST value
  return v
}

async function duckdb(c) {
  const k = kinds[c.kind]
  const from = `read_parquet(${sqlString(c.glob)}, hive_partitioning=true)`
  try {
    const totals = (await conn.runAndReadAll(`SELECT ${k.totals} FROM ${from}`)).getRowsJS()[0]
    const sample = (await conn.runAndReadAll(`SELECT ${k.sample} FROM ${from} ORDER BY ${k.order} LIMIT ${c.sample}`)).getRowsJS()
    return { ok: true, totals: totals.map(plain), sample: sample.map(plain) }
  } catch (e) {
    return { ok: false, error: String(e.message ?? e) }
  }
}

async function hyparquet(c) {
  const k = kinds[c.kind]
  try {
    const t = [0n, 0n, 0n, 0n]
    const ids = new Set()
    const rows = []
    for (const f of c.files) {
      const file = await asyncBufferFromFile(f)
      for (const r of await parquetReadObjects({ file, compressors })) {
        t[0]++
        k.fold(t, r)
        if (c.kind === 'samples') ids.add(r.instance_id)
        if (rows.length < c.sample) rows.push(k.row(r))
      }
    }
    if (c.kind === 'samples') t[1] = BigInt(ids.size)
    return { ok: true, totals: t.map(plain), sample: rows.map(plain) }
  } catch (e) {
    return { ok: false, error: String(e.message ?? e) }
  }
}

const out = { checks: [], queries: [] }
for (const c of spec.checks ?? []) {
  out.checks.push({ name: c.name, duckdb: await duckdb(c), hyparquet: await hyparquet(c) })
}
for (const q of spec.queries ?? []) {
  try {
    const rows = (await conn.runAndReadAll(q.sql)).getRowsJS()
    out.queries.push({ name: q.name, ok: true, rows: rows.length })
  } catch (e) {
    out.queries.push({ name: q.name, ok: false, error: String(e.message ?? e) })
  }
}
process.stdout.write(JSON.stringify(out))
