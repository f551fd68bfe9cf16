import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  InvokeModelCommand,
  InvokeModelWithResponseStreamCommand,
} from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { startEmulator, type Emulator } from '../../emulator/server';

/**
 * The emulated Bedrock runtime, checked with the AWS SDK as its client: SigV4 (service, region, access key), the
 * Claude Messages body on InvokeModel, event-stream frames the SDK decodes, Converse and ConverseStream, and errors
 * the SDK maps to its modelled exceptions.
 */

let emu: Emulator;
const creds = { accessKeyId: 'AKIAEMULATOR00000000', secretAccessKey: 'emulator-secret' };
const client = (over: Partial<{ region: string; accessKeyId: string }> = {}) =>
  new BedrockRuntimeClient({
    region: over.region ?? 'us-east-1',
    endpoint: `${emu.url}/bedrock`,
    credentials: { ...creds, ...(over.accessKeyId ? { accessKeyId: over.accessKeyId } : {}) },
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler(), // HTTP/1.1: the emulator speaks no cleartext HTTP/2
  });
const MODEL = 'us.anthropic.claude-sonnet-4-6-v1:0';
const claudeBody = (extra: object = {}) =>
  JSON.stringify({
    anthropic_version: 'bedrock-2023-05-31',
    max_tokens: 100,
    messages: [{ role: 'user', content: 'hello bedrock' }],
    ...extra,
  });

beforeAll(async () => {
  emu = await startEmulator();
});
afterAll(() => emu.close());

test('InvokeModel answers a Claude Messages body, signed with SigV4 for bedrock in the region', async () => {
  const out = await client().send(new InvokeModelCommand({ modelId: MODEL, body: claudeBody() }));
  const msg = JSON.parse(Buffer.from(out.body).toString('utf8'));
  expect(msg).toMatchObject({ type: 'message', content: [{ type: 'text', text: 'You said: hello bedrock' }] });
  expect(msg.usage.input_tokens).toBeGreaterThan(0);
  const seen = emu.control.requests.at(-1)!;
  expect(seen.path).toBe(`/bedrock/model/${encodeURIComponent(MODEL)}/invoke`);
  expect(String(seen.headers.authorization)).toMatch(
    /^AWS4-HMAC-SHA256 Credential=AKIAEMULATOR00000000\/\d{8}\/us-east-1\/bedrock\/aws4_request/,
  );
});

test('a body with a model field, or without anthropic_version, is a ValidationException', async () => {
  const bad = client().send(new InvokeModelCommand({ modelId: MODEL, body: claudeBody({ model: 'x' }) }));
  await expect(bad).rejects.toMatchObject({ name: 'ValidationException', $metadata: { httpStatusCode: 400 } });
  const noVersion = JSON.stringify({ max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
  await expect(client().send(new InvokeModelCommand({ modelId: MODEL, body: noVersion }))).rejects.toMatchObject({
    name: 'ValidationException',
  });
});

test('a signature for another region or an unknown key is refused as AWS refuses it', async () => {
  await expect(
    client({ region: 'eu-west-1' }).send(new InvokeModelCommand({ modelId: MODEL, body: claudeBody() })),
  ).rejects.toMatchObject({ $metadata: { httpStatusCode: 403 } });
  await expect(
    client({ accessKeyId: 'AKIAUNKNOWN000000000' }).send(
      new InvokeModelCommand({ modelId: MODEL, body: claudeBody() }),
    ),
  ).rejects.toMatchObject({ name: 'UnrecognizedClientException', $metadata: { httpStatusCode: 403 } });
});

test('InvokeModelWithResponseStream frames Anthropic events the SDK decodes, metrics on the last', async () => {
  const out = await client().send(new InvokeModelWithResponseStreamCommand({ modelId: MODEL, body: claudeBody() }));
  const events: any[] = [];
  for await (const part of out.body!) events.push(JSON.parse(Buffer.from(part.chunk!.bytes!).toString('utf8')));
  expect(events.map((e) => e.type)).toEqual(
    expect.arrayContaining(['message_start', 'content_block_delta', 'message_delta', 'message_stop']),
  );
  const text = events
    .filter((e) => e.type === 'content_block_delta')
    .map((e) => e.delta.text)
    .join('');
  expect(text).toBe('You said: hello bedrock');
  expect(events.at(-1)['amazon-bedrock-invocationMetrics'].outputTokenCount).toBeGreaterThan(0);
});

test('Converse and ConverseStream answer with usage, cache fields included', async () => {
  const input = {
    modelId: 'amazon.nova-pro-v1:0',
    messages: [{ role: 'user' as const, content: [{ text: 'hi nova [cache_read=7]' }] }],
    inferenceConfig: { maxTokens: 50 },
  };
  const out = await client().send(new ConverseCommand(input));
  expect(out.output?.message?.content?.[0]?.text).toBe('You said: hi nova [cache_read=7]');
  expect(out.usage).toMatchObject({ cacheReadInputTokens: 7 });
  expect(out.stopReason).toBe('end_turn');
  const s = await client().send(new ConverseStreamCommand(input));
  let text = '';
  let usage: any;
  for await (const ev of s.stream!) {
    if (ev.contentBlockDelta?.delta?.text) text += ev.contentBlockDelta.delta.text;
    if (ev.metadata) usage = ev.metadata.usage;
  }
  expect(text).toBe('You said: hi nova [cache_read=7]');
  expect(usage.cacheReadInputTokens).toBe(7);
});

test('an injected fault reaches the SDK as its modelled exception', async () => {
  emu.control.addFault({ match: '/bedrock/', status: 429, times: 1 });
  await expect(client().send(new InvokeModelCommand({ modelId: MODEL, body: claudeBody() }))).rejects.toMatchObject({
    name: 'ThrottlingException',
    $metadata: { httpStatusCode: 429 },
  });
});
