import { messagesToChat } from '../../../src/translate/client/messagesToChat';
import { responsesToChat } from '../../../src/translate/client/responsesToChat';
import { estimateInputTokens } from '../../../src/translate/tokenEstimate';

/**
 * Content the schemas let through (they check only the outer shapes) but that is malformed deeper down: the
 * translators never throw on it and never produce a non-integer token estimate. A seeded generator of junk values.
 */

function rng(seed: number) {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0xffffffff;
  };
}

function junk(r: () => number, depth = 0): unknown {
  const k = Math.floor(r() * (depth > 3 ? 6 : 9));
  const types = [
    'text',
    'image',
    'tool_use',
    'tool_result',
    'thinking',
    'document',
    'input_text',
    'input_image',
    'function_call',
    'function_call_output',
    'custom_tool_call',
    'message',
    'namespace',
    'additional_tools',
    'function',
    'custom',
  ];
  switch (k) {
    case 0:
      return null;
    case 1:
      return Math.floor(r() * 100);
    case 2:
      return 'str';
    case 3:
      return r() > 0.5;
    case 4:
      return undefined;
    case 5:
      return {};
    case 6:
      return Array.from({ length: Math.floor(r() * 4) }, () => junk(r, depth + 1));
    default: {
      const o: Record<string, unknown> = { type: types[Math.floor(r() * types.length)] };
      for (const f of [
        'text',
        'content',
        'source',
        'input',
        'name',
        'id',
        'tool_use_id',
        'role',
        'output',
        'arguments',
        'tools',
        'image_url',
        'call_id',
        'namespace',
      ])
        if (r() > 0.6) o[f] = junk(r, depth + 1);
      return o;
    }
  }
}

test('messagesToChat, responsesToChat and the estimate survive junk content', () => {
  const r = rng(12345);
  for (let i = 0; i < 2000; i++) {
    const content = r() > 0.3 ? [junk(r), junk(r), junk(r)].filter((x) => x && typeof x === 'object') : 'plain';
    const req: any = {
      model: 'm',
      max_tokens: 10,
      system: r() > 0.5 ? [junk(r)].filter((x) => x && typeof x === 'object') : 'sys',
      messages: [{ role: ['user', 'assistant', 'system'][i % 3], content }],
      tools: r() > 0.5 ? [{ name: 'a', input_schema: junk(r), type: r() > 0.8 ? 'custom' : undefined }] : undefined,
    };
    expect(() => messagesToChat(req, { upstreamModel: 'u' })).not.toThrow();
    expect(Number.isInteger(estimateInputTokens(req))).toBe(true);
    const rreq: any = {
      model: 'm',
      input: [junk(r), junk(r), junk(r)].filter((x) => x && typeof x === 'object'),
      tools: [junk(r)].filter((x) => x && typeof x === 'object'),
    };
    expect(() => responsesToChat(rreq, { upstreamModel: 'u' })).not.toThrow();
  }
});
