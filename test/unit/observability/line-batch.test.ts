import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { LineBatch, type BatchSink } from '../../../src/observability/lineBatch';

/**
 * The request log's batching in front of sonic-boom: lines reach the destination whole, in order, one string per
 * batch, and nothing is left behind by flushSync (the exit path).
 */

class Recorder implements BatchSink {
  writes: string[] = [];
  syncs = 0;
  write(text: string): boolean {
    this.writes.push(text);
    return true;
  }
  flushSync(): void {
    this.syncs++;
  }
}

const line = (i: number) => `{"msg":"request","i":${i}}\n`;

test('lines are handed on as one string once a batch is full, and the rest on flush', () => {
  const sink = new Recorder();
  const batch = new LineBatch(sink, 4 * line(0).length);
  for (let i = 0; i < 4; i++) batch.write(line(i)); // the fourth line fills the batch
  expect(sink.writes).toEqual([line(0) + line(1) + line(2) + line(3)]);
  batch.write(line(4));
  expect(sink.writes).toHaveLength(1);
  batch.flush();
  expect(sink.writes).toEqual([line(0) + line(1) + line(2) + line(3), line(4)]);
  batch.flush(); // nothing new: nothing written
  expect(sink.writes).toHaveLength(2);
});

test('flushSync hands on what is collected and flushes the destination', () => {
  const sink = new Recorder();
  const batch = new LineBatch(sink, 1000);
  batch.write(line(0));
  batch.flushSync();
  expect(sink.writes).toEqual([line(0)]);
  expect(sink.syncs).toBe(1);
});

test('through pino and sonic-boom to a file: every line, in order, after flushSync', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'line-batch-'));
  const file = path.join(dir, 'log');
  const dest = pino.destination({ dest: file, sync: true });
  const batch = new LineBatch(dest, 2048);
  const logger = pino({ base: null, timestamp: false }, batch);
  for (let i = 0; i < 500; i++) logger.info({ i, text: 'é'.repeat(i % 7) }, 'request');
  batch.flushSync();
  const lines = fs
    .readFileSync(file, 'utf8')
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as { i: number; text: string });
  expect(lines.map((l) => l.i)).toEqual([...Array(500).keys()]);
  expect(lines[6].text).toBe('éééééé');
  dest.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
});
