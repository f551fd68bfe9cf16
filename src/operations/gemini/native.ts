import type { Caller, OperationDeps } from '../../modelCall';
import { redactorFor } from '../../catalog';
import { modalityTokens, type GeminiUsageMetadata, type GenerateContentResponse } from '../../translate';
import { sseBatches } from '../../sse';
import { geminiStatus } from '../../errorBodies';
import { estimatedUsage, estimateNative, geminiUpstream, openCall, tokenUsage, type TokenUsage } from '../../modelCall';
import type { HeldTry } from '../../observability';
import { CLIENT_CLOSED } from '../../net';
import { GENERATE_OPERATION, type GenerateCall } from './translated';

/**
 * generateContent / streamGenerateContent on a model of a `gemini` provider: the body goes upstream as sent (the
 * model named in the URL by its deployment), the answer comes back as produced (streams re-framed for the
 * client's choice of SSE or JSON array), usage read from usageMetadata as it passes.
 */

/** Gemini's counts as a bill: prompt includes cached tokens; thoughts are output apart from candidates. */
export function fromGeminiUsage(u: GeminiUsageMetadata): TokenUsage {
  const cached = Math.min(u.promptTokenCount, u.cachedContentTokenCount ?? 0);
  const thoughts = u.thoughtsTokenCount ?? 0;
  return tokenUsage({
    input: u.promptTokenCount - cached,
    cacheRead: cached,
    output: (u.candidatesTokenCount ?? 0) + thoughts,
    reasoning: thoughts,
    audioInput: modalityTokens(u.promptTokensDetails, 'AUDIO'),
    audioOutput: modalityTokens(u.candidatesTokensDetails, 'AUDIO'),
  });
}

const hasUsage = (u: GeminiUsageMetadata | undefined): u is GeminiUsageMetadata =>
  typeof u?.promptTokenCount === 'number';

/** Text characters a response carries (the estimate when no usage arrives). */
function deliveredChars(r: GenerateContentResponse): number {
  let n = 0;
  for (const p of r?.candidates?.[0]?.content?.parts ?? [])
    n += (p.text?.length ?? 0) + (p.functionCall ? JSON.stringify(p.functionCall).length : 0);
  return n;
}

/** The upstream's bytes as they pass, shown to the try's span (first token, finish reasons, the model). */
async function* watched(body: AsyncIterable<Uint8Array>, held: HeldTry): AsyncIterable<Uint8Array> {
  for await (const chunk of body) {
    held.data(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    yield chunk;
  }
}

export async function nativeGenerate(caller: Caller, deps: OperationDeps, c: GenerateCall): Promise<void> {
  const { model, req, wire } = c;
  const payload = JSON.stringify(req);
  const bytes = Buffer.byteLength(payload);
  const images = (payload.match(/"inlineData"|"fileData"/g) ?? []).length;
  const maxOut = req.generationConfig?.maxOutputTokens;
  const estimate = estimateNative(deps, model, { bytes, maxOutput: maxOut, media: images });
  const call = await openCall(caller, deps, model, GENERATE_OPERATION, estimate);
  if (!wire) {
    const raw = await call.attempt(geminiUpstream, (a, t) =>
      a.callWhole(t.deployment.upstreamModel, 'generateContent', payload, call.tryOptions),
    );
    let res: GenerateContentResponse;
    try {
      res = JSON.parse(raw.toString('utf8')) as GenerateContentResponse;
    } catch {
      res = null as unknown as GenerateContentResponse;
    }
    call.settle(hasUsage(res?.usageMetadata) ? fromGeminiUsage(res.usageMetadata) : estimatedUsage(bytes, raw.length));
    call.setCostHeaders();
    caller.out.raw(raw);
    return;
  }
  const up = await call.attemptStream(geminiUpstream, (a, t) =>
    a.call(t.deployment.upstreamModel, 'streamGenerateContent', payload, { ...call.tryOptions, sse: true }),
  );
  const held = call.held; // the try's span while traced: it ends with the stream
  const sink = caller.out.sink();
  sink.open(wire.headers(call.meter.id));
  let usage: GeminiUsageMetadata | undefined;
  let delivered = 0;
  let failed = false;
  try {
    for await (const batch of sseBatches(held ? watched(up.body, held) : up.body)) {
      let out = '';
      for (const ev of batch) {
        let r: GenerateContentResponse & { error?: unknown };
        try {
          r = JSON.parse(ev.data);
        } catch {
          continue;
        }
        if (r?.error) failed = true;
        if (hasUsage(r?.usageMetadata)) usage = r.usageMetadata;
        delivered += deliveredChars(r);
        out += wire.item(r?.error ? JSON.parse(redactorFor(deps.catalog)(ev.data)) : r);
      }
      if (out && !(await sink.write(out))) break;
    }
  } catch (e) {
    if (!sink.clientGone) {
      failed = true;
      deps.logger.warn({ reqId: call.meter.id, err: (e as Error).message }, 'gemini upstream stream failed');
      await sink.write(
        wire.item({
          error: { code: 502, message: 'The upstream provider stream was interrupted.', status: geminiStatus(502) },
        }),
      );
    }
  }
  const complete = !failed && !sink.clientGone && usage !== undefined;
  let t = estimatedUsage(bytes, delivered);
  if (usage)
    t = complete
      ? fromGeminiUsage(usage)
      : tokenUsage({
          ...fromGeminiUsage(usage),
          output: Math.max(fromGeminiUsage(usage).output, t.output),
          estimated: true,
        });
  call.settle(t, complete ? 200 : sink.clientGone ? CLIENT_CLOSED : failed ? 502 : 200);
  if (failed) call.streamCut();
  if (!sink.clientGone) await sink.write(wire.end());
  sink.end();
}
