import { finished } from 'node:stream';
import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { jsonBody, multipartBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError, badRequest } from '../../errors';
import { validateSpeech, validateTranscriptionFields, type SpeechFormat, type TranscriptionFormat } from '../../schemas/audio';
import { audioCost, charactersCost, countCharacters } from '../../billing/pricing';
import { callRouted, CLIENT_CLOSED, clientAbortSignal, RoutedPayload } from '../upstream';
import { boundOverCandidates } from '../../routing/bound';
import { readHead, removeUploads, sniffAudio, uploadedFile } from '../uploads';
import type { MultipartValue } from '../../providers/types';
import { reserve } from '../reserve';
import { setCostHeaders } from '../costReport';

/** Content-Type per speech response_format. */
export const SPEECH_CONTENT_TYPES: Readonly<Record<SpeechFormat, string>> = {
  mp3: 'audio/mpeg', opus: 'audio/ogg', aac: 'audio/aac', flac: 'audio/flac', wav: 'audio/wav', pcm: 'audio/pcm',
};

/** Content-Type per transcription response_format. */
export const TRANSCRIPTION_CONTENT_TYPES: Readonly<Record<TranscriptionFormat, string>> = {
  json: 'application/json; charset=utf-8', verbose_json: 'application/json; charset=utf-8',
  text: 'text/plain; charset=utf-8', srt: 'application/x-subrip; charset=utf-8', vtt: 'text/vtt; charset=utf-8',
};

const AUDIO_FORMATS_MESSAGE = "Invalid file format. Supported formats: ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']";

interface Segment { start?: unknown; end?: unknown; text?: unknown }
interface VerboseTranscription { text?: unknown; duration?: unknown; segments?: Segment[] }

function timestamp(sec: number, sep: ',' | '.'): string {
  const ms = Math.max(0, Math.round(sec * 1000));
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(Math.floor(ms / 3_600_000))}:${p(Math.floor(ms / 60_000) % 60)}:${p(Math.floor(ms / 1000) % 60)}${sep}${p(ms % 1000, 3)}`;
}

/** Subtitle cues from the upstream's segments (one cue over the whole audio if it sent none). */
function cues(v: VerboseTranscription, text: string, seconds: number): { start: number; end: number; text: string }[] {
  const segs = Array.isArray(v.segments) ? v.segments : [];
  const out = segs
    .filter((s) => typeof s.start === 'number' && typeof s.end === 'number' && typeof s.text === 'string')
    .map((s) => ({ start: s.start as number, end: s.end as number, text: (s.text as string).trim() }));
  return out.length ? out : [{ start: 0, end: seconds, text }];
}

function render(format: TranscriptionFormat, raw: Buffer, v: VerboseTranscription, text: string, seconds: number): string | Buffer | { text: string } {
  switch (format) {
    case 'json': return { text };
    case 'verbose_json': return raw;
    case 'text': return text + '\n';
    case 'srt': return cues(v, text, seconds).map((c, i) => `${i + 1}\n${timestamp(c.start, ',')} --> ${timestamp(c.end, ',')}\n${c.text}\n`).join('\n') + '\n';
    case 'vtt': return 'WEBVTT\n\n' + cues(v, text, seconds).map((c) => `${timestamp(c.start, '.')} --> ${timestamp(c.end, '.')}\n${c.text}\n`).join('\n') + '\n';
  }
}

/**
 * POST /v1/audio/speech (spec 4.5): billed per input character, the audio streamed through with the format's
 * Content-Type. POST /v1/audio/transcriptions (spec 4.6, multipart): billed per second of audio; the gateway
 * always asks the upstream for verbose_json (the one format that carries the duration it bills) and renders the
 * requested json/text/srt/vtt/verbose_json itself.
 */
export function audioRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);

  r.post('/v1/audio/speech', route('/v1/audio/speech'), auth, jsonBody(deps.config.maxJsonBytes), async (ctx) => {
    const body = ctx.request.body;
    validateSpeech(body);
    const model = deps.catalog.require(body.model, 'speech');
    ctx.state.model = model.id;
    const format: SpeechFormat = body.response_format ?? 'mp3';
    const characters = countCharacters(body.input);
    const payloads = new RoutedPayload({
      model: model.upstreamModel, input: body.input, voice: body.voice, response_format: format,
      ...(body.speed !== undefined ? { speed: body.speed } : {}), ...(body.instructions !== undefined ? { instructions: body.instructions } : {}),
    });
    const units = { characters };
    const maxCost = boundOverCandidates(deps.catalog, deps.router, model, (m) => ({ maxCost: charactersCost(m.pricing, characters) })).maxCost;
    const meter = await reserve(ctx, deps, model.id, 'audio.speech', maxCost);
    const signal = clientAbortSignal(ctx.res);
    // Retried only until the upstream's audio starts: a 2xx answer is handed to the client as it streams.
    const answer = await callRouted(ctx, deps.router, model, meter, units, (t) => deps.providers.openaiFor(t.deployment).postStream('/audio/speech', payloads.for(t), { signal }));
    if (!answer) return;
    const up = answer.value;
    const cost = charactersCost(answer.model.pricing, characters);
    // Charged once the audio has been delivered (or the client left after the upstream synthesised it); an
    // upstream that breaks off mid-audio is a failed call and charges nothing.
    finished(up.body, (err) => {
      if (!err) meter.settle(cost, units);
      else if (signal.aborted) meter.settle(cost, units, CLIENT_CLOSED);
      else {
        meter.cancel(units, 502);
        deps.router.streamCut(answer.try); // broken off mid-audio: its deployment cools down
      }
    });
    setCostHeaders(ctx.res, meter, cost);
    ctx.status = 200;
    ctx.type = SPEECH_CONTENT_TYPES[format];
    ctx.body = up.body;
  });

  r.post('/v1/audio/transcriptions', route('/v1/audio/transcriptions'), auth, multipartBody(deps.config.maxUploadBytes), async (ctx) => {
    try {
      await transcribe(ctx);
    } finally {
      await removeUploads(ctx);
    }
  });

  async function transcribe(ctx: Ctx): Promise<void> {
    const fields = (ctx.request.body ?? {}) as Record<string, unknown>;
    validateTranscriptionFields(fields);
    const file = uploadedFile(ctx, 'file');
    if (!file) throw badRequest("Missing required parameter: 'file'.", 'file', 'missing_required_parameter');
    const model = deps.catalog.require(fields.model, 'transcription');
    ctx.state.model = model.id;
    if (file.size === 0 || !sniffAudio(await readHead(file.filepath))) throw badRequest(AUDIO_FORMATS_MESSAGE, 'file', 'invalid_file_format');
    const format: TranscriptionFormat = fields.response_format ?? 'json';
    // Funds bound: audio is at least 8 kbit/s, so a file of B bytes lasts at most B milliseconds.
    const maxCost = boundOverCandidates(deps.catalog, deps.router, model, (m) => ({ maxCost: audioCost(m.pricing, Math.max(file.size, 1000)) })).maxCost;
    const meter = await reserve(ctx, deps, model.id, 'audio.transcriptions', maxCost);
    const upstreamFields: Record<string, MultipartValue> = {
      model: model.upstreamModel,
      file: { path: file.filepath, filename: file.originalFilename || 'audio', contentType: file.mimetype || 'application/octet-stream' },
      response_format: 'verbose_json',
    };
    if (fields.language !== undefined) upstreamFields.language = fields.language;
    if (fields.prompt !== undefined) upstreamFields.prompt = fields.prompt;
    if (fields.temperature !== undefined) upstreamFields.temperature = String(fields.temperature);
    const signal = clientAbortSignal(ctx.res);
    const answer = await callRouted(ctx, deps.router, model, meter, {}, (t) => {
      upstreamFields.model = t.deployment.upstreamModel; // the file is read again from disk for each try
      return deps.providers.openaiFor(t.deployment).postMultipart('/audio/transcriptions', upstreamFields, { signal });
    });
    if (!answer) return;
    const up = answer.value;
    let v: VerboseTranscription;
    try {
      v = JSON.parse(up.body.toString('utf8')) as VerboseTranscription;
      if (!v || typeof v.text !== 'string') throw new Error('no text');
    } catch {
      meter.cancel({}, 502);
      throw new ApiError(502, 'The upstream provider returned an invalid transcription.', 'upstream_error', null, 'upstream_error');
    }
    const text = v.text as string;
    const lastEnd = Array.isArray(v.segments) ? Math.max(0, ...v.segments.map((s) => (typeof s.end === 'number' ? s.end : 0))) : 0;
    // Billed duration: the upstream's, else its last segment's end, else the file at 32 kbit/s.
    const seconds = typeof v.duration === 'number' && v.duration >= 0 ? v.duration : lastEnd > 0 ? lastEnd : (file.size * 8) / 32_000;
    const ms = Math.ceil(seconds * 1000);
    meter.settle(audioCost(answer.model.pricing, ms), { audio_seconds: ms / 1000 });
    setCostHeaders(ctx.res, meter);
    ctx.status = 200;
    ctx.type = TRANSCRIPTION_CONTENT_TYPES[format];
    ctx.body = render(format, up.body, v, text, seconds);
  }
  return r;
}
