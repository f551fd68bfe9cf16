import { imageSize } from '../src/billing/imageTokens';

/**
 * Prompt-token counts the way the providers count them, for measuring the gateway's funds bound
 * (bench/estimateAccuracy.ts) against something other than its own rule. Switched on with the emulator setting
 * `providerTokens` (POST /_emulator/config); off, the emulated upstreams count ceil(characters / 4) of the text
 * as before, which the tests rely on.
 *
 * Text: a BPE-like rule, not the gateway's bytes: the text is split as GPT's pre-tokenizer splits it (words with
 * their leading space, runs of digits of up to 3, punctuation runs, whitespace), and each piece costs one token
 * per 4 characters, at least one. Chat framing as OpenAI documents it: 3 tokens per message, 1 per name, 3 to
 * prime the reply; tool definitions and tool calls as their text plus a small frame; Anthropic's tool-use system
 * prompt (346 tokens) when tools are given. Images by each provider's published rule, with the size read from the
 * image itself: OpenAI's 512 px tiles (gpt-4o-mini at 2833 + 5667 per tile) or 32 px patches, Anthropic's
 * width x height / 750. These rules are written here from the providers' documentation, apart from the gateway's.
 */

const PIECE = /'(?:s|t|re|ve|m|ll|d)| ?\p{L}+| ?\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+/gu;

export function textTokens(s: unknown): number {
  if (typeof s !== 'string' || !s) return 0;
  let n = 0;
  for (const m of s.matchAll(PIECE)) n += Math.max(1, Math.ceil(m[0].trim().length / 4));
  return n;
}

type Json = any;

function dims(data: unknown): { w: number; h: number } | null {
  if (typeof data !== 'string') return null;
  const s = imageSize(Buffer.from(data.slice(0, 87_380), 'base64'));
  return s ? { w: s.width, h: s.height } : null;
}
function dataUrlDims(url: unknown): { w: number; h: number } | null {
  if (typeof url !== 'string' || !url.startsWith('data:')) return null;
  return dims(url.slice(url.indexOf(',') + 1));
}

/** OpenAI: the tokens of one image_url part for `model`. An image by URL is taken as 1024 x 1024. */
function openaiImage(model: string, part: Json): number {
  const d = dataUrlDims(part?.image_url?.url) ?? { w: 1024, h: 1024 };
  const detail = part?.image_url?.detail;
  const patchMul = /gpt-4\.1-nano|gpt-5-nano/.test(model)
    ? 2.46
    : /gpt-4\.1-mini|gpt-5-mini/.test(model)
      ? 1.62
      : /o4-mini/.test(model)
        ? 1.72
        : 0;
  if (patchMul) {
    let p = Math.ceil(d.w / 32) * Math.ceil(d.h / 32);
    if (p > 1536) {
      const shrink = Math.sqrt((1536 * 1024) / (d.w * d.h));
      p = Math.min(1536, Math.ceil((d.w * shrink) / 32) * Math.ceil((d.h * shrink) / 32));
    }
    return Math.ceil(p * patchMul);
  }
  const [base, tile] = /gpt-4o-mini/.test(model) ? [2833, 5667] : /^(o1|o3)/.test(model) ? [75, 150] : [85, 170];
  if (detail === 'low') return base;
  let { w, h } = d;
  if (Math.max(w, h) > 2048) [w, h] = [(w * 2048) / Math.max(w, h), (h * 2048) / Math.max(w, h)];
  if (Math.min(w, h) > 768) [w, h] = [(w * 768) / Math.min(w, h), (h * 768) / Math.min(w, h)];
  return base + tile * Math.ceil(w / 512) * Math.ceil(h / 512);
}

function openaiContent(model: string, content: unknown): number {
  if (typeof content === 'string') return textTokens(content);
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const p of content) {
    if (p?.type === 'text') n += textTokens(p.text);
    else if (p?.type === 'image_url') n += openaiImage(model, p);
  }
  return n;
}

/** OpenAI chat/completions prompt_tokens. */
export function openaiPromptTokens(body: Json): number {
  const model = String(body.model ?? '');
  let n = 3;
  for (const m of Array.isArray(body.messages) ? body.messages : []) {
    n += 3 + textTokens(m?.role) + openaiContent(model, m?.content) + (m?.name ? 1 + textTokens(m.name) : 0);
    for (const t of Array.isArray(m?.tool_calls) ? m.tool_calls : [])
      n += 3 + textTokens(t?.function?.name) + textTokens(t?.function?.arguments);
  }
  const tools = Array.isArray(body.tools) ? body.tools : [];
  if (tools.length) n += 12;
  for (const t of tools)
    n +=
      8 +
      textTokens(t?.function?.name) +
      textTokens(t?.function?.description) +
      textTokens(JSON.stringify(t?.function?.parameters ?? {}));
  return n;
}

function anthropicImage(block: Json): number {
  const d = block?.source?.type === 'base64' ? dims(block.source.data) : null;
  let { w, h } = d ?? { w: 1092, h: 1092 };
  const s = Math.min(1, 1568 / Math.max(w, h), Math.sqrt((1600 * 750) / (w * h)));
  [w, h] = [w * s, h * s];
  return Math.min(1600, Math.ceil((w * h) / 750));
}

function anthropicBlocks(content: unknown): number {
  if (typeof content === 'string') return textTokens(content);
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const b of content) {
    if (b?.type === 'text') n += textTokens(b.text);
    else if (b?.type === 'image') n += anthropicImage(b);
    else if (b?.type === 'tool_use') n += 5 + textTokens(b.name) + textTokens(JSON.stringify(b.input ?? {}));
    else if (b?.type === 'tool_result') n += 5 + anthropicBlocks(b.content);
    else if (b?.type === 'thinking') n += textTokens(b.thinking);
  }
  return n;
}

/** Anthropic Messages input_tokens. */
export function anthropicInputTokens(body: Json): number {
  let n = anthropicBlocks(body.system);
  for (const m of Array.isArray(body.messages) ? body.messages : []) n += 3 + anthropicBlocks(m?.content);
  const tools = Array.isArray(body.tools) ? body.tools : [];
  if (tools.length) n += 346;
  for (const t of tools)
    n += 5 + textTokens(t?.name) + textTokens(t?.description) + textTokens(JSON.stringify(t?.input_schema ?? {}));
  return n;
}
