// iceberg.mjs TABLE_URL: reads an Iceberg table with icebird (the
// JavaScript Iceberg reader, over hyparquet) and prints one JSON line:
// {"rows": N, "sum_length": S, "walk_ids": [first few]}. The table's files
// are local (walkstage's file catalog records plain paths, the output
// file:// URLs): icebird
// reads through fetch, so this script answers fetch for file:// URLs from
// the disk, with Range and HEAD as an HTTP server would.
import { open, readFile, stat } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { icebergRead } from 'icebird'

const httpFetch = globalThis.fetch
globalThis.fetch = async (url, init = {}) => {
  const u = typeof url === 'string' ? url : url.url
  // The file catalog records its own files by plain absolute path.
  if (!u.startsWith('file://') && !u.startsWith('/')) return httpFetch(url, init)
  const path = u.startsWith('/') ? u : fileURLToPath(u)
  let size
  try {
    size = (await stat(path)).size
  } catch {
    return new Response(null, { status: 404 })
  }
  if ((init.method || 'GET') === 'HEAD') {
    return new Response(null, { status: 200, headers: { 'Content-Length': String(size) } })
  }
  const range = new Headers(init.headers).get('Range')
  if (!range) return new Response(await readFile(path), { status: 200 })
  const m = /^bytes=(\d+)-(\d*)$/.exec(range)
  const start = Number(m[1])
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1)
  const fh = await open(path)
  try {
    const buf = Buffer.alloc(end - start + 1)
    await fh.read(buf, 0, buf.length, start)
    return new Response(buf, { status: 206, headers: { 'Content-Length': String(buf.length) } })
  } finally {
    await fh.close()
  }
}

const rows = await icebergRead({ tableUrl: process.argv[2] })
let sum = 0n
for (const r of rows) sum += BigInt(r.length)
console.log(JSON.stringify({ rows: rows.length, sum_length: sum.toString(), walk_ids: rows.slice(0, 3).map(r => String(r.walk_id)) }))
