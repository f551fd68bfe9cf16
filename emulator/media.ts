import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { projectRoot } from '../src/projectRoot';

/** Real media for the emulator: audio fixtures (made once with ffmpeg, committed) and PNGs encoded in memory. */

export type AudioFormat = 'mp3' | 'opus' | 'aac' | 'flac' | 'wav' | 'pcm';
export const AUDIO_FORMATS: readonly AudioFormat[] = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'];

/** The Content-Type OpenAI's speech endpoint answers with, per response_format. */
export const AUDIO_CONTENT_TYPES: Readonly<Record<AudioFormat, string>> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

let audio: Record<AudioFormat, Buffer> | null = null;
/** 1 s of a 440 Hz tone, 24 kHz mono, in each format (emulator/fixtures/speech.*). Loaded once. */
export function audioFixture(format: AudioFormat): Buffer {
  if (!audio) {
    const dir = path.join(projectRoot(), 'emulator', 'fixtures');
    audio = Object.fromEntries(AUDIO_FORMATS.map((f) => [f, fs.readFileSync(path.join(dir, `speech.${f}`))])) as Record<
      AudioFormat,
      Buffer
    >;
  }
  return audio[format];
}

/** Duration of an audio upload: exact for WAV (from its header), otherwise assumed 32 kbit/s (deterministic). */
export function audioDurationSeconds(bytes: Uint8Array): number {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length >= 44 && b.toString('ascii', 0, 4) === 'RIFF' && b.toString('ascii', 8, 12) === 'WAVE') {
    const byteRate = b.readUInt32LE(28);
    // Find the data chunk (there may be LIST chunks before it).
    for (let off = 12; off + 8 <= b.length;) {
      const id = b.toString('ascii', off, off + 4);
      const size = b.readUInt32LE(off + 4);
      if (id === 'data' && byteRate > 0) return round2(Math.min(size, b.length - off - 8) / byteRate);
      off += 8 + size + (size & 1);
    }
  }
  return round2((b.length * 8) / 32_000);
}

const round2 = (x: number) => Math.round(x * 100) / 100;

export const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
export function isPng(b: Uint8Array): boolean {
  return b.length >= 8 && PNG_MAGIC.equals(Buffer.from(b.buffer, b.byteOffset, 8));
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(data, zlib.crc32(type)) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/** An RGB PNG of the given size: a vertical gradient from `top` to `bottom` (so it is not a flat block). */
export function encodePng(
  width: number,
  height: number,
  top: [number, number, number],
  bottom: [number, number, number],
): Buffer {
  const stride = 1 + width * 3;
  const raw = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const t = height > 1 ? y / (height - 1) : 0;
    const r = Math.round(top[0] + (bottom[0] - top[0]) * t);
    const g = Math.round(top[1] + (bottom[1] - top[1]) * t);
    const bl = Math.round(top[2] + (bottom[2] - top[2]) * t);
    const row = y * stride;
    raw[row] = 0; // filter: none
    for (let x = 0; x < width; x++) {
      const p = row + 1 + x * 3;
      raw[p] = r;
      raw[p + 1] = g;
      raw[p + 2] = bl;
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type: truecolour
  return Buffer.concat([
    PNG_MAGIC,
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const pngCache = new Map<string, Buffer>();
/** A deterministic PNG for a seed and a "WxH" size, cached (encoding a large image takes milliseconds). */
export function seededPng(seed: number, size: string): Buffer {
  const m = /^(\d{2,4})x(\d{2,4})$/.exec(size);
  const w = m ? Math.min(Number(m[1]), 2048) : 1024;
  const h = m ? Math.min(Number(m[2]), 2048) : 1024;
  const palette = seed % 16;
  const key = `${w}x${h}:${palette}`;
  let png = pngCache.get(key);
  if (!png) {
    const hue = (palette * 67) % 256;
    png = encodePng(w, h, [hue, 255 - hue, (hue * 3) % 256], [(hue * 5) % 256, hue, 255 - ((hue * 7) % 256)]);
    if (pngCache.size > 64) pngCache.clear();
    pngCache.set(key, png);
  }
  return png;
}
