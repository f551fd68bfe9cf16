import { parseCreateBody } from '../../../../src/jobs/batches/service';
import { batchTiming, DAY_MS, loadBatchSettings } from '../../../../src/jobs/batches/settings';
import { ApiError } from '../../../../src/errors';

/** POST /v1/batches's body as OpenAI takes it, and the BATCH_* settings. */

const body = (extra: Record<string, unknown> = {}) => ({
  input_file_id: 'file-1',
  endpoint: '/v1/chat/completions',
  completion_window: '24h',
  ...extra,
});

function refusal(input: unknown): { param: string | null; message: string; code: string | undefined } {
  try {
    parseCreateBody(input);
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(400);
    return { param: (e as ApiError).param, message: (e as ApiError).message, code: (e as ApiError).code ?? undefined };
  }
  throw new Error(`accepted: ${JSON.stringify(input)}`);
}

test('a create body is read with its metadata; output_expires_after is checked and not kept', () => {
  expect(parseCreateBody(body())).toEqual({
    input_file_id: 'file-1',
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
    metadata: null,
  });
  expect(
    parseCreateBody(body({ metadata: { team: 'a', ['x'.repeat(64)]: 'y'.repeat(512) }, output_expires_after: null }))
      .metadata,
  ).toEqual({ team: 'a', ['x'.repeat(64)]: 'y'.repeat(512) });
  expect(parseCreateBody(body({ output_expires_after: { anchor: 'created_at', seconds: 3600 } }))).not.toHaveProperty(
    'output_expires_after',
  );
  for (const endpoint of ['/v1/embeddings', '/v1/completions', '/v1/responses'])
    expect(parseCreateBody(body({ endpoint })).endpoint).toBe(endpoint);
});

test('each bad field is refused naming it', () => {
  expect(refusal([]).message).toBe('The body must be a JSON object.');
  expect(refusal(body({ model: 'x' }))).toMatchObject({ param: 'model', code: 'unknown_parameter' });
  for (const k of ['input_file_id', 'endpoint', 'completion_window']) {
    expect(refusal(body({ [k]: undefined }))).toMatchObject({ param: k, code: 'missing_required_parameter' });
    expect(refusal(body({ [k]: null })).param).toBe(k);
  }
  expect(refusal(body({ input_file_id: 7 })).param).toBe('input_file_id');
  // Message batches come through POST /v1/messages/batches only.
  expect(refusal(body({ endpoint: '/v1/messages' })).param).toBe('endpoint');
  expect(refusal(body({ completion_window: '48h' })).message).toBe(
    `Invalid 'completion_window' "48h": only "24h" is supported.`,
  );
  expect(refusal(body({ metadata: 'x' })).param).toBe('metadata');
  expect(refusal(body({ metadata: ['a'] })).param).toBe('metadata');
  const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
  expect(refusal(body({ metadata: many })).message).toBe("Invalid 'metadata': at most 16 keys.");
  expect(refusal(body({ metadata: { ['x'.repeat(65)]: 'v' } })).param).toBe('metadata');
  expect(refusal(body({ metadata: { k: 'y'.repeat(513) } })).param).toBe('metadata.k');
  expect(refusal(body({ metadata: { k: 5 } })).param).toBe('metadata.k');
  // jsonb holds neither NUL nor half a surrogate pair: the client's 400, not the database's 500.
  expect(refusal(body({ metadata: { k: 'a\u0000' } })).param).toBe('metadata.k');
  expect(refusal(body({ metadata: { ['\ud800']: 'v' } })).param).toBe('metadata');
  expect(refusal(body({ output_expires_after: { anchor: 'now', seconds: 1 } })).param).toBe('output_expires_after');
});

test('an unknown field with a huge name is quoted clipped', () => {
  const r = refusal(body({ ['k'.repeat(10_000)]: 1 }));
  expect(r.message.length).toBeLessThan(400);
});

test('batch settings: defaults, whole counts, and refusals of values that cannot work', () => {
  const d = loadBatchSettings({});
  expect(d).toEqual({
    concurrency: 16,
    accountChunks: 4,
    chunkLines: 500,
    keyLimitShare: 0.5,
    completionWindowMs: DAY_MS,
    activityRetryInitialMs: 1000,
    activityRetryMaxMs: 60_000,
    chunkTimeoutMs: 1_800_000,
    heartbeatMs: 30_000,
    activityTimeoutMs: 600_000,
    cancelWaitMs: 5000,
    nativePollMs: 30_000,
  });
  expect(loadBatchSettings({ BATCH_CONCURRENCY: '8.9', BATCH_CHUNK_LINES: '100' })).toMatchObject({
    concurrency: 8,
    chunkLines: 100,
  });
  expect(() => loadBatchSettings({ BATCH_KEY_LIMIT_SHARE: '1.5' })).toThrow('BATCH_KEY_LIMIT_SHARE must be at most 1');
  expect(() => loadBatchSettings({ BATCH_CONCURRENCY: '0' })).toThrow(/BATCH_CONCURRENCY must be a positive number/);
  expect(() => loadBatchSettings({ BATCH_HEARTBEAT_MS: 'soon' })).toThrow(/BATCH_HEARTBEAT_MS/);
  // A count that rounds down to none would run nothing, ever.
  expect(() => loadBatchSettings({ BATCH_CONCURRENCY: '0.5' })).toThrow(/BATCH_CONCURRENCY/);
  expect(() => loadBatchSettings({ BATCH_CHUNK_LINES: '0.9' })).toThrow(/BATCH_CHUNK_LINES/);
  expect(() => loadBatchSettings({ BATCH_ACCOUNT_CHUNKS: '0.1' })).toThrow(/BATCH_ACCOUNT_CHUNKS/);
});

test("a batch's timing is the settings' timing part, nothing else", () => {
  expect(batchTiming(loadBatchSettings({ BATCH_NATIVE_POLL_MS: '5' }))).toEqual({
    activityRetryInitialMs: 1000,
    activityRetryMaxMs: 60_000,
    chunkTimeoutMs: 1_800_000,
    heartbeatMs: 30_000,
    activityTimeoutMs: 600_000,
    nativePollMs: 5,
  });
});
