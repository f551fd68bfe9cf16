import type { AppDeps } from '../deps';
import type { Ctx } from '../middleware';
import { estimateChatMaxCost } from '../../billing/pricing';
import type { ModelConfig } from '../../catalog/catalog';
import { forwardCompletionJson, forwardCompletionStream, RoutedPayload, type UpstreamTry } from '../upstream';
import { boundOverCandidates } from '../../routing/bound';
import type { RouteTry } from '../../routing/modelRouter';
import { reserve } from '../reserve';
import { redactorFor } from '../../catalog/redact';

/**
 * A chat or legacy completion on an OpenAI-compatible upstream: the body forwarded as sent (model renamed per
 * deployment), the upper-bound cost reserved once for every candidate that may answer, the answer relayed (JSON or
 * SSE) and settled on the upstream's usage (src/api/upstream.ts).
 */

export interface CompletionBody {
  model: string;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
}

export async function forwardCompletion(
  ctx: Ctx,
  deps: AppDeps,
  kind: 'chat' | 'completion',
  model: ModelConfig,
  body: CompletionBody,
): Promise<void> {
  // Resolved before funds are reserved: a misconfigured provider is refused with nothing held.
  deps.providers.openai(model);
  const stream = body.stream === true;
  const clientWantsUsage = stream && body.stream_options?.include_usage === true;
  // The body is ours (parsed per request): rewrite it in place rather than copy it.
  body.model = model.upstreamModel;
  if (stream)
    body.stream_options = body.stream_options
      ? { ...body.stream_options, include_usage: true }
      : { include_usage: true };
  const payloads = new RoutedPayload(body);
  const payloadBytes = Buffer.byteLength(payloads.payload);
  // Reserved once, for the most expensive model and deployment that may answer (retries and fallbacks included).
  const bound = boundOverCandidates(deps.catalog, deps.router, model, (m, extra) =>
    estimateChatMaxCost(m, body, payloadBytes + extra),
  );
  const meter = await reserve(
    ctx,
    deps,
    model.id,
    kind === 'chat' ? 'chat.completions' : 'completions',
    bound.maxCost,
    bound.promptTokens + bound.outputTokens,
  );
  const path = kind === 'chat' ? '/chat/completions' : '/completions';
  const prepare = (t: RouteTry): UpstreamTry => ({
    adapter: deps.providers.openaiFor(t.deployment),
    payload: payloads.for(t),
  });
  if (stream)
    await forwardCompletionStream(ctx, deps.router, model, path, prepare, payloadBytes, meter, {
      kind,
      clientWantsUsage,
      redact: redactorFor(deps.catalog),
    });
  else await forwardCompletionJson(ctx, deps.router, model, path, prepare, payloadBytes, meter);
}
