/**
 * The contract between bench/run.ts and optional extra sections (bench/video.ts, issue 4 point 11).
 * A section module exports `runVideoBench` (or `run`, or a default export) of type SectionRunner; run.ts calls
 * it after the synchronous targets are stopped, prints `text` and appends `markdown` to the results file.
 */
export interface BenchContext {
  /** Postgres that lets us create databases (create your own fresh one, as bench/lib/db.ts does). */
  adminDatabaseUrl: string;
  /** bench/results (gitignored except the committed copy in docs/benchmarks.md); logs go to its logs/ folder. */
  resultsDir: string;
  /** Seconds per measured cell the main bench used (BENCH_SECONDS); sections may scale their own durations. */
  seconds: number;
  /** Prints a progress line (stderr), so stdout stays the report. */
  log(line: string): void;
}

export interface BenchSection {
  title: string;
  /** Plain-text report printed to stdout. */
  text: string;
  /** Markdown appended to bench/results/latest.md. */
  markdown: string;
  /** Overall PASS/FAIL of the section's own targets, if it has any. */
  pass?: boolean;
}

export type SectionRunner = (ctx: BenchContext) => Promise<BenchSection | string>;
