import { imageSize, mediaParts, mediaTokens, partTokens, OTHER_PART_TOKENS } from '../../../src/billing/imageTokens';
import { estimateChatMaxCost } from '../../../src/billing/pricing';
import { estimateInputTokens } from '../../../src/translate/tokenEstimate';
import type { ModelConfig } from '../../../src/catalog/catalog';
import { pngHeader } from '../../../bench/lib/imageHeaders';

/** Image tokens in the funds bound, by each provider's documented rule and the image's own header. */

const model = (upstreamModel: string): ModelConfig =>
  ({
    id: upstreamModel,
    upstreamModel,
    mode: 'chat',
    provider: 'p',
    pricing: { inputPer1MTokens: 1_000_000 },
  }) as ModelConfig;

const png = pngHeader;
/** A JPEG with an APP1 segment before its SOF0 (the size comes after the metadata). */
function jpeg(w: number, h: number): Buffer {
  const app1 = Buffer.concat([Buffer.from([0xff, 0xe1, 0x00, 0x10]), Buffer.alloc(14)]);
  const sof = Buffer.from([0xff, 0xc0, 0x00, 0x11, 0x08, h >> 8, h & 0xff, w >> 8, w & 0xff, 3]);
  return Buffer.concat([Buffer.from([0xff, 0xd8]), app1, sof, Buffer.alloc(20)]);
}
const dataUrl = (b: Buffer) => `data:image/png;base64,${b.toString('base64')}`;

test('sizes are read from PNG and JPEG headers', () => {
  expect(imageSize(png(1024, 768))).toEqual({ width: 1024, height: 768 });
  expect(imageSize(jpeg(640, 480))).toEqual({ width: 640, height: 480 });
  expect(imageSize(Buffer.from('not an image'))).toBeNull();
});

test("OpenAI's tile rule: the documented examples, gpt-4o-mini's own prices, low detail at the base", () => {
  const at = (m: string, w: number, h: number, detail: 'low' | 'high' | 'auto' = 'high') =>
    partTokens(model(m), { kind: 'image', detail, width: w, height: h });
  expect(at('gpt-4o', 1024, 1024)).toBe(765);
  expect(at('gpt-4o', 2048, 4096)).toBe(1105);
  expect(at('gpt-4o', 4096, 8192, 'low')).toBe(85);
  expect(at('gpt-4o-mini', 1024, 1024)).toBe(2833 + 4 * 5667);
  // By URL, the size unknown: the worst the rule allows (8 tiles).
  expect(partTokens(model('gpt-4o'), { kind: 'image', detail: 'auto' })).toBe(85 + 8 * 170);
});

test("OpenAI's patch rule and Anthropic's and Gemini's", () => {
  expect(partTokens(model('gpt-4.1-mini'), { kind: 'image', detail: 'high', width: 1024, height: 1024 })).toBe(
    Math.ceil(1024 * 1.62),
  );
  expect(partTokens(model('gpt-4.1-mini'), { kind: 'image', detail: 'high', width: 1800, height: 2400 })).toBe(
    Math.ceil(1452 * 1.62),
  );
  expect(partTokens(model('claude-sonnet-4-5'), { kind: 'image', detail: 'auto', width: 1092, height: 1092 })).toBe(
    Math.ceil((1092 * 1092) / 750),
  );
  expect(partTokens(model('claude-sonnet-4-5'), { kind: 'image', detail: 'auto', width: 4000, height: 3000 })).toBe(
    1600,
  );
  expect(partTokens(model('gemini-2.5-flash'), { kind: 'image', detail: 'auto', width: 300, height: 300 })).toBe(258);
  expect(partTokens(model('some-local-model'), { kind: 'image', detail: 'auto' })).toBe(OTHER_PART_TOKENS);
});

test('media parts of chat, Anthropic and Responses shapes, with their detail and inline size', () => {
  const parts = mediaParts([
    {
      role: 'user',
      content: [
        { type: 'text', text: 'hi' },
        { type: 'image_url', image_url: { url: dataUrl(png(512, 512)), detail: 'low' } },
        { type: 'image_url', image_url: { url: 'https://example.com/x.png' } },
        {
          type: 'image',
          source: { type: 'base64', media_type: 'image/jpeg', data: jpeg(800, 600).toString('base64') },
        },
        { type: 'tool_result', content: [{ type: 'image', source: { type: 'url', url: 'https://e/x.png' } }] },
        { type: 'input_image', image_url: dataUrl(png(100, 200)), detail: 'high' },
        { type: 'input_audio', input_audio: { data: '', format: 'wav' } },
      ],
    },
  ]);
  expect(parts).toEqual([
    { kind: 'image', detail: 'low', width: 512, height: 512 },
    { kind: 'image', detail: 'auto' },
    { kind: 'image', detail: 'auto', width: 800, height: 600 },
    { kind: 'image', detail: 'auto' },
    { kind: 'image', detail: 'high', width: 100, height: 200 },
    { kind: 'other', detail: 'auto' },
  ]);
  expect(mediaTokens(model('gpt-4o'), 2)).toBe(2 * (85 + 8 * 170));
});

test('the chat funds bound adds each image at its rule: gpt-4o-mini by URL far above the old flat 2000', () => {
  const body = {
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://e/x.png' } }] }],
  };
  const bytes = Buffer.byteLength(JSON.stringify(body));
  expect(estimateChatMaxCost(model('gpt-4o-mini'), body).promptTokens).toBe(bytes + 2833 + 8 * 5667);
});

test("count_tokens' estimate counts each image at the rule of the model's provider", () => {
  const req = {
    messages: [
      {
        role: 'user' as const,
        content: [
          { type: 'text' as const, text: 'what is this' },
          { type: 'image' as const, source: { type: 'url' as const, url: 'https://e/x.png' } },
        ],
      },
    ],
  } as unknown as Parameters<typeof estimateInputTokens>[0];
  const text = Math.ceil('what is this'.length / 4) + 3;
  expect(estimateInputTokens(req)).toBe(text + 1600);
  expect(estimateInputTokens(req, model('gpt-4o-mini'))).toBe(text + 2833 + 8 * 5667);
  expect(estimateInputTokens(req, model('gpt-4o'))).toBe(text + 85 + 8 * 170);
});
