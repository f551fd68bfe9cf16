import { Readable, Transform, type TransformCallback } from 'node:stream';

/**
 * One `bytes=` Range header (first-last, first-, -suffix) against a size; several ranges or a malformed header: null
 * (serve the whole file).
 */
export function parseRange(header: string, size: number): { start: number; end: number } | 'unsatisfiable' | null {
  const m = /^bytes=\s*(\d*)\s*-\s*(\d*)\s*$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return null;
  }
  if (start >= size || size === 0) return 'unsatisfiable';
  return { start, end };
}

/** Parses `bytes <first>-<last>/<total|*>` (RFC 9110 Content-Range). */
export function parseContentRange(v: string | undefined): { first: number; last: number } | null {
  const m = v ? /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(v.trim()) : null;
  return m ? { first: Number(m[1]), last: Number(m[2]) } : null;
}

/**
 * Cuts the inclusive range [skip, skip + length) out of a stream. Used when a server answers a ranged GET with
 * more than was asked (HTTP lets a server ignore Range and send 200; some S3 emulators mis-handle `bytes=0-0`).
 * Once the range is out, the source is destroyed so the rest of the body is not downloaded.
 */
export function sliceStream(source: Readable, skip: number, length: number): Readable {
  let toSkip = skip;
  let remaining = length;
  const out = new Transform({
    transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback) {
      if (remaining <= 0) return cb();
      let c = chunk;
      if (toSkip > 0) {
        const n = Math.min(toSkip, c.length);
        toSkip -= n;
        c = c.subarray(n);
      }
      if (c.length > remaining) c = c.subarray(0, remaining);
      remaining -= c.length;
      if (c.length > 0) this.push(c);
      if (remaining <= 0) {
        this.push(null);
        source.unpipe(this);
        source.destroy();
      }
      cb();
    },
  });
  source.on('error', (e) => {
    if (remaining > 0) out.destroy(e);
  });
  if (length <= 0) {
    source.destroy();
    out.end();
    return out;
  }
  source.pipe(out);
  return out;
}
