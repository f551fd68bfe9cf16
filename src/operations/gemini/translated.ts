import {
  type Caller,
  type OperationDeps,
  estimatedUsage,
  fromChatUsage,
  openCall,
  RoutedBackend,
  relayTranslated,
  routedComplete,
} from '../../modelCall';
import type { ModelConfig } from '../../catalog';
import {
  type GenerateContentRequest,
  geminiToChat,
  ChatToGeminiStream,
  chatToGemini,
  translateInput,
} from '../../translate';
import { geminiStatus } from '../../errorBodies';
import type { GeminiStreamWire } from './streamWire';

/**
 * generateContent / streamGenerateContent on a chat model whose upstream is not a Gemini API: Gemini -> chat
 * (src/translate), through the model's chat backend (chat completions, /responses or Anthropic messages, with the
 * router's retries and fallbacks), and back to Gemini responses, one per upstream batch when streamed.
 */

export const GENERATE_OPERATION = 'gemini.generateContent';

export interface GenerateCall {
  model: ModelConfig;
  name: string;
  req: GenerateContentRequest;
  wire: GeminiStreamWire | null;
}

export async function translatedGenerate(caller: Caller, deps: OperationDeps, c: GenerateCall): Promise<void> {
  const { model, req, wire } = c;
  const t = translateInput(() =>
    geminiToChat(req, {
      upstreamModel: model.upstreamModel,
      maxOutputTokens: model.maxOutputTokens,
      reasoning: model.reasoning,
      stream: wire !== null,
    }),
  );
  const backend = new RoutedBackend(deps, model, t.chat);
  const call = await openCall(caller, deps, model, GENERATE_OPERATION, backend.estimate);
  const out = { model: c.name, tools: t.tools, includeThoughts: t.includeThoughts };
  if (!wire) {
    const completion = await routedComplete(call, backend);
    const res = chatToGemini(completion, out);
    call.settle(
      completion.usage
        ? fromChatUsage(completion.usage)
        : estimatedUsage(backend.payloadBytes, JSON.stringify(res.candidates[0].content.parts).length),
    );
    call.setCostHeaders();
    caller.out.json(res);
    return;
  }
  const tr = new ChatToGeminiStream({ ...out, promptTokensEstimate: backend.inputTokensEstimate });
  const items = (rs: unknown[]) => rs.map((r) => wire.item(r)).join('');
  await relayTranslated(
    deps,
    call,
    backend,
    caller.out.sink(),
    {
      push: (chunk) => items(tr.push(chunk)),
      end: () => items(tr.end()),
      fail: (message) =>
        wire.item({
          error: {
            code: 502,
            message: message ?? 'The upstream provider stream was interrupted.',
            status: geminiStatus(502),
          },
        }),
      close: () => wire.end(),
    },
    wire.headers(call.meter.id),
  );
}
