import type Koa from 'koa';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';
import { embed } from './openai';
import {
  DROP_MIDSTREAM_MARKER,
  hash,
  pieces,
  readJson,
  sampleFor,
  tokens,
  usageMarkers,
  writeSse,
  type Json,
} from './replyKit';

/**
 * Emulated Gemini API upstream under /gemini/v1beta: POST models/{model}:generateContent, :streamGenerateContent
 * (`?alt=sse`, else a JSON array), :countTokens, :embedContent and :batchEmbedContents. Deterministic, like the
 * Anthropic emulator: with function declarations it calls the first one (or the one ANY mode allows) with arguments
 * valid against its schema, unless the turn answers a call; otherwise "You said: ..." ("The tool returned: ..."
 * after a function response), as a JSON object in JSON mode, cut at a stop sequence or at maxOutputTokens.
 * includeThoughts adds a thought part.
 * Usage: ceil(chars/4) of the request's text, `[cache_read=N]` markers as cached tokens.
 */

const BASE = '/gemini/v1beta';

function googleError(ctx: Koa.Context, status: number, message: string, code: string): void {
  ctx.status = status;
  ctx.body = { error: { code: status, message, status: code } };
}

function partsText(parts: unknown): string {
  if (!Array.isArray(parts)) return '';
  return parts
    .map((p: Json) =>
      typeof p?.text === 'string'
        ? p.text
        : p?.functionCall
          ? JSON.stringify(p.functionCall)
          : p?.functionResponse
            ? JSON.stringify(p.functionResponse)
            : '',
    )
    .join('');
}

/** The request's text (system, contents, tools), which its prompt tokens count. */
function promptText(body: Json): string {
  let s =
    typeof body.systemInstruction === 'string' ? body.systemInstruction : partsText(body.systemInstruction?.parts);
  for (const c of body.contents) s += partsText(c?.parts);
  if (Array.isArray(body.tools)) s += JSON.stringify(body.tools);
  return s;
}

/** OpenAPI `parameters` (upper-case types) read as JSON Schema for the sample arguments. */
function lowerTypes(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(lowerTypes);
  if (!s || typeof s !== 'object') return s;
  return Object.fromEntries(
    Object.entries(s).map(([k, v]) => [k, k === 'type' && typeof v === 'string' ? v.toLowerCase() : lowerTypes(v)]),
  );
}

interface Reply {
  thought: string | null;
  text: string;
  call: { id: string; name: string; args: unknown } | null;
  finish: string;
  prompt: number;
  output: number;
  thoughts: number;
  cached: number;
}

function reply(body: Json): Reply {
  const contents: Json[] = body.contents;
  const last = contents[contents.length - 1] ?? {};
  const parts: Json[] = Array.isArray(last.parts) ? last.parts : [];
  const response = parts.find((p) => p?.functionResponse)?.functionResponse;
  const said = response
    ? typeof response.response?.output === 'string'
      ? response.response.output
      : JSON.stringify(response.response ?? {})
    : parts.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('');
  const g: Json = body.generationConfig ?? {};
  const thought =
    g.thinkingConfig?.includeThoughts === true ? `The user wrote ${said.length} characters; answer plainly.` : null;
  const decls: Json[] = (Array.isArray(body.tools) ? body.tools : []).flatMap((t: Json) =>
    Array.isArray(t?.functionDeclarations) ? t.functionDeclarations : [],
  );
  const fc = body.toolConfig?.functionCallingConfig ?? {};
  let call: Reply['call'] = null;
  let text = '';
  let finish = 'STOP';
  if (decls.length && fc.mode !== 'NONE' && !response) {
    const allowed: string[] = Array.isArray(fc.allowedFunctionNames) ? fc.allowedFunctionNames : [];
    const d = decls.find((x) => allowed.includes(x.name)) ?? decls[0];
    const args = sampleFor(d.parametersJsonSchema ?? lowerTypes(d.parameters) ?? { type: 'object' }) ?? {};
    call = { id: `call_emu${hash(d.name + JSON.stringify(args) + said)}`, name: d.name, args };
  } else {
    text = response ? `The tool returned: ${said}` : `You said: ${said}`;
    if (g.responseMimeType === 'application/json') text = JSON.stringify({ reply: text });
    for (const s of Array.isArray(g.stopSequences) ? g.stopSequences : []) {
      const i = typeof s === 'string' && s ? text.indexOf(s) : -1;
      if (i >= 0) {
        text = text.slice(0, i);
        break;
      }
    }
    if (Number.isInteger(g.maxOutputTokens) && tokens(text.length) > g.maxOutputTokens) {
      text = text.slice(0, g.maxOutputTokens * 4);
      finish = 'MAX_TOKENS';
    }
  }
  const cached = usageMarkers(promptText(body)).cacheRead;
  const output = tokens(text.length + (call ? call.name.length + JSON.stringify(call.args).length : 0));
  return {
    thought,
    text,
    call,
    finish,
    prompt: tokens(promptText(body).length) + cached,
    output,
    thoughts: thought ? tokens(thought.length) : 0,
    cached,
  };
}

function usage(r: Reply, final: boolean): Json {
  const out = final ? r.output : 0;
  const thoughts = final ? r.thoughts : 0;
  return {
    promptTokenCount: r.prompt,
    candidatesTokenCount: out,
    totalTokenCount: r.prompt + out + thoughts,
    ...(r.cached ? { cachedContentTokenCount: r.cached } : {}),
    ...(thoughts ? { thoughtsTokenCount: thoughts } : {}),
  };
}

function validate(ctx: Koa.Context, body: Json | null): body is Json {
  if (!body) {
    googleError(ctx, 400, 'Invalid JSON payload received.', 'INVALID_ARGUMENT');
    return false;
  }
  if (!Array.isArray(body.contents) || body.contents.length === 0) {
    googleError(ctx, 400, 'contents is not specified', 'INVALID_ARGUMENT');
    return false;
  }
  return true;
}

/** Vectors as Google's embed API gives them: a deterministic unit vector of the text, no usage reported. */
function embedContent(ctx: Koa.Context, model: string, method: string, body: Json | null): void {
  if (!body) return googleError(ctx, 400, 'Invalid JSON payload received.', 'INVALID_ARGUMENT');
  const batch = method === 'batchEmbedContents';
  const requests: Json[] = batch ? body.requests : [body];
  if (!Array.isArray(requests) || requests.length === 0)
    return googleError(ctx, 400, 'requests is not specified', 'INVALID_ARGUMENT');
  const native = /gemini-embedding/.test(model) ? 3072 : 768;
  const values: number[][] = [];
  for (const [i, r] of requests.entries()) {
    if (batch && r?.model !== `models/${model}`)
      return googleError(ctx, 400, `requests[${i}].model must be models/${model}.`, 'INVALID_ARGUMENT');
    const text = Array.isArray(r?.content?.parts) ? partsText(r.content.parts) : '';
    if (!text) return googleError(ctx, 400, 'The content has no text to embed.', 'INVALID_ARGUMENT');
    const dims = r.outputDimensionality ?? native;
    if (!Number.isInteger(dims) || dims < 1 || dims > native)
      return googleError(ctx, 400, `outputDimensionality must be between 1 and ${native}.`, 'INVALID_ARGUMENT');
    values.push(Array.from(embed(text, dims)));
  }
  ctx.body = batch ? { embeddings: values.map((v) => ({ values: v })) } : { embedding: { values: values[0] } };
}

/** The models/{model}:{method} handler (`ctx.params.spec` is "{model}:{method}"), also Gemini on Vertex. */
export function geminiHandler(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const spec = String(ctx.params.spec);
    const i = spec.lastIndexOf(':');
    const model = spec.slice(0, i);
    const method = spec.slice(i + 1);
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (method === 'countTokens') {
      const req = body?.generateContentRequest ?? body;
      if (!validate(ctx, req)) return;
      ctx.body = { totalTokens: tokens(promptText(req).length) };
      return;
    }
    if (method === 'embedContent' || method === 'batchEmbedContents') return embedContent(ctx, model, method, body);
    if (method !== 'generateContent' && method !== 'streamGenerateContent')
      return googleError(ctx, 404, `Method ${method} not found.`, 'NOT_FOUND');
    if (!validate(ctx, body)) return;
    const r = reply(body);
    const responseId = `emu${hash(JSON.stringify(body.contents).slice(0, 2000) + Date.now() + Math.random())}`;
    const response = (parts: Json[], final: boolean) => ({
      candidates: [{ content: { role: 'model', parts }, ...(final ? { finishReason: r.finish } : {}), index: 0 }],
      usageMetadata: usage(r, final),
      modelVersion: model,
      responseId,
    });
    const callPart = r.call ? [{ functionCall: r.call }] : [];
    if (method === 'generateContent') {
      const parts: Json[] = [
        ...(r.thought ? [{ text: r.thought, thought: true }] : []),
        ...(r.text ? [{ text: r.text }] : []),
        ...callPart,
      ];
      ctx.body = response(parts, true);
      return;
    }
    const items: Json[] = [];
    if (r.thought) items.push(response([{ text: r.thought, thought: true }], false));
    const ps = pieces(r.text);
    ps.forEach((p, k) => items.push(response([{ text: p }], k === ps.length - 1 && !r.call)));
    if (r.call || !ps.length) items.push(response(callPart, true));
    if (ctx.query.alt === 'sse') {
      const events = items.map((it) => `data: ${JSON.stringify(it)}\r\n\r\n`);
      await writeSse(ctx, ctl, 'gemini', events, {
        dropMidway: JSON.stringify(body.contents).includes(DROP_MIDSTREAM_MARKER),
      });
      return;
    }
    ctx.type = 'application/json';
    ctx.body = `[${items.map((it) => JSON.stringify(it)).join('\n,\r\n')}]`;
  };
}

export const mountGemini: Mount = (router, ctl) => {
  router.post(`${BASE}/models/:spec`, geminiHandler(ctl));
};
