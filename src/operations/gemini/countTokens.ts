import type { CountTokensBody } from '../../schemas';
import { geminiToChat, IMAGE_TOKENS, translateInput } from '../../translate';

const PER_MESSAGE = 3;

/**
 * countTokens for a model without a Gemini counter upstream: the rule /v1/messages/count_tokens documents (one
 * token per 4 characters of what the model reads, IMAGE_TOKENS per image, 3 per message), over the chat form.
 */
export function countTokensEstimate(body: CountTokensBody): number {
  const req = body.generateContentRequest ?? { contents: body.contents ?? [] };
  const { chat } = translateInput(() => geminiToChat(req, { upstreamModel: '', stream: false }));
  let chars = 0;
  let images = 0;
  for (const m of chat.messages) {
    if (typeof m.content === 'string') chars += m.content.length;
    else if (Array.isArray(m.content)) {
      for (const p of m.content) {
        if (p.type === 'text') chars += p.text.length;
        else images++;
      }
    }
    if (m.role === 'assistant')
      for (const c of m.tool_calls ?? []) chars += c.function.name.length + c.function.arguments.length;
  }
  for (const t of chat.tools ?? []) chars += JSON.stringify(t.function).length;
  return Math.ceil(chars / 4) + images * IMAGE_TOKENS + chat.messages.length * PER_MESSAGE;
}
