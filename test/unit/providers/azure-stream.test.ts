import { AzurePromptFilterDrop, mapAzureError } from '../../../src/providers/azure-openai/adapter';
import type { StreamSink } from '../../../src/sse/streamSink';
import { Catalog, type CatalogFile } from '../../../src/catalog/catalog';
import { redactorFor } from '../../../src/catalog/redact';
import { KINDS } from '../../../src/providers/kinds';

const chatPrice = { inputPer1MTokens: 1, outputPer1MTokens: 1 };

const PROMPT_FILTER =
  'data: {"choices":[],"created":0,"id":"","model":"","object":"",' +
  '"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}\n\n';
const CHUNK = 'data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n';
const DONE = 'data: [DONE]\n\n';

function relay(pieces: string[]): string {
  const got: Buffer[] = [];
  const sink: StreamSink = { start: () => {}, data: (c) => (got.push(c), true), end: () => {}, fail: () => {} };
  const drop = new AzurePromptFilterDrop(sink);
  drop.start(200, {});
  for (const p of pieces) drop.data(Buffer.from(p), () => {});
  drop.end();
  return Buffer.concat(got).toString();
}

test("Azure's opening prompt-filter event is dropped wherever the network splits it; the rest passes as sent", () => {
  const wire = PROMPT_FILTER + CHUNK + DONE;
  for (const size of [1, 7, 64, wire.length]) {
    const pieces: string[] = [];
    for (let i = 0; i < wire.length; i += size) pieces.push(wire.slice(i, i + size));
    expect(relay(pieces)).toBe(CHUNK + DONE);
  }
  // A stream without it (or starting with anything else) is untouched, as is a short one that never ends an event.
  expect(relay([CHUNK, DONE])).toBe(CHUNK + DONE);
  expect(relay(['data: {"choices":[],"usage":{"prompt_tokens":1},"prompt_filter_results":[]}\n\n'])).toContain('usage');
  expect(relay(['data: {"choi'])).toBe('data: {"choi');
});

test('a content-filter refusal names the categories in our words; other errors map as OpenAI', () => {
  const body = JSON.stringify({
    error: {
      message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
      type: null,
      param: 'prompt',
      code: 'content_filter',
      status: 400,
      innererror: {
        code: 'ResponsibleAIPolicyViolation',
        content_filter_result: {
          hate: { filtered: true, severity: 'high' },
          jailbreak: { filtered: true, detected: true },
          sexual: { filtered: false, severity: 'safe' },
        },
      },
    },
  });
  const e = mapAzureError(400, body, '');
  expect(e).toMatchObject({ status: 400, code: 'content_filter', param: 'prompt', type: 'invalid_request_error' });
  expect(e.message).toBe("The request was refused by the upstream provider's content filter (hate (high), jailbreak).");
  expect(mapAzureError(429, '{"error":{"code":"429","message":"Rate limit"}}', '6')).toMatchObject({
    status: 429,
    headers: { 'retry-after': '6' },
  });
  expect(mapAzureError(400, '{"error":{"code":"BadRequest","message":"bad"}}', '')).toMatchObject({
    status: 400,
    code: 'BadRequest',
  });
});

test('Azure credentials never in the catalog: no key field, no key in the URL, apiKeyEnv a variable name', () => {
  const load = (provider: Record<string, unknown>) => () =>
    new Catalog(
      {
        providers: { az: { kind: 'azure-openai', baseUrl: 'https://contoso.openai.azure.com', ...provider } },
        models: [{ id: 'm', mode: 'chat', provider: 'az', upstreamModel: 'dep', pricing: chatPrice }],
      } as unknown as CatalogFile,
      KINDS,
    );
  expect(load({ apiKeyEnv: 'AZURE_OPENAI_API_KEY', apiVersion: '2024-10-21' })).not.toThrow();
  expect(load({ apiKey: 'abc123' })).toThrow(/invalid catalog/);
  expect(load({ clientSecret: 'abc123' })).toThrow(/invalid catalog/);
  expect(load({ apiKeyEnv: '0123456789abcdef0123456789abcdef' })).toThrow(/invalid catalog/);
  expect(load({ baseUrl: 'https://contoso.openai.azure.com/?api-key=abc123' })).toThrow(/carries credentials/);
  expect(load({ apiVersion: 'latest' })).toThrow(/invalid catalog/);
});

test("an Azure resource's name is redacted from upstream texts like its host", () => {
  const catalog = new Catalog(
    {
      providers: {
        az: { kind: 'azure-openai', baseUrl: 'https://contoso-east.openai.azure.com', apiKeyEnv: 'AZ_KEY' },
      },
      models: [{ id: 'gpt-4o', mode: 'chat', provider: 'az', upstreamModel: 'my-gpt4o-dep', pricing: chatPrice }],
    } as unknown as CatalogFile,
    KINDS,
  );
  const redact = redactorFor(catalog);
  expect(redact('Resource contoso-east has no deployment my-gpt4o-dep (https://contoso-east.openai.azure.com).')).toBe(
    'Resource the upstream has no deployment gpt-4o (the upstream).',
  );
});
