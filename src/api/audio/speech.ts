import { callerOf } from '../httpCaller';
import { finished } from 'node:stream';
import type { AppDeps } from '../../operations';
import type { Ctx } from '../middleware';
import type { ModelConfig } from '../../catalog';
import type { SpeechBody, SpeechFormat } from '../../schemas';
import { charactersCost, countCharacters } from '../../billing';
import { boundOverCandidates, openCall, RoutedPayload } from '../../modelCall';
import { CLIENT_CLOSED } from '../../net';

/**
 * POST /v1/audio/speech: billed per input character at the answering model's price, the upstream's
 * audio streamed through with the format's Content-Type.
 */

/** Content-Type per speech response_format. */
export const SPEECH_CONTENT_TYPES: Readonly<Record<SpeechFormat, string>> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

export async function synthesizeSpeech(ctx: Ctx, deps: AppDeps, model: ModelConfig, body: SpeechBody): Promise<void> {
  const format: SpeechFormat = body.response_format ?? 'mp3';
  const characters = countCharacters(body.input);
  const payloads = new RoutedPayload({
    model: model.upstreamModel,
    input: body.input,
    voice: body.voice,
    response_format: format,
    ...(body.speed !== undefined ? { speed: body.speed } : {}),
    ...(body.instructions !== undefined ? { instructions: body.instructions } : {}),
  });
  const units = { characters };
  // Reserved once, at the most expensive model that may answer (retries and fallbacks included).
  const maxCost = boundOverCandidates(deps.catalog, deps.router, model, (m) => ({
    maxCost: charactersCost(m.pricing, characters),
  })).maxCost;
  const call = await openCall(callerOf(ctx, deps), deps, model, 'audio.speech', { maxCost });
  call.unitsIfUnanswered = units;
  // Retried only until the upstream's audio starts: a 2xx answer is handed to the client as it streams.
  const up = await call.run((t) =>
    deps.providers.openaiFor(t.deployment).postStream('/audio/speech', payloads.for(t), call.tryOptions),
  );
  const cost = charactersCost(call.answered.pricing, characters);
  // Charged once the audio has been delivered (or the client left after the upstream synthesised it); an
  // upstream that breaks off mid-audio is a failed call and charges nothing.
  finished(up.body, (err) => {
    if (!err) call.settleCost(cost, units);
    else if (call.clientGone) call.settleCost(cost, units, CLIENT_CLOSED);
    else {
      call.cancel(502, units);
      call.streamCut(); // broken off mid-audio: its deployment cools down
    }
  });
  call.setCostHeaders(cost);
  ctx.status = 200;
  ctx.type = SPEECH_CONTENT_TYPES[format];
  ctx.body = up.body;
}
