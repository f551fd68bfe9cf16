import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { projectRoot } from '../src/projectRoot';

/**
 * Media the emulated video providers serve: a real MP4 (1 s, 160x90, H.264 + AAC, faststart; made with ffmpeg)
 * and its last frame as PNG, JPEG and WebP (the PNG re-encoded by a browser, so each shows the same picture).
 * A larger result (settings.videoBytes) is the same MP4 with its trailing `mdat` box grown and zero-padded: still
 * a valid MP4 (the sample tables point into the original bytes), generated while streaming so a 500 MB result
 * never sits in memory.
 */

// Read from the source tree so the compiled emulator (dist/) finds them too.
const fixtures = path.join(projectRoot(), 'emulator', 'fixtures');
let mp4: { bytes: Buffer; mdatOffset: number; mdatSize: number } | null = null;
const frames = new Map<LastFrameFormat, Buffer>();

function loadMp4() {
  if (mp4) return mp4;
  const bytes = fs.readFileSync(path.join(fixtures, 'video.mp4'));
  let off = 0;
  let mdat: { offset: number; size: number } | null = null;
  while (off + 8 <= bytes.length) {
    const size = bytes.readUInt32BE(off);
    const type = bytes.toString('latin1', off + 4, off + 8);
    if (size < 8) throw new Error('emulator fixture video.mp4: unsupported box size');
    if (type === 'mdat') mdat = { offset: off, size };
    off += size;
  }
  if (!mdat || mdat.offset + mdat.size !== bytes.length)
    throw new Error('emulator fixture video.mp4 must end with its mdat box');
  mp4 = { bytes, mdatOffset: mdat.offset, mdatSize: mdat.size };
  return mp4;
}

export type LastFrameFormat = 'png' | 'jpeg' | 'webp';
const FRAME_FILES: Record<LastFrameFormat, { file: string; type: string }> = {
  png: { file: 'last_frame.png', type: 'image/png' },
  jpeg: { file: 'last_frame.jpg', type: 'image/jpeg' },
  webp: { file: 'last_frame.webp', type: 'image/webp' },
};

/** The last-frame image in `format`, its file extension and content type. */
export function lastFrameImage(format: LastFrameFormat): { bytes: Buffer; ext: string; type: string } {
  const f = FRAME_FILES[format];
  let bytes = frames.get(format);
  if (!bytes) frames.set(format, (bytes = fs.readFileSync(path.join(fixtures, f.file))));
  return { bytes, ext: path.extname(f.file), type: f.type };
}

const ZEROS = Buffer.alloc(256 * 1024);

/** A valid MP4 of (at least) `bytes` bytes, as a stream with its exact length. */
export function mp4Stream(bytes: number): { body: Readable; length: number } {
  const f = loadMp4();
  const pad = Math.max(0, Math.floor(bytes) - f.bytes.length);
  if (f.mdatSize + pad > 0xffffffff) throw new Error('emulated video too large (max 4 GB)');
  if (pad === 0) return { body: Readable.from([f.bytes]), length: f.bytes.length };
  const head = Buffer.from(f.bytes);
  head.writeUInt32BE(f.mdatSize + pad, f.mdatOffset);
  async function* gen() {
    yield head;
    let left = pad;
    while (left > 0) {
      const n = Math.min(left, ZEROS.length);
      yield n === ZEROS.length ? ZEROS : ZEROS.subarray(0, n);
      left -= n;
    }
  }
  return { body: Readable.from(gen(), { objectMode: false, highWaterMark: 1 }), length: f.bytes.length + pad };
}

/** Deterministic prompt markers shared by the emulated video providers. */
export interface VideoMarkers {
  /** `[fail]`, `[filter]`, `[expire]`, `[reject]` (400 on create), `[hang]` (never finishes). */
  outcome: 'ok' | 'fail' | 'filter' | 'expire' | 'reject' | 'hang';
  /** `[polls=N]`: polls this task needs, overriding settings.videoPollsToComplete. */
  polls?: number;
  /** `[duration=N]`: the duration the provider reports for its result. */
  duration?: number;
  /** `[resolution=480p]`: the resolution the provider reports it delivered (default: what was asked). */
  resolution?: string;
  /** `[last_frame=jpeg]`, `[last_frame=webp]`: the format of the returned last frame (default png). */
  lastFrame: LastFrameFormat;
}

export function parseMarkers(prompt: string): VideoMarkers {
  const has = (m: string) => prompt.includes(`[${m}]`);
  const outcome: VideoMarkers['outcome'] = has('reject')
    ? 'reject'
    : has('fail')
      ? 'fail'
      : has('filter')
        ? 'filter'
        : has('expire')
          ? 'expire'
          : has('hang')
            ? 'hang'
            : 'ok';
  const polls = /\[polls=(\d{1,6})\]/.exec(prompt);
  const duration = /\[duration=(\d{1,4})\]/.exec(prompt);
  const resolution = /\[resolution=(480p|720p|1080p|4k)\]/.exec(prompt)?.[1];
  const lastFrame = /\[last_frame=(jpeg|webp)\]/.exec(prompt)?.[1] as LastFrameFormat | undefined;
  return {
    outcome,
    polls: polls ? Number(polls[1]) : undefined,
    duration: duration ? Number(duration[1]) : undefined,
    resolution,
    lastFrame: lastFrame ?? 'png',
  };
}
