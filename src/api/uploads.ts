import fs from 'node:fs';
import type { Ctx } from './requestState';

/** Files of a multipart request (parsed to temp files by multipartBody): lookup, magic-byte sniffing, cleanup. */

export interface UploadedFile {
  filepath: string;
  originalFilename: string | null;
  mimetype: string | null;
  size: number;
}

type FilesMap = Record<string, UploadedFile | UploadedFile[] | undefined>;

const filesOf = (ctx: Ctx): FilesMap => (ctx.request as unknown as { files?: FilesMap }).files ?? {};

/** The first file sent under any of `names` (SDKs send arrays as `name[]`). */
export function uploadedFile(ctx: Ctx, ...names: string[]): UploadedFile | null {
  const files = filesOf(ctx);
  for (const n of names) {
    const f = files[n];
    const first = Array.isArray(f) ? f[0] : f;
    if (first) return first;
  }
  return null;
}

/** Deletes every temp file of the request (call in `finally`). */
export async function removeUploads(ctx: Ctx): Promise<void> {
  const all = Object.values(filesOf(ctx)).flatMap((f) => (Array.isArray(f) ? f : f ? [f] : []));
  await Promise.all(all.map((f) => fs.promises.unlink(f.filepath).catch(() => undefined)));
}

/** The first `n` bytes of a file. */
export async function readHead(path: string, n = 16): Promise<Buffer> {
  const h = await fs.promises.open(path, 'r');
  try {
    const buf = Buffer.alloc(n);
    const { bytesRead } = await h.read(buf, 0, n, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await h.close();
  }
}

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
export const isPngHead = (b: Buffer) => b.length >= 8 && b.subarray(0, 8).equals(PNG);

/** Audio container by magic bytes (the formats OpenAI transcription accepts), or null. */
export function sniffAudio(b: Buffer): string | null {
  if (b.length < 4) return null;
  const ascii = (s: number, e: number) => b.toString('latin1', s, e);
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WAVE') return 'wav';
  if (ascii(0, 4) === 'fLaC') return 'flac';
  if (ascii(0, 4) === 'OggS') return 'ogg';
  if (ascii(0, 3) === 'ID3') return 'mp3';
  const frameSync = b[0] === 0xff && (b[1] & 0xe0) === 0xe0; // MPEG audio / ADTS
  if (frameSync) return (b[1] & 0x06) === 0 ? 'aac' : 'mp3';
  if (b.length >= 8 && ascii(4, 8) === 'ftyp') return 'mp4';
  if (b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) return 'webm';
  return null;
}
