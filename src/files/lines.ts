import type { Readable } from 'node:stream';

/**
 * JSONL lines out of a byte stream, without holding more than one line: each line's bytes (without its `\n` and a
 * trailing `\r`), its 1-based number and the byte offset just past it (where reading resumes). A line longer than
 * `maxLineBytes` is reported as such rather than buffered.
 */

export const MAX_LINE_BYTES = 16 * 1024 * 1024;

export interface Line {
  /** 1-based line number in the file. */
  no: number;
  bytes: Buffer;
  /** Byte offset of the next line. */
  end: number;
}

export class LineTooLong extends Error {
  constructor(readonly no: number) {
    super(`line ${no} is longer than ${MAX_LINE_BYTES} bytes`);
  }
}

/** Splits pushed chunks into lines; `flush` returns the last line when the data does not end with a newline. */
export class LineSplitter {
  private parts: Buffer[] = [];
  private partBytes = 0;
  /** Offset of the first byte not yet returned in a line. */
  private offset: number;
  private no: number;

  constructor(
    startOffset = 0,
    startLine = 0,
    private readonly maxLineBytes = MAX_LINE_BYTES,
  ) {
    this.offset = startOffset;
    this.no = startLine;
  }

  push(chunk: Buffer, out: (l: Line) => void): void {
    let from = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, from);
      if (nl < 0) break;
      const piece = chunk.subarray(from, nl);
      const bytes = this.partBytes ? Buffer.concat([...this.parts, piece]) : piece;
      this.parts = [];
      const len = this.partBytes + piece.length;
      this.partBytes = 0;
      this.no++;
      if (len > this.maxLineBytes) throw new LineTooLong(this.no);
      this.offset += len + 1;
      out({ no: this.no, bytes: trimCr(bytes), end: this.offset });
      from = nl + 1;
    }
    if (from < chunk.length) {
      this.partBytes += chunk.length - from;
      if (this.partBytes > this.maxLineBytes) throw new LineTooLong(this.no + 1);
      // Copied: the caller's chunk may be reused.
      this.parts.push(Buffer.from(chunk.subarray(from)));
    }
  }

  flush(): Line | null {
    if (this.partBytes === 0) return null;
    const bytes = Buffer.concat(this.parts);
    this.parts = [];
    this.offset += this.partBytes;
    this.partBytes = 0;
    this.no++;
    return { no: this.no, bytes: trimCr(bytes), end: this.offset };
  }
}

function trimCr(b: Buffer): Buffer {
  return b.length && b[b.length - 1] === 0x0d ? b.subarray(0, b.length - 1) : b;
}

/** A line of only whitespace carries no request (a trailing newline, blank lines): skipped everywhere alike. */
export function isBlank(b: Buffer): boolean {
  for (const c of b) if (c !== 0x20 && c !== 0x09 && c !== 0x0d && c !== 0xef && c !== 0xbb && c !== 0xbf) return false;
  return true;
}

/** The lines of `stream` (read from byte `startOffset`, which starts line `startLine + 1`), one at a time. */
export async function* readLines(stream: Readable, startOffset = 0, startLine = 0): AsyncGenerator<Line> {
  const split = new LineSplitter(startOffset, startLine);
  const ready: Line[] = [];
  const out = (l: Line) => ready.push(l);
  for await (const chunk of stream) {
    split.push(chunk as Buffer, out);
    while (ready.length) yield ready.shift()!;
  }
  const last = split.flush();
  if (last) yield last;
}
