import { callerOf } from '../httpCaller';
import type { AppDeps } from '../../operations';
import type { Ctx } from '../middleware';
import { ApiError } from '../../errors';
import type { ModelConfig } from '../../catalog';
import type { TranscriptionFields, TranscriptionFormat } from '../../schemas';
import type { MultipartValue } from '../../providers';
import { audioCost } from '../../billing';
import { boundOverCandidates, openCall } from '../../modelCall';
import type { UploadedFile } from '../uploads';
import { renderTranscript, TRANSCRIPTION_CONTENT_TYPES, type VerboseTranscription } from './transcriptFormats';

/**
 * POST /v1/audio/transcriptions: billed per second of audio. The gateway always asks the upstream for
 * verbose_json (the one format that carries the duration it bills) and renders the requested format itself.
 */

export async function transcribe(
  ctx: Ctx,
  deps: AppDeps,
  model: ModelConfig,
  file: UploadedFile,
  fields: TranscriptionFields,
): Promise<void> {
  const format: TranscriptionFormat = fields.response_format ?? 'json';
  // Funds bound: audio is at least 8 kbit/s, so a file of B bytes lasts at most B milliseconds.
  const maxCost = boundOverCandidates(deps.catalog, deps.router, model, (m) => ({
    maxCost: audioCost(m.pricing, Math.max(file.size, 1000)),
  })).maxCost;
  const call = await openCall(callerOf(ctx, deps), deps, model, 'audio.transcriptions', { maxCost });
  const upstreamFields: Record<string, MultipartValue> = {
    model: model.upstreamModel,
    file: {
      path: file.filepath,
      filename: file.originalFilename || 'audio',
      contentType: file.mimetype || 'application/octet-stream',
    },
    response_format: 'verbose_json',
  };
  if (fields.language !== undefined) upstreamFields.language = fields.language;
  if (fields.prompt !== undefined) upstreamFields.prompt = fields.prompt;
  if (fields.temperature !== undefined) upstreamFields.temperature = String(fields.temperature);
  const up = await call.run((t) => {
    upstreamFields.model = t.deployment.upstreamModel; // the file is read again from disk for each try
    return deps.providers
      .openaiFor(t.deployment)
      .postMultipart('/audio/transcriptions', upstreamFields, call.tryOptions);
  });
  let v: VerboseTranscription;
  try {
    v = JSON.parse(up.body.toString('utf8')) as VerboseTranscription;
    if (!v || typeof v.text !== 'string') throw new Error('no text');
  } catch {
    call.cancel(502);
    throw new ApiError(
      502,
      'The upstream provider returned an invalid transcription.',
      'upstream_error',
      null,
      'upstream_error',
    );
  }
  const text = v.text as string;
  const lastEnd = Array.isArray(v.segments)
    ? Math.max(0, ...v.segments.map((s) => (typeof s.end === 'number' ? s.end : 0)))
    : 0;
  // Billed duration: the upstream's, else its last segment's end, else the file at 32 kbit/s.
  const seconds =
    typeof v.duration === 'number' && v.duration >= 0 ? v.duration : lastEnd > 0 ? lastEnd : (file.size * 8) / 32_000;
  const ms = Math.ceil(seconds * 1000);
  call.settleCost(audioCost(call.answered.pricing, ms), { audio_seconds: ms / 1000 });
  call.setCostHeaders();
  ctx.status = 200;
  ctx.type = TRANSCRIPTION_CONTENT_TYPES[format];
  ctx.body = renderTranscript(format, up.body, v, text, seconds);
}
