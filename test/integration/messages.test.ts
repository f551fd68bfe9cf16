import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { eventually } from '../support/eventually';
import { streamStats } from '../../emulator/replyKit';
import { openaiEmulatorStats } from '../../emulator/openai';
import { estimateInputTokens } from '../../src/translate/tokenEstimate';
import { shortenToolName } from '../../src/translate/toolNames';
import { usageRows as usageRowsOf } from '../support/records';

/**
 * POST /v1/messages and /v1/messages/count_tokens through the real gateway with the official Anthropic SDK, on
 * the native path (claude-sonnet-4-6 -> emulated Anthropic upstream), the translated path (gpt-4o-mini ->
 * emulated chat completions upstream) and the bridged path (gpt-5-codex -> emulated Responses upstream), plus
 * replayed Claude-Code-shaped requests (reference section 5).
 */

let gw: TestGateway;
let key: string;
let accountId: string;
beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  ({ key, accountId } = await gw.account(5_000_000));
});
afterAll(() => gw.close());
afterEach(() => gw.emulator.control.reset());

const NATIVE = 'claude-sonnet-4-6';
const TRANSLATED = 'gpt-4o-mini';
/** A Responses-only model: messages -> chat -> the upstream's /responses and back. */
const BRIDGED = 'gpt-5-codex';
const paths = [
  ['native', NATIVE],
  ['translated', TRANSLATED],
  ['bridged to Responses', BRIDGED],
] as const;
const client = (k = key) => new Anthropic({ apiKey: k, baseURL: gw.url, maxRetries: 0 });
const weather: Anthropic.Tool = {
  name: 'get_weather',
  description: 'Current weather',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

function upstreamCalls(path: string) {
  return gw.emulator.control.requests.filter((r) => r.path === path);
}

/**
 * Checks the Anthropic stream grammar: message_start, properly nested blocks with increasing index, message_delta,
 * message_stop.
 */
function assertEventOrder(events: { type: string; index?: number }[]): void {
  const types = events.map((e) => e.type).filter((t) => t !== 'ping');
  expect(types[0]).toBe('message_start');
  expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
  let open: number | null = null;
  let next = 0;
  for (const e of events.slice(1, -2)) {
    if (e.type === 'ping') continue;
    if (e.type === 'content_block_start') {
      expect(open).toBeNull();
      expect(e.index).toBe(next);
      open = next++;
    } else if (e.type === 'content_block_delta') expect(e.index).toBe(open);
    else if (e.type === 'content_block_stop') {
      expect(e.index).toBe(open);
      open = null;
    } else throw new Error(`unexpected ${e.type} inside the message`);
  }
  expect(open).toBeNull();
}

/** Reads a raw SSE response into events (type + parsed data). */
async function readSse(res: Response): Promise<{ event: string; data: any }[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((b) => b.trim() && !b.startsWith(':'))
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? '';
      const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null');
      return { event, data };
    });
}

describe.each(paths)('%s path', (_name, model) => {
  test('messages.create answers in the Anthropic shape with usage', async () => {
    const m = await client().messages.create({
      model,
      max_tokens: 200,
      messages: [{ role: 'user', content: 'hello there' }],
    });
    expect(m.type).toBe('message');
    expect(m.role).toBe('assistant');
    expect(m.content).toEqual([{ type: 'text', text: 'You said: hello there' }]);
    expect(m.stop_reason).toBe('end_turn');
    expect(m.usage.input_tokens).toBeGreaterThan(0);
    expect(m.usage.output_tokens).toBeGreaterThan(0);
  });

  test('messages.stream with a tool call, then the tool result', async () => {
    const events: { type: string; index?: number }[] = [];
    const stream = client().messages.stream({
      model,
      max_tokens: 200,
      tools: [weather],
      messages: [{ role: 'user', content: 'Weather in Hanoi?' }],
    });
    stream.on('streamEvent', (e) => events.push(e as { type: string; index?: number }));
    const final = await stream.finalMessage();
    assertEventOrder(events);
    const use = final.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { city: 'example' } });
    expect(use.id).toMatch(/^[a-zA-Z0-9_-]+$/);
    expect(events.some((e) => e.type === 'content_block_delta' && (e as any).delta.type === 'input_json_delta')).toBe(
      true,
    );
    expect(final.stop_reason).toBe('tool_use');
    expect(final.usage.output_tokens).toBeGreaterThan(0);

    const next = await client()
      .messages.stream({
        model,
        max_tokens: 200,
        tools: [weather],
        messages: [
          { role: 'user', content: 'Weather in Hanoi?' },
          { role: 'assistant', content: final.content },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '31C and humid' }] },
        ],
      })
      .finalMessage();
    expect(next.stop_reason).toBe('end_turn');
    expect(next.content).toEqual([{ type: 'text', text: 'The tool returned: 31C and humid' }]);
  });

  test('count_tokens answers', async () => {
    const params = {
      model,
      system: 'Be brief.',
      messages: [{ role: 'user' as const, content: 'x'.repeat(400) }],
      tools: [weather],
    };
    const r = await client().messages.countTokens(params);
    if (model === NATIVE) {
      expect(upstreamCalls('/anthropic/v1/messages/count_tokens')).toHaveLength(1);
      expect(r.input_tokens).toBeGreaterThan(100);
    } else {
      expect(r.input_tokens).toBe(estimateInputTokens(params as unknown as Parameters<typeof estimateInputTokens>[0]));
    }
  });

  test('a Claude-Code-shaped request (system last, adaptive thinking, deferred tools, 150 KB) streams', async () => {
    const body = claudeCodeBody(model, 150 * 1024);
    expect(JSON.stringify(body).length).toBeGreaterThan(150 * 1024);
    const res = await fetch(`${gw.url}/v1/messages?beta=true`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': key,
        'anthropic-version': '2023-06-01',
        'anthropic-beta': [
          'claude-code-20250219',
          'interleaved-thinking-2025-05-14',
          'context-management-2025-06-27',
          'effort-2025-11-24',
          'advanced-tool-use-2025-11-20',
        ].join(','),
        'x-app': 'cli',
        'user-agent': 'claude-cli/2.1.330 (external, cli)',
      },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await readSse(res);
    for (const e of events) expect(e.data.type).toBe(e.event);
    assertEventOrder(events.map((e) => e.data));
    const delta = events.find((e) => e.event === 'message_delta')!.data;
    expect(delta.usage.output_tokens).toBeGreaterThan(0);
    expect(['tool_use', 'end_turn']).toContain(delta.delta.stop_reason);
    if (model === NATIVE) {
      const up = upstreamCalls('/anthropic/v1/messages')[0];
      expect(up.headers['anthropic-beta']).toContain('context-management-2025-06-27');
      expect(up.headers['anthropic-version']).toBe('2023-06-01');
      expect(up.body).toMatchObject({
        model: 'claude-sonnet-4-6',
        context_management: body.context_management,
        output_config: { effort: 'high' },
      });
      // Native: thinking was enabled, so the stream carries a thinking block.
      expect(events.some((e) => e.data.type === 'content_block_delta' && e.data.delta.type === 'thinking_delta')).toBe(
        true,
      );
    } else if (model === BRIDGED) {
      const up = upstreamCalls('/openai/v1/responses')[0].body as any;
      expect(up).toMatchObject({
        model: 'gpt-5-codex',
        store: false,
        stream: true,
        reasoning: { effort: 'high' },
        max_output_tokens: 64000,
      });
      expect(up.instructions).toContain("You are Claude Code, Anthropic's official CLI for Claude.");
      expect(up.input[up.input.length - 1]).toEqual({
        type: 'message',
        role: 'developer',
        content: [{ type: 'input_text', text: 'Respond concisely.' }],
      });
      expect(up.tools.map((t: any) => t.name)).toEqual([
        'Bash',
        shortenToolName('mcp__playwright__browser_take_screenshot_of_the_current_page_with_options'),
      ]);
      const raw = JSON.stringify(up);
      for (const s of ['cache_control', 'defer_loading', 'context_management', 'output_config'])
        expect(raw).not.toContain(s);
      // The upstream's reasoning summary arrives as a thinking block.
      expect(events.some((e) => e.data.type === 'content_block_delta' && e.data.delta.type === 'thinking_delta')).toBe(
        true,
      );
    } else {
      const up = upstreamCalls('/openai/v1/chat/completions')[0].body as any;
      expect(up.reasoning_effort).toBeUndefined(); // gpt-4o-mini is not a reasoning model: OpenAI would refuse it
      expect(up.messages[0].role).toBe('system');
      expect(up.messages[up.messages.length - 1]).toEqual({ role: 'system', content: 'Respond concisely.' });
      expect(up.stream_options).toEqual({ include_usage: true });
      expect(up.max_tokens).toBe(16384);
      const raw = JSON.stringify(up);
      for (const s of ['cache_control', 'defer_loading', 'context_management', 'output_config'])
        expect(raw).not.toContain(s);
    }
  });

  test('the first delta reaches the client before the upstream has finished', async () => {
    gw.emulator.control.settings.chunkDelayMs = 40;
    const ctl = gw.emulator.control;
    const finished = () =>
      model === NATIVE
        ? streamStats(ctl, 'anthropic').completed
        : model === BRIDGED
          ? streamStats(ctl, 'responses').completed
          : openaiEmulatorStats(ctl).streamsCompleted;
    const before = finished();
    let finishedAtFirstDelta: number | null = null;
    const stream = client().messages.stream({
      model,
      max_tokens: 200,
      messages: [{ role: 'user', content: 'one two three four five six seven eight' }],
    });
    stream.on('text', () => {
      if (finishedAtFirstDelta === null) finishedAtFirstDelta = finished();
    });
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: 'text', text: 'You said: one two three four five six seven eight' });
    // When the first text delta arrived, the upstream had not finished its stream; it did afterwards.
    expect(finishedAtFirstDelta).toBe(before);
    expect(finished()).toBe(before + 1);
  });

  test('402 before any upstream call when the account cannot pay, in the Anthropic shape', async () => {
    const poor = await gw.account(0);
    const err = await client(poor.key)
      .messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBe(402);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'billing_error' } });
    expect(gw.emulator.control.requests).toHaveLength(0);
  });

  test('a stream is billed its usage, exactly once, and a cut-short stream is billed what was delivered', async () => {
    const acct = await gw.account(1_000_000);
    const m = await client(acct.key)
      .messages.stream({ model, max_tokens: 200, messages: [{ role: 'user', content: 'bill me' }] })
      .finalMessage();
    await gw.deps.credit.flush();
    const rows = await usageRows(acct.accountId);
    expect(rows).toHaveLength(1);
    const price = gw.deps.catalog.get(model)!.pricing;
    const prompt = m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0);
    const expected = Math.ceil(
      (prompt * price.inputPer1MTokens! + m.usage.output_tokens * price.outputPer1MTokens!) / 1e6,
    );
    expect(rows[0]).toMatchObject({ operation: 'messages', status: 200 });
    expect(Number(rows[0].cost_vnd)).toBe(expected);
    expect(rows[0].units).toEqual({ prompt_tokens: prompt, completion_tokens: m.usage.output_tokens });
    expect(Number(rows[0].cost_vnd)).toBeGreaterThan(0);

    // Cut short: the client goes away after the first delta of a paced stream.
    gw.emulator.control.settings.chunkDelayMs = 50;
    const ac = new AbortController();
    const s = client(acct.key).messages.stream(
      { model, max_tokens: 200, messages: [{ role: 'user', content: 'a b c d e f g h i j k l m n o p' }] },
      { signal: ac.signal },
    );
    s.on('text', () => ac.abort());
    await s.finalMessage().catch(() => undefined);
    await waitFor(async () => (await usageRows(acct.accountId)).length === 2);
    const cut = (await usageRows(acct.accountId))[1];
    expect(cut.status).toBe(499);
    expect(cut.units.estimated).toBe(1);
    expect(Number(cut.cost_vnd)).toBeGreaterThan(0);
    const bal = await gw.deps.db.query('SELECT balance FROM accounts WHERE id = $1', [acct.accountId]);
    expect(Number(bal.rows[0].balance)).toBe(1_000_000 - expected - Number(cut.cost_vnd));
  });
});

test.each([NATIVE, BRIDGED])(
  '%s: an upstream that breaks off mid-stream ends the stream with an error event and is billed what was delivered',
  async (model) => {
    const acct = await gw.account(1_000_000);
    const res = await fetch(`${gw.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': acct.key, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({
        model,
        max_tokens: 300,
        stream: true,
        messages: [
          { role: 'user', content: 'one two three four five six seven eight nine ten EMULATOR_DROP_MIDSTREAM' },
        ],
      }),
    });
    expect(res.status).toBe(200);
    const events = await readSse(res);
    expect(events[0].event).toBe('message_start');
    expect(events.some((e) => e.event === 'content_block_delta')).toBe(true);
    expect(events.map((e) => e.event)).not.toContain('message_stop');
    expect(events[events.length - 1]).toMatchObject({
      event: 'error',
      data: { type: 'error', error: { type: 'api_error' } },
    });
    await waitFor(async () => (await usageRows(acct.accountId)).length === 1);
    const [row] = await usageRows(acct.accountId);
    expect(row).toMatchObject({ status: 502, units: { estimated: 1 } });
    expect(Number(row.cost_vnd)).toBeGreaterThan(0);
  },
);

describe('errors and headers', () => {
  test('401 without a key, in the Anthropic shape', async () => {
    const res = await fetch(`${gw.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: '{}',
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const bad = await client('sk-wrong')
      .messages.create({ model: NATIVE, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(bad.status).toBe(401);
    expect(bad.error.error.type).toBe('authentication_error');
  });

  test('Bearer auth works too', async () => {
    const c = new Anthropic({ authToken: key, apiKey: null, baseURL: gw.url, maxRetries: 0 });
    const m = await c.messages.create({
      model: TRANSLATED,
      max_tokens: 50,
      messages: [{ role: 'user', content: 'bearer' }],
    });
    expect(m.content[0]).toMatchObject({ text: 'You said: bearer' });
  });

  test('anthropic-version is required', async () => {
    const res = await fetch(`${gw.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ model: NATIVE, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { message: string } };
    expect(body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(body.error.message).toContain('anthropic-version');
  });

  test('validation errors name the parameter; unknown models are not_found_error', async () => {
    const missing = await client()
      .messages.create({ model: NATIVE, messages: [{ role: 'user', content: 'x' }] } as any)
      .catch((e) => e);
    expect(missing.status).toBe(400);
    expect(missing.error.error).toMatchObject({ type: 'invalid_request_error' });
    expect(missing.error.error.message).toContain('max_tokens');
    const unknown = await client()
      .messages.create({ model: 'no-such-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(unknown.status).toBe(404);
    expect(unknown.error.error.type).toBe('not_found_error');
  });

  test('an upstream error on the native path comes back as the upstream sent it', async () => {
    gw.emulator.control.addFault({ match: 'POST /anthropic/v1/messages', status: 529, times: 1 });
    const err = await client()
      .messages.create({ model: NATIVE, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(err.status).toBe(529);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
    await gw.deps.credit.flush();
    const rows = await usageRows(accountId);
    const failed = rows.filter((r) => r.status === 529);
    expect(failed).toHaveLength(1);
    expect(Number(failed[0].cost_vnd)).toBe(0);
  });

  test('a reasoning chat model gets thinking as reasoning_effort and the cap as max_completion_tokens', async () => {
    const m = await client()
      .messages.stream({
        model: 'o4-mini',
        max_tokens: 128000,
        thinking: { type: 'adaptive' },
        output_config: { effort: 'low' },
        messages: [{ role: 'user', content: 'think' }],
      } as Anthropic.MessageStreamParams)
      .finalMessage();
    expect(m.content[0]).toMatchObject({ text: 'You said: think' });
    const up = upstreamCalls('/openai/v1/chat/completions')[0].body as any;
    expect(up).toMatchObject({
      model: 'o4-mini',
      reasoning_effort: 'low',
      max_completion_tokens: 100000,
      stream: true,
    });
    expect(up.max_tokens).toBeUndefined();
  });

  test('Claude aliases route to the native model', async () => {
    const m = await client().messages.create({
      model: 'claude-sonnet-4-0',
      max_tokens: 50,
      messages: [{ role: 'user', content: 'alias' }],
    });
    expect(m.content[0]).toMatchObject({ text: 'You said: alias' });
    expect(upstreamCalls('/anthropic/v1/messages')[0].body).toMatchObject({ model: 'claude-sonnet-4-6' });
  });
});

const usageRows = (accountId: string) => usageRowsOf(gw.deps, accountId, 'operation, units, cost_vnd, status');

async function waitFor(cond: () => Promise<boolean>): Promise<void> {
  await eventually(
    async () => {
      await gw.deps.credit.flush();
      return cond();
    },
    { every: 25 },
  );
}

/** A request shaped as Claude Code 2.1.x sends it (reference section 5), padded to at least `size` bytes. */
function claudeCodeBody(model: string, size: number) {
  const filler = 'The repository contains a TypeScript gateway. '.repeat(Math.ceil(size / 46));
  return {
    model,
    max_tokens: 64000,
    stream: true,
    metadata: { user_id: JSON.stringify({ device_id: 'dev123', account_uuid: '', session_id: 'sess-1' }) },
    system: [
      {
        type: 'text',
        text: "You are Claude Code, Anthropic's official CLI for Claude.",
        cache_control: { type: 'ephemeral' },
      },
      {
        type: 'text',
        text: 'You are an interactive CLI tool that helps users with software engineering tasks.',
        cache_control: { type: 'ephemeral' },
      },
      { type: 'text', text: 'Environment: linux, cwd /work.' },
    ],
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: `<system-reminder>${filler}</system-reminder>` },
          { type: 'text', text: 'List the files here.', cache_control: { type: 'ephemeral' } },
        ],
      },
      { role: 'system', content: 'Respond concisely.' },
    ],
    tools: [
      {
        name: 'Bash',
        description: 'Executes a bash command',
        input_schema: {
          type: 'object',
          properties: { command: { type: 'string' }, timeout: { type: 'number' } },
          required: ['command'],
        },
        cache_control: { type: 'ephemeral' },
      },
      {
        name: 'mcp__playwright__browser_take_screenshot_of_the_current_page_with_options',
        description: 'Screenshot',
        input_schema: { type: 'object', properties: {} },
        defer_loading: true,
      },
    ],
    thinking: { type: 'adaptive', display: 'omitted' },
    output_config: { effort: 'high' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
  };
}
