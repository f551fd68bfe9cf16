import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonBody, multipartBody, requireApiKey, route, type GatewayState } from '../middleware';
import { badRequest } from '../../errors';
import { validateSpeech, validateTranscriptionFields } from '../../schemas';
import { readHead, removeUploads, sniffAudio, uploadedFile } from '../uploads';
import { synthesizeSpeech, transcribe } from '../audio';

const AUDIO_FORMATS_MESSAGE =
  "Invalid file format. Supported formats: ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']";

/**
 * POST /v1/audio/speech (src/api/audio/speech.ts) and POST /v1/audio/transcriptions (multipart,
 * src/api/audio/transcribe.ts): validate, find the model, then the service bills, calls and answers.
 */
export function audioRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);

  r.post('/v1/audio/speech', route('/v1/audio/speech'), auth, jsonBody(deps.config.maxJsonBytes), async (ctx) => {
    const body = ctx.request.body;
    validateSpeech(body);
    const model = deps.catalog.require(body.model, 'speech');
    ctx.state.model = model.id;
    await synthesizeSpeech(ctx, deps, model, body);
  });

  r.post(
    '/v1/audio/transcriptions',
    route('/v1/audio/transcriptions'),
    auth,
    multipartBody(deps.config.maxUploadBytes),
    async (ctx) => {
      try {
        const fields = (ctx.request.body ?? {}) as Record<string, unknown>;
        validateTranscriptionFields(fields);
        const file = uploadedFile(ctx, 'file');
        if (!file) throw badRequest("Missing required parameter: 'file'.", 'file', 'missing_required_parameter');
        const model = deps.catalog.require(fields.model, 'transcription');
        ctx.state.model = model.id;
        if (file.size === 0 || !sniffAudio(await readHead(file.filepath)))
          throw badRequest(AUDIO_FORMATS_MESSAGE, 'file', 'invalid_file_format');
        await transcribe(ctx, deps, model, file, fields);
      } finally {
        await removeUploads(ctx);
      }
    },
  );
  return r;
}
