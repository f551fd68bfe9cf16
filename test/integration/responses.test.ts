import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { eventually } from '../support/eventually';
import { streamStats } from '../../emulator/replyKit';
import { openaiEmulatorStats } from '../../emulator/openai';
import { usageRows as usageRowsOf } from '../support/records';

/**
 * POST /v1/responses (+ GET /v1/responses/{id}) through the real gateway with the official openai SDK, on the
 * native path (gpt-5-codex -> emulated Responses upstream), the translated path (gpt-4o-mini -> emulated chat
 * completions upstream) and the bridged path (claude-sonnet-4-6 -> emulated Anthropic Messages upstream), plus
 * replayed Codex-shaped requests (reference section 5).
 */

let gw: TestGateway;
let key: string;
beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  ({ key } = await gw.account(5_000_000));
});
afterAll(() => gw.close());
afterEach(() => gw.emulator.control.reset());

const NATIVE = 'gpt-5-codex';
const TRANSLATED = 'gpt-4o-mini';
/** A Claude model: responses -> chat -> Anthropic Messages upstream and back. */
const BRIDGED = 'claude-sonnet-4-6';
const paths = [
  ['native', NATIVE],
  ['translated', TRANSLATED],
  ['bridged to Anthropic', BRIDGED],
] as const;
const client = (k = key) => new OpenAI({ apiKey: k, baseURL: `${gw.url}/v1`, maxRetries: 0 });
const shell: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'shell',
  description: 'Run a command',
  strict: false,
  parameters: {
    type: 'object',
    properties: { command: { type: 'array', items: { type: 'string' } } },
    required: ['command'],
  },
};

const upstream = (model: string) =>
  model === NATIVE
    ? '/openai/v1/responses'
    : model === BRIDGED
      ? '/anthropic/v1/messages'
      : '/openai/v1/chat/completions';
const upstreamCalls = (path: string) => gw.emulator.control.requests.filter((r) => r.path === path);

/** Raw SSE from the gateway as parsed events. */
async function postSse(body: unknown, headers: Record<string, string> = {}): Promise<any[]> {
  const res = await fetch(`${gw.url}/v1/responses`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${key}`,
      accept: 'text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const text = await res.text();
  expect(text).not.toContain('[DONE]');
  return text
    .split('\n\n')
    .filter((b) => b.trim() && !b.startsWith(':'))
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = JSON.parse(/^data: (.*)$/m.exec(block)![1]);
      expect(data.type).toBe(event);
      return data;
    });
}

/**
 * What Codex relies on: increasing sequence numbers, complete output_item.done items, a final response.completed with
 * full usage.
 */
function assertCodexContract(events: any[]): any {
  events.forEach((e, i) =>
    expect(e.sequence_number).toBe(i > 0 ? events[i - 1].sequence_number + 1 : e.sequence_number),
  );
  expect(events[0].type).toBe('response.created');
  expect(events[1].type).toBe('response.in_progress');
  const last = events[events.length - 1];
  expect(last.type).toBe('response.completed');
  const u = last.response.usage;
  for (const k of ['input_tokens', 'output_tokens', 'total_tokens']) expect(Number.isInteger(u[k])).toBe(true);
  expect(Number.isInteger(u.input_tokens_details.cached_tokens)).toBe(true);
  expect(Number.isInteger(u.output_tokens_details.reasoning_tokens)).toBe(true);
  const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item);
  expect(last.response.output).toEqual(done);
  for (const item of done) if (item.type !== 'reasoning') expect(item.status).toBe('completed');
  return last.response;
}

describe.each(paths)('%s path', (_name, model) => {
  test('responses.create with a string input', async () => {
    const r = await client().responses.create({ model, input: 'hello there' });
    expect(r.object).toBe('response');
    expect(r.status).toBe('completed');
    expect(r.output_text).toBe('You said: hello there');
    expect(r.usage).toMatchObject({
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: expect.any(Number) },
    });
    expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + r.usage!.output_tokens);
  });

  test('responses.stream with a function call, continued via previous_response_id', async () => {
    const stream = client().responses.stream({
      model,
      input: 'list the files',
      instructions: 'You are terse.',
      tools: [shell],
    });
    const types: string[] = [];
    const seqs: number[] = [];
    for await (const e of stream) {
      types.push(e.type);
      seqs.push(e.sequence_number);
    }
    const first = await stream.finalResponse();
    expect(types[0]).toBe('response.created');
    expect(types[types.length - 1]).toBe('response.completed');
    expect(types).toEqual(
      expect.arrayContaining([
        'response.output_item.added',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.done',
        'response.output_item.done',
      ]),
    );
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0] + i));
    const call = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toMatchObject({ name: 'shell', arguments: '{"command":["example"]}', status: 'completed' });

    // Continue the stored conversation with the tool's output.
    gw.emulator.control.reset();
    const second = await client().responses.create({
      model,
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: 'a.txt b.txt' }],
      tools: [shell],
    });
    expect(second.output_text).toBe('The tool returned: a.txt b.txt');
    const sent = upstreamCalls(upstream(model))[0].body as any;
    expect(JSON.stringify(sent)).not.toContain('previous_response_id');
    if (model === NATIVE) {
      // The gateway expanded the stored conversation: first turn's input, its output, then the new item.
      expect(sent.input.map((i: any) => i.type ?? i.role)).toEqual([
        'message',
        'function_call',
        'function_call_output',
      ]);
    } else if (model === BRIDGED) {
      expect(sent.messages.map((m: any) => m.role)).toEqual(['user', 'assistant', 'user']);
      expect(sent.system).toBeUndefined(); // instructions belong to their own request, not to the continuation
      expect(sent.messages[1].content).toEqual([
        { type: 'text', text: 'I will call shell.' },
        { type: 'tool_use', id: call.call_id, name: 'shell', input: { command: ['example'] } },
      ]);
      expect(sent.messages[2].content).toEqual([
        { type: 'tool_result', tool_use_id: call.call_id, content: 'a.txt b.txt' },
      ]);
    } else {
      expect(sent.messages.map((m: any) => m.role)).toEqual(['user', 'assistant', 'tool']);
      expect(sent.messages[1].tool_calls[0].id).toBe(call.call_id);
    }
    const stored = await client().responses.retrieve(second.id);
    expect(stored).toMatchObject({ id: second.id, previous_response_id: first.id, status: 'completed' });
  });

  test("previous_response_id: unknown ids, other accounts' ids and store:false responses are 404", async () => {
    const unknown = await client()
      .responses.create({ model, input: 'x', previous_response_id: 'resp_does_not_exist' })
      .catch((e) => e);
    expect(unknown.status).toBe(404);
    expect(unknown.error).toMatchObject({ param: 'previous_response_id', code: 'previous_response_not_found' });
    const mine = await client().responses.create({ model, input: 'mine' });
    const other = await gw.account(1_000_000);
    const theirs = await client(other.key)
      .responses.create({ model, input: 'x', previous_response_id: mine.id })
      .catch((e) => e);
    expect(theirs.status).toBe(404);
    expect(
      (
        await client(other.key)
          .responses.retrieve(mine.id)
          .catch((e) => e)
      ).status,
    ).toBe(404);
    const unstored = await client().responses.create({ model, input: 'forget me', store: false });
    expect(
      (
        await client()
          .responses.create({ model, input: 'x', previous_response_id: unstored.id })
          .catch((e) => e)
      ).status,
    ).toBe(404);
  });

  test('a Codex-shaped request (namespace, web_search, custom tool, encrypted reasoning, 150 KB) streams', async () => {
    const body = codexBody(model, 150 * 1024);
    expect(JSON.stringify(body).length).toBeGreaterThan(150 * 1024);
    const events = await postSse(body, { session_id: 'sess-1', originator: 'codex_cli_rs' });
    const final = assertCodexContract(events);
    // The model was steered (tool_choice) to the namespaced free-form apply_patch tool.
    const call = final.output.find((o: any) => o.type === 'custom_tool_call');
    expect(call).toMatchObject({
      type: 'custom_tool_call',
      name: 'apply_patch',
      namespace: 'codex',
      status: 'completed',
    });
    expect(typeof call.input).toBe('string');
    const sent = upstreamCalls(upstream(model))[0].body as any;
    if (model === NATIVE) {
      expect(sent).toMatchObject({
        model: 'gpt-5-codex',
        store: false,
        include: ['reasoning.encrypted_content'],
        prompt_cache_key: 'pck-1',
      });
      const reasoning = final.output.find((o: any) => o.type === 'reasoning');
      expect(reasoning.encrypted_content).toMatch(/^emu-enc-/);
    } else if (model === BRIDGED) {
      expect(sent.system).toContain('You are Codex');
      expect(sent.tools.map((t: any) => t.name)).toEqual(['shell', 'mcp_files__read_file', 'codex__apply_patch']);
      expect(sent.tool_choice).toEqual({ type: 'tool', name: 'codex__apply_patch', disable_parallel_tool_use: true });
      expect(sent.max_tokens).toBe(64000);
      expect(call.input).toBe('example');
    } else {
      expect(sent.messages[0]).toMatchObject({ role: 'system', content: expect.stringContaining('You are Codex') });
      expect(sent.tools.map((t: any) => t.function.name)).toEqual([
        'shell',
        'mcp_files__read_file',
        'codex__apply_patch',
      ]);
      expect(sent.tool_choice).toEqual({ type: 'function', function: { name: 'codex__apply_patch' } });
      expect(sent.reasoning_effort).toBeUndefined(); // not a reasoning model
      const raw = JSON.stringify(sent);
      for (const s of ['web_search', 'encrypted_content', 'prompt_cache_key', 'client_metadata', '"namespace"'])
        expect(raw).not.toContain(s);
      expect(call.input).toBe('example');
    }
    // store:false: nothing to continue from.
    expect(
      (
        await client()
          .responses.retrieve(final.id)
          .catch((e) => e)
      ).status,
    ).toBe(404);
  });

  test('the first delta reaches the client before the upstream has finished', async () => {
    gw.emulator.control.settings.chunkDelayMs = 40;
    const ctl = gw.emulator.control;
    const finished = () =>
      model === NATIVE
        ? streamStats(ctl, 'responses').completed
        : model === BRIDGED
          ? streamStats(ctl, 'anthropic').completed
          : openaiEmulatorStats(ctl).streamsCompleted;
    const before = finished();
    let atFirstDelta: number | null = null;
    const stream = client().responses.stream({ model, input: 'one two three four five six seven eight' });
    stream.on('response.output_text.delta', () => {
      if (atFirstDelta === null) atFirstDelta = finished();
    });
    const final = await stream.finalResponse();
    expect(final.output_text).toBe('You said: one two three four five six seven eight');
    expect(atFirstDelta).toBe(before);
    // The upstream completes its own stream afterwards (the client may see its final event first).
    await eventually(async () => finished() !== before, { every: 10 });
    expect(finished()).toBe(before + 1);
  });

  test('402 before any upstream call when the account cannot pay', async () => {
    const poor = await gw.account(0);
    const err = await client(poor.key)
      .responses.create({ model, input: 'hi' })
      .catch((e) => e);
    expect(err.status).toBe(402);
    expect(err.error).toMatchObject({ type: 'insufficient_quota' });
    expect(gw.emulator.control.requests).toHaveLength(0);
  });

  test('billed by usage, once; a cut-short stream is billed what was delivered', async () => {
    const acct = await gw.account(1_000_000);
    const r = await client(acct.key).responses.stream({ model, input: 'bill me' }).finalResponse();
    await gw.deps.credit.flush();
    let rows = await usageRows(acct.accountId);
    expect(rows).toHaveLength(1);
    const price = gw.deps.catalog.get(model)!.pricing;
    const expected = Math.ceil(
      (r.usage!.input_tokens * price.inputPer1MTokens! + r.usage!.output_tokens * price.outputPer1MTokens!) / 1e6,
    );
    expect(rows[0]).toMatchObject({
      operation: 'responses',
      status: 200,
      units: { prompt_tokens: r.usage!.input_tokens, completion_tokens: r.usage!.output_tokens },
    });
    expect(Number(rows[0].cost_vnd)).toBe(expected);

    gw.emulator.control.settings.chunkDelayMs = 50;
    const ac = new AbortController();
    const s = client(acct.key).responses.stream(
      { model, input: 'a b c d e f g h i j k l m n o p' },
      { signal: ac.signal },
    );
    s.on('response.output_text.delta', () => ac.abort());
    await s.finalResponse().catch(() => undefined);
    await eventually(
      async () => {
        await gw.deps.credit.flush();
        return (rows = await usageRows(acct.accountId)).length >= 2;
      },
      { every: 25 },
    );
    expect(rows[1]).toMatchObject({ status: 499, units: { estimated: 1 } });
    expect(Number(rows[1].cost_vnd)).toBeGreaterThan(0);
  });
});

test.each([NATIVE, BRIDGED])(
  '%s: an upstream that breaks off mid-stream ends with response.failed and is billed what was delivered',
  async (model) => {
    const acct = await gw.account(1_000_000);
    const res = await fetch(`${gw.url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${acct.key}` },
      body: JSON.stringify({
        model,
        stream: true,
        input: 'one two three four five six seven eight nine ten EMULATOR_DROP_MIDSTREAM',
      }),
    });
    expect(res.status).toBe(200);
    const events = (await res.text())
      .split('\n\n')
      .filter((b) => b.trim() && !b.startsWith(':'))
      .map((b) => JSON.parse(/^data: (.*)$/m.exec(b)![1]));
    events.forEach((e, i) => expect(e.sequence_number).toBe(events[0].sequence_number + i));
    expect(events[0].type).toBe('response.created');
    const last = events[events.length - 1];
    expect(last).toMatchObject({
      type: 'response.failed',
      response: { status: 'failed', error: { code: 'server_error' } },
    });
    expect(events.map((e) => e.type)).not.toContain('response.completed');
    const rows = await eventually(async () => {
      await gw.deps.credit.flush();
      const got = await usageRows(acct.accountId);
      return got.length >= 1 ? got : null;
    });
    expect(rows[0]).toMatchObject({ status: 502, units: { estimated: 1 } });
    expect(Number(rows[0].cost_vnd)).toBeGreaterThan(0);
  },
);

test('an upstream that drops the connection is a 502 and costs nothing', async () => {
  const acct = await gw.account(1_000_000);
  gw.emulator.control.addFault({ match: 'POST /openai/v1/responses', drop: true, times: 1 });
  const err = await client(acct.key)
    .responses.create({ model: NATIVE, input: 'x' })
    .catch((e) => e);
  expect(err.status).toBe(502);
  await gw.deps.credit.flush();
  const rows = await usageRows(acct.accountId);
  expect(rows).toHaveLength(1);
  expect(rows[0].status).toBe(502);
  expect(Number(rows[0].cost_vnd)).toBe(0);
});

test('ids that cannot exist are 404s; input with NUL characters is stored and can be continued', async () => {
  const res = await fetch(`${gw.url}/v1/responses/%00`, { headers: { authorization: `Bearer ${key}` } });
  expect(res.status).toBe(404);
  const bad = await client()
    .responses.create({ model: TRANSLATED, input: 'x', previous_response_id: 'resp_\u0000' })
    .catch((e) => e);
  expect(bad.status).toBe(404);
  const first = await client().responses.create({ model: TRANSLATED, input: 'nul \u0000 inside' });
  const second = await client().responses.create({ model: TRANSLATED, input: 'again', previous_response_id: first.id });
  expect(second.status).toBe('completed');
});

test('validation errors name the parameter', async () => {
  const err = await client()
    .responses.create({ model: TRANSLATED } as any)
    .catch((e) => e);
  expect(err.status).toBe(400);
  expect(err.error).toMatchObject({ param: 'input', code: 'missing_required_parameter' });
  const temp = await client()
    .responses.create({ model: TRANSLATED, input: 'x', temperature: 5 })
    .catch((e) => e);
  expect(temp.error.param).toBe('temperature');
});

const usageRows = (accountId: string) => usageRowsOf(gw.deps, accountId, 'operation, units, cost_vnd, status');

/** A request shaped as the Codex CLI 0.169 sends it (reference section 5), padded to at least `size` bytes. */
function codexBody(model: string, size: number) {
  const agents = '# AGENTS.md\nUse pnpm. Keep functions small. '.repeat(Math.ceil(size / 44));
  return {
    model,
    stream: true,
    store: false,
    include: ['reasoning.encrypted_content'],
    prompt_cache_key: 'pck-1',
    client_metadata: { originator: 'codex_cli_rs' },
    parallel_tool_calls: false,
    tool_choice: { type: 'custom', name: 'apply_patch', namespace: 'codex' },
    reasoning: { effort: 'high', summary: 'auto' },
    text: { verbosity: 'medium' },
    tools: [
      shell,
      {
        type: 'namespace',
        name: 'mcp_files',
        description: 'File tools',
        tools: [
          {
            type: 'function',
            name: 'read_file',
            description: 'Read a file',
            parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
          },
        ],
      },
      { type: 'web_search' },
    ],
    input: [
      {
        type: 'additional_tools',
        role: 'developer',
        tools: [
          {
            type: 'namespace',
            name: 'codex',
            description: 'Codex built-ins',
            tools: [
              {
                type: 'custom',
                name: 'apply_patch',
                description: 'Apply a patch to files',
                format: { type: 'grammar', syntax: 'lark', definition: 'start: begin_patch hunk+ end_patch' },
              },
            ],
          },
        ],
      },
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex, a coding agent.' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: agents }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Fix the failing test.' }] },
    ],
  };
}
