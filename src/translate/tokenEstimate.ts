import type { AnthropicContentBlock, MessagesRequest } from './anthropicTypes';
import { str } from './client/messagesToChat';
import type { ModelConfig } from '../catalog';
import { mediaParts, mediaTokens } from '../billing';

/**
 * count_tokens for models without an upstream counter (every non-Anthropic model): an estimate, documented in
 * docs/coding-assistants.md. One token per 4 characters of the text a model reads (system prompt, message text,
 * tool calls and results, thinking, tool definitions as JSON), the same rule that bills a stream cut short, plus
 * 3 tokens of framing per message, plus each image at the rule of the provider serving `model` (by size when the
 * image is inline: billing/imageTokens.ts, the funds bound's rule), or IMAGE_TOKENS per image or document block
 * without a model.
 */

export const IMAGE_TOKENS = 1600;
const PER_MESSAGE = 3;

function blockChars(b: AnthropicContentBlock | { type?: string } | null, images: { n: number }): number {
  if (!b || typeof b !== 'object') return 0;
  switch (b.type) {
    case 'text':
      return str((b as { text?: unknown }).text).length;
    case 'thinking':
      return str((b as { thinking?: unknown }).thinking).length;
    case 'tool_use': {
      const u = b as { name?: unknown; input?: unknown };
      return str(u.name).length + JSON.stringify(u.input ?? {}).length;
    }
    case 'tool_result': {
      const c = (b as { content?: unknown }).content;
      if (Array.isArray(c)) return c.reduce((n: number, x) => n + blockChars(x as AnthropicContentBlock, images), 0);
      return str(c).length;
    }
    case 'image':
    case 'document':
      images.n++;
      return 0;
    default:
      return 0;
  }
}

export function estimateInputTokens(
  req: Pick<MessagesRequest, 'system' | 'messages' | 'tools'>,
  model?: ModelConfig,
): number {
  const images = { n: 0 };
  let chars = 0;
  if (typeof req.system === 'string') chars += req.system.length;
  else if (Array.isArray(req.system)) for (const b of req.system) chars += blockChars(b, images);
  for (const m of req.messages ?? []) {
    chars +=
      typeof m.content === 'string'
        ? m.content.length
        : Array.isArray(m.content)
          ? m.content.reduce((n, b) => n + blockChars(b, images), 0)
          : 0;
  }
  for (const t of Array.isArray(req.tools) ? req.tools : [])
    chars += JSON.stringify({ name: t?.name, description: t?.description, input_schema: t?.input_schema }).length;
  const media = model ? mediaTokens(model, mediaParts([req.system, req.messages])) : images.n * IMAGE_TOKENS;
  return Math.ceil(chars / 4) + media + (req.messages?.length ?? 0) * PER_MESSAGE;
}
