import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { eventually } from '../support/eventually';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { charges as chargesOf, fundedClient } from '../support/records';

/** Funds and charges for the OpenAI-compatible operations: 402 before any upstream call, exactly-once charges. */

let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
});
afterAll(() => gw.close());
beforeEach(() => gw.emulator.control.reset());

const funded = (balance: number) => fundedClient(gw, balance);
const charges = (accountId: string) => chargesOf(gw.deps, accountId);

test('an account that cannot pay gets 402 insufficient_quota and no upstream request is made', async () => {
  const { client } = await funded(0);
  const calls: [string, () => Promise<unknown>][] = [
    [
      'chat',
      () => client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    ],
    [
      'stream',
      () =>
        client.chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: 'hi' }],
          stream: true,
        }),
    ],
    ['completions', () => client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'hi' })],
    ['embeddings', () => client.embeddings.create({ model: 'text-embedding-3-small', input: 'hi' })],
    ['speech', () => client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'hi' })],
    ['images', () => client.images.generate({ model: 'gpt-image-1', prompt: 'hi' })],
  ];
  for (const [name, call] of calls) {
    const e = await call().then(
      () => null,
      (err) => err,
    );
    expect([name, e?.status]).toEqual([name, 402]);
    expect(e.error).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_balance' });
  }
  expect(gw.emulator.control.requests).toHaveLength(0);
});

test('N concurrent requests against a balance covering k: exactly k reach the upstream, the rest get 402', async () => {
  // Each request's reservation is dominated by max_tokens: 10,000 output tokens of gpt-4o = 2,600 VND, plus a
  // prompt bound of ~100 bytes (< 10 VND). A balance of 7,830 VND covers 3 reservations and not 4.
  const { client, accountId } = await funded(7_830);
  // The admitted requests wait at the emulator until every one of the ten is decided (held there or refused), so
  // they are all in flight together however slow the machine.
  const release = gw.emulator.control.hold();
  let refusedSoFar = 0;
  const pending = Array.from({ length: 10 }, (_, i) =>
    client.chat.completions
      .create({
        model: 'gpt-4o',
        messages: [{ role: 'user', content: `request ${i}` }],
        max_tokens: 10_000,
      })
      .catch((e) => {
        refusedSoFar++;
        throw e;
      }),
  );
  const settled = Promise.allSettled(pending); // handled from the start
  try {
    await eventually(async () => refusedSoFar + gw.emulator.control.held === 10 || null);
  } finally {
    release();
  }
  const results = await settled;
  const ok = results.filter((r) => r.status === 'fulfilled');
  const refused = results.filter((r) => r.status === 'rejected' && (r.reason as { status?: number }).status === 402);
  expect(ok).toHaveLength(3);
  expect(refused).toHaveLength(7);
  expect(gw.emulator.control.requests).toHaveLength(3);
  await gw.deps.credit.flush();
  // Charged once each: three usage records with a cost, each naming a charge, the charges adding up to them.
  const paid = (
    await gw.deps.db.query('SELECT cost_vnd, charge_key FROM usage_records WHERE account_id = $1 AND cost_vnd > 0', [
      accountId,
    ])
  ).rows;
  expect(paid).toHaveLength(3);
  const ch = await charges(accountId);
  const chargedVnd = ch.reduce((s, c) => s + c.amount, 0);
  expect(chargedVnd).toBe(paid.reduce((s, r) => s + Number(r.cost_vnd), 0));
  const balance = await getBalance(gw.deps.db, accountId);
  expect(balance!.balance).toBe(7_830 - chargedVnd);
  expect(await verifyProjections(gw.deps.db)).toEqual([]);
});

test('a successful request is charged exactly once, matching its usage record and GET /v1/usage', async () => {
  const { client, accountId, key, keyId } = await funded(100_000);
  const res = await client.chat.completions.create({
    model: 'gpt-4o',
    messages: [{ role: 'user', content: 'charge me once please' }],
  });
  await gw.deps.credit.flush();
  await gw.deps.credit.flush();
  const ch = await charges(accountId);
  expect(ch).toHaveLength(1);
  // ceil((6 * 65000 + 8 * 260000) / 1e6) = ceil(2.47) = 3 VND
  expect(res.usage).toMatchObject({ prompt_tokens: 6, completion_tokens: 8 });
  expect(ch[0]).toMatchObject({ amount: 3, refType: 'request' });
  const usage = (await fetch(gw.url + '/v1/usage', { headers: { authorization: `Bearer ${key}` } }).then((r) =>
    r.json(),
  )) as { data: any[] };
  expect(usage.data).toHaveLength(1);
  expect(usage.data[0]).toMatchObject({
    id: ch[0].refId,
    api_key_id: keyId,
    model: 'gpt-4o',
    operation: 'chat.completions',
    units: { prompt_tokens: 6, completion_tokens: 8 },
    status: 200,
  });
  expect(Number(usage.data[0].cost_vnd)).toBe(3);
  expect(typeof usage.data[0].latency_ms).toBe('number');
  const bal = await getBalance(gw.deps.db, accountId);
  expect(bal!.balance).toBe(100_000 - 3);
});

test('an upstream 500 is a 502 upstream_error for the client and charges nothing', async () => {
  const { client, accountId } = await funded(100_000);
  gw.emulator.control.addFault({ match: 'POST /openai/v1/chat/completions', status: 500 });
  const e = await client.chat.completions
    .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    .then(
      () => null,
      (err) => err,
    );
  expect(e.status).toBe(502);
  expect(e.error).toMatchObject({ type: 'upstream_error', code: 'upstream_error' });
  const s = await client.chat.completions
    .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true })
    .then(
      () => null,
      (err) => err,
    );
  expect(s.status).toBe(502);
  gw.emulator.control.addFault({ match: 'POST /openai/v1/embeddings', drop: true });
  const d = await client.embeddings.create({ model: 'text-embedding-3-small', input: 'hi' }).then(
    () => null,
    (err) => err,
  );
  expect(d.status).toBe(502);
  await gw.deps.credit.flush();
  expect(await charges(accountId)).toHaveLength(0);
  const rows = (await gw.deps.db.query('SELECT status, cost_vnd FROM usage_records WHERE account_id = $1', [accountId]))
    .rows;
  expect(rows).toHaveLength(3);
  expect(rows.every((r) => r.status === 502 && Number(r.cost_vnd) === 0)).toBe(true);
  expect((await getBalance(gw.deps.db, accountId))!.balance).toBe(100_000);
});

test('a client that leaves before a non-streaming answer aborts the upstream call and is charged nothing', async () => {
  const { client, accountId } = await funded(100_000);
  // The answer comes long after the client leaves (at 100 ms): a loaded machine's lag cannot let it in first.
  gw.emulator.control.settings.latencyMs = 5_000;
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 100);
  const e = await client.chat.completions
    .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, { signal: ac.signal })
    .then(
      () => null,
      (err) => err,
    );
  expect(e).toBeInstanceOf(OpenAI.APIUserAbortError);
  const rows = await eventually(async () => {
    await gw.deps.credit.flush();
    const q = await gw.deps.db.query('SELECT status, cost_vnd FROM usage_records WHERE account_id = $1', [accountId]);
    return q.rows.length ? q.rows : null;
  });
  expect(rows).toEqual([{ status: 499, cost_vnd: expect.anything() }]);
  expect(Number(rows[0].cost_vnd)).toBe(0);
  expect(await charges(accountId)).toHaveLength(0);
});
