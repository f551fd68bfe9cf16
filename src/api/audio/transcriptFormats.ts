import type { TranscriptionFormat } from '../../schemas';

/** The response_format renderings of a transcription, from the upstream's verbose_json: json, text, srt, vtt. */

/** Content-Type per transcription response_format. */
export const TRANSCRIPTION_CONTENT_TYPES: Readonly<Record<TranscriptionFormat, string>> = {
  json: 'application/json; charset=utf-8',
  verbose_json: 'application/json; charset=utf-8',
  text: 'text/plain; charset=utf-8',
  srt: 'application/x-subrip; charset=utf-8',
  vtt: 'text/vtt; charset=utf-8',
};

interface Segment {
  start?: unknown;
  end?: unknown;
  text?: unknown;
}
export interface VerboseTranscription {
  text?: unknown;
  duration?: unknown;
  segments?: Segment[];
}

function timestamp(sec: number, sep: ',' | '.'): string {
  const ms = Math.max(0, Math.round(sec * 1000));
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  const hours = Math.floor(ms / 3_600_000);
  const minutes = Math.floor(ms / 60_000) % 60;
  const seconds = Math.floor(ms / 1000) % 60;
  return `${p(hours)}:${p(minutes)}:${p(seconds)}${sep}${p(ms % 1000, 3)}`;
}

/** Subtitle cues from the upstream's segments (one cue over the whole audio if it sent none). */
function cues(v: VerboseTranscription, text: string, seconds: number): { start: number; end: number; text: string }[] {
  const segs = Array.isArray(v.segments) ? v.segments : [];
  const out = segs
    .filter((s) => typeof s.start === 'number' && typeof s.end === 'number' && typeof s.text === 'string')
    .map((s) => ({ start: s.start as number, end: s.end as number, text: (s.text as string).trim() }));
  return out.length ? out : [{ start: 0, end: seconds, text }];
}

/** The answer's body in `format`; verbose_json is the upstream's own bytes. */
export function renderTranscript(
  format: TranscriptionFormat,
  raw: Buffer,
  v: VerboseTranscription,
  text: string,
  seconds: number,
): string | Buffer | { text: string } {
  switch (format) {
    case 'json':
      return { text };
    case 'verbose_json':
      return raw;
    case 'text':
      return text + '\n';
    case 'srt':
      return (
        cues(v, text, seconds)
          .map((c, i) => `${i + 1}\n${timestamp(c.start, ',')} --> ${timestamp(c.end, ',')}\n${c.text}\n`)
          .join('\n') + '\n'
      );
    case 'vtt':
      return (
        'WEBVTT\n\n' +
        cues(v, text, seconds)
          .map((c) => `${timestamp(c.start, '.')} --> ${timestamp(c.end, '.')}\n${c.text}\n`)
          .join('\n') +
        '\n'
      );
  }
}
