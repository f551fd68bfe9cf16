import { offPathSync } from './offPathWork';

/** Where a LineBatch hands its batches: sonic-boom (pino.destination), which owns the fd, partial writes and EAGAIN. */
export interface BatchSink {
  write(text: string): boolean;
  flushSync(): void;
}

/**
 * Collects log lines in memory and hands them to the destination as one string per `limit` characters (and on
 * flush). sonic-boom's own buffering (minLength) appends each line to the buffered string and measures that whole
 * string's byte length on every write: a copy of the buffer per line, a measurable share of a streamed request's CPU
 * (docs/benchmarks.md). Joining an array of lines once per batch costs one copy in all.
 */
export class LineBatch {
  private lines: string[] = [];
  private chars = 0;

  constructor(
    private readonly sink: BatchSink,
    private readonly limit = 16 * 1024,
  ) {}

  write(line: string): boolean {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= this.limit) this.flush();
    return true;
  }

  /** Hands the lines collected so far to the destination (written asynchronously). */
  flush(): void {
    if (this.lines.length === 0) return;
    offPathSync('log flush', () => this.handOver());
  }

  private handOver(): void {
    const text = this.lines.length === 1 ? this.lines[0] : this.lines.join('');
    this.lines = [];
    this.chars = 0;
    this.sink.write(text);
  }

  /** Everything collected and everything the destination holds, written before returning (at exit). */
  flushSync(): void {
    this.flush();
    this.sink.flushSync();
  }
}
