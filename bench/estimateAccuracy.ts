import path from 'node:path';
import { startEmulator } from '../emulator/server';
import { projectRoot } from '../src/projectRoot';
import { Catalog, type ModelConfig } from '../src/catalog/catalog';
import { estimateChatMaxCost, outputTokensBound, promptTokensBound, tokensBoundCost } from '../src/billing/pricing';
import { countImages, nativeBound } from '../src/billing/nativeBound';
import { pngHeader } from './lib/imageHeaders';
import { fromAnthropicUsage, fromChatUsage, usageCost } from '../src/billing/tokenUsage';
import { KINDS } from '../src/providers/kinds';

/**
 * How often, and by how much, the funds reserved before an upstream call fall short of the provider's bill.
 *
 *   npm run build && node dist/bench/estimateAccuracy.js [requests per model, default 300] [seed]
 *
 * Real-sized requests go to the emulator: conversations (system prompts of 50 to 3,000 words, 1 to 20 turns, 0 to 15
 * tool definitions with their JSON schemas, tool calls and results, 0 to 4 images) and vision requests (a short
 * question about 1 to 4 images), each image by URL or inline, with its real size and detail. The emulator runs with
 * `providerTokens` on: it counts prompt tokens the way the providers do (emulator/providerTokens.ts: a BPE-like
 * text rule, chat framing, tool frames, each provider's image rule), not by the gateway's bytes rule. Each
 * request's reservation is computed by the gateway's own functions, today's and the rule before (every media part
 * a flat 2,000 tokens), and compared with the cost of the usage the emulator reports.
 */

const PER_MODEL = Number(process.argv[2] ?? 300);
let seed = Number(process.argv[3] ?? 42) >>> 0;
/** mulberry32: a seeded generator whose low bits are not periodic (an LCG's are). */
const rnd = (n: number) => {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
};
const pick = <T>(xs: readonly T[]): T => xs[rnd(xs.length)];

const WORDS = (
  'the of and to in is you that it he was for on are as with his they at be this have from or one had by word ' +
  'but not what all were we when your can said there use an each which she do how their if will up other about ' +
  'out many then them these so some her would make like him into time has look two more write go see number no ' +
  'way could people my than first water been call who oil its now find long down day did get come made may part ' +
  'configuration authentication deployment asynchronous serialization infrastructure observability idempotency ' +
  'function return const await export interface request response error status timeout retry session'
).split(' ');

function prose(words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    let w = pick(WORDS);
    if (rnd(12) === 0) w += pick([',', '.', ':', ';']);
    if (rnd(40) === 0) w = String(rnd(100_000));
    out.push(w);
  }
  return out.join(' ');
}

/** A PNG's signature and IHDR, then filler: the size of a real compressed image of w x h. */
function pngOf(w: number, h: number): string {
  return Buffer.concat([pngHeader(w, h), Buffer.alloc(Math.round(w * h * 0.25), 7)]).toString('base64');
}

const SIZES = [
  [512, 512],
  [800, 600],
  [1024, 1024],
  [1920, 1080],
  [1280, 1920],
  [3024, 4032],
] as const;

interface Image {
  url: boolean;
  w: number;
  h: number;
  detail: 'low' | 'high' | 'auto';
}
const images = (): Image[] =>
  Array.from({ length: pick([0, 0, 0, 1, 1, 2, 4]) }, () => {
    const [w, h] = pick(SIZES);
    return { url: rnd(2) === 0, w, h, detail: pick(['low', 'high', 'auto'] as const) };
  });

function tool(i: number) {
  const props: Record<string, unknown> = {};
  for (let k = 0, n = 1 + rnd(8); k < n; k++)
    props[`field_${k}`] = { type: pick(['string', 'number', 'boolean']), description: prose(3 + rnd(15)) };
  return { name: `tool_${i}`, description: prose(10 + rnd(60)), schema: { type: 'object', properties: props } };
}

interface Conversation {
  system: string;
  turns: { user: string; assistant: string; call: { name: string; args: string; result: string } | null }[];
  tools: ReturnType<typeof tool>[];
  images: Image[];
  maxTokens: number | null;
}

/** A vision request: a short question about 1 to 4 images, no system prompt, no tools. */
function visionRequest(): Conversation {
  const imgs = Array.from({ length: 1 + rnd(4) }, () => {
    const [w, h] = pick(SIZES);
    return { url: rnd(2) === 0, w, h, detail: pick(['low', 'high', 'auto'] as const) };
  });
  return {
    system: '',
    turns: [{ user: prose(5 + rnd(30)), assistant: '', call: null }],
    tools: [],
    images: imgs,
    maxTokens: rnd(2) ? 256 + rnd(1000) : null,
  };
}

function conversation(): Conversation {
  const tools = Array.from({ length: pick([0, 0, 2, 5, 15]) }, (_, i) => tool(i));
  const turns = Array.from({ length: 1 + rnd(20) }, () => ({
    user: prose(5 + rnd(200)),
    assistant: prose(5 + rnd(300)),
    call:
      tools.length && rnd(3) === 0
        ? { name: pick(tools).name, args: JSON.stringify({ q: prose(5 + rnd(20)) }), result: prose(20 + rnd(400)) }
        : null,
  }));
  return { system: prose(50 + rnd(3000)), turns, tools, images: images(), maxTokens: rnd(2) ? 256 + rnd(4000) : null };
}

function chatBody(model: ModelConfig, c: Conversation) {
  const messages: unknown[] = c.system ? [{ role: 'system', content: c.system }] : [];
  c.turns.forEach((t, i) => {
    const last = i === c.turns.length - 1;
    const imgs = last
      ? c.images.map((im) => ({
          type: 'image_url',
          image_url: {
            url: im.url
              ? `https://images.example.com/${im.w}x${im.h}.png`
              : `data:image/png;base64,${pngOf(im.w, im.h)}`,
            detail: im.detail,
          },
        }))
      : [];
    messages.push({ role: 'user', content: imgs.length ? [{ type: 'text', text: t.user }, ...imgs] : t.user });
    if (last) return;
    if (t.call) {
      messages.push({
        role: 'assistant',
        content: null,
        tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: t.call.name, arguments: t.call.args } }],
      });
      messages.push({ role: 'tool', tool_call_id: `call_${i}`, content: t.call.result });
    }
    messages.push({ role: 'assistant', content: t.assistant });
  });
  return {
    model: model.upstreamModel,
    messages,
    ...(c.tools.length
      ? {
          tools: c.tools.map((t) => ({
            type: 'function',
            function: { name: t.name, description: t.description, parameters: t.schema },
          })),
          tool_choice: 'none',
        }
      : {}),
    ...(c.maxTokens ? { max_tokens: c.maxTokens } : {}),
  };
}

function messagesBody(model: ModelConfig, c: Conversation) {
  const messages: unknown[] = [];
  c.turns.forEach((t, i) => {
    const last = i === c.turns.length - 1;
    const imgs = last
      ? c.images.map((im) =>
          im.url
            ? { type: 'image', source: { type: 'url', url: `https://images.example.com/${im.w}x${im.h}.png` } }
            : { type: 'image', source: { type: 'base64', media_type: 'image/png', data: pngOf(im.w, im.h) } },
        )
      : [];
    messages.push({ role: 'user', content: [{ type: 'text', text: t.user }, ...imgs] });
    if (last) return;
    if (t.call) {
      messages.push({
        role: 'assistant',
        content: [{ type: 'tool_use', id: `toolu_${i}`, name: t.call.name, input: JSON.parse(t.call.args) }],
      });
      messages.push({
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: `toolu_${i}`, content: t.call.result }],
      });
    }
    messages.push({ role: 'assistant', content: t.assistant });
  });
  return {
    model: model.upstreamModel,
    ...(c.system ? { system: c.system } : {}),
    messages,
    max_tokens: c.maxTokens ?? model.maxOutputTokens ?? 4096,
    ...(c.tools.length
      ? { tools: c.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.schema })) }
      : {}),
  };
}

/** The rule before: every media part a flat 2,000 tokens. */
const flatMedia = (parts: number) => parts * 2000;

interface Outcome {
  usage: number;
  before: number;
  after: number;
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

function summary(label: string, xs: Outcome[]): string {
  const row = (which: 'before' | 'after') => {
    const short = xs.filter((x) => x[which] < x.usage);
    const by = short.map((x) => x.usage / x[which]).sort((a, b) => a - b);
    const over = xs.map((x) => x[which] / x.usage).sort((a, b) => a - b);
    const q = (a: number[], p: number) => (a.length ? a[Math.min(a.length - 1, Math.floor(p * a.length))] : NaN);
    return (
      `${which.padEnd(6)} short ${String(short.length).padStart(4)}/${xs.length} ` +
      `(${((100 * short.length) / xs.length).toFixed(1).padStart(5)}%)` +
      (short.length ? `, bill/reserved median ${q(by, 0.5).toFixed(2)}x max ${by[by.length - 1].toFixed(2)}x` : '') +
      `; reserved/bill median ${q(over, 0.5).toFixed(2)}x`
    );
  };
  return `${label}\n  ${row('before')}\n  ${row('after')}`;
}

async function main(): Promise<void> {
  const emulator = await startEmulator();
  emulator.control.settings.providerTokens = true;
  process.env.EMULATOR_URL = emulator.url;
  const catalog = Catalog.load(path.join(projectRoot(), 'config', 'catalog.json'), KINDS);
  const chatModels = ['gpt-4o', 'gpt-4o-mini', 'o4-mini'];
  const claudeModels = ['claude-sonnet-4-6', 'claude-haiku-4-5'];
  const lines: string[] = [];
  try {
    for (const [scenario, make] of [
      ['conversations', conversation],
      ['vision', visionRequest],
    ] as const)
      for (const id of [...chatModels, ...claudeModels]) {
        const model = catalog.get(id)!;
        const out: Outcome[] = [];
        for (let i = 0; i < PER_MODEL; i++) {
          const c = make();
          if (chatModels.includes(id)) {
            const body = chatBody(model, c);
            const bytes = Buffer.byteLength(JSON.stringify(body));
            const u = (await post(`${emulator.url}/openai/v1/chat/completions`, body)).usage;
            const usage = usageCost(model.pricing, fromChatUsage(u));
            const after = estimateChatMaxCost(model, body, bytes).maxCost;
            const parts = countImages(body.messages).length;
            const before = tokensBoundCost(
              model.pricing,
              promptTokensBound(model, bytes, flatMedia(parts)),
              outputTokensBound(model, body),
            );
            out.push({ usage, before, after });
          } else {
            const body = messagesBody(model, c);
            const bytes = Buffer.byteLength(JSON.stringify(body));
            const u = (await post(`${emulator.url}/anthropic/v1/messages`, body, { 'x-api-key': 'k' })).usage;
            const usage = usageCost(model.pricing, fromAnthropicUsage(u));
            const parts = countImages(body.messages);
            const after = nativeBound(model, bytes, body.max_tokens, parts).maxCost;
            const before = tokensBoundCost(
              model.pricing,
              promptTokensBound(model, bytes, flatMedia(parts.length)),
              body.max_tokens,
            );
            out.push({ usage, before, after });
          }
        }
        lines.push(summary(`${scenario}, ${id} (${out.length} requests)`, out));
      }
  } finally {
    await emulator.close();
  }
  console.log(lines.join('\n'));
}

void main().catch((e) => {
  console.error(e);
  process.exit(1);
});
