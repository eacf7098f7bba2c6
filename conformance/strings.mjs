// strings.mjs: reads walkstage output of a graph with string ids with
// DuckDB and hyparquet, for strings_test.go. Usage: node strings.mjs SPEC.json
//
// SPEC holds checks ({name, kind, glob, files}). Each reader returns every
// row as an array of strings (walks: walk_id, start, then the walk; times:
// walk_id, the walk, "|", then the times column (temporal walks); visits:
// query_id, then the candidates' vertices; samples: instance_id, hop, seed,
// src, dst) and DuckDB the SQL type of the id column, or the error it failed with.
import { readFileSync } from 'node:fs'
import { DuckDBInstance } from '@duckdb/node-api'
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const db = await DuckDBInstance.create(':memory:')
const conn = await db.connect()
const list = v => Array.isArray(v) ? v : v.items // a DuckDB LIST, as getRowsJS gives it
const sqlString = s => `'${s.replaceAll("'", "''")}'`

const kinds = {
  walks: {
    sql: `SELECT walk_id::VARCHAR, start, walk, typeof(walk) FROM`,
    duck: r => [r[0], r[1], ...list(r[2])],
    hyp: r => [String(r.walk_id), r.start, ...r.walk],
  },
  times: {
    sql: `SELECT walk_id::VARCHAR, list_transform(walk, x -> x::VARCHAR), list_transform(times, x -> x::VARCHAR), typeof(times) FROM`,
    duck: r => [r[0], ...list(r[1]), '|', ...list(r[2])],
    hyp: r => [String(r.walk_id), ...r.walk.map(String), '|', ...r.times.map(String)],
  },
  visits: {
    sql: `SELECT query_id, list_transform(candidates, lambda c: c.vertex), typeof(list_transform(candidates, lambda c: c.vertex)) FROM`,
    duck: r => [r[0], ...list(r[1])],
    hyp: r => [r.query_id, ...r.candidates.map(c => c.vertex)],
  },
  samples: {
    sql: `SELECT instance_id::VARCHAR, hop::VARCHAR, seed, src, dst, typeof(src) FROM`,
    duck: r => r.slice(0, 5),
    hyp: r => [String(r.instance_id), String(r.hop), r.seed, r.src, r.dst],
  },
}

async function duckdb(c) {
  const k = kinds[c.kind]
  try {
    const rows = (await conn.runAndReadAll(`${k.sql} read_parquet(${sqlString(c.glob)}, hive_partitioning=true)`)).getRowsJS()
    return { ok: true, type: rows.length ? String(rows[0][rows[0].length - 1]) : '', rows: rows.map(k.duck) }
  } catch (e) {
    return { ok: false, error: String(e.message ?? e) }
  }
}

async function hyparquet(c) {
  const k = kinds[c.kind]
  try {
    const rows = []
    for (const f of c.files) {
      const file = await asyncBufferFromFile(f)
      for (const r of await parquetReadObjects({ file, compressors })) rows.push(k.hyp(r))
    }
    return { ok: true, rows }
  } catch (e) {
    return { ok: false, error: String(e.message ?? e) }
  }
}

const out = []
for (const c of spec.checks) out.push({ name: c.name, duckdb: await duckdb(c), hyparquet: await hyparquet(c) })
process.stdout.write(JSON.stringify(out))
