import OpenAI from 'openai';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { verifyBackgroundResponses } from '../../src/jobs/backgroundResponses/verify';
import { reconcileBackgroundResponses } from '../../src/jobs/backgroundResponses/reconciler';
import { eventually, fastBackgroundSettings, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * A run goes on after its response ended or was deleted until Temporal tells it, at its next heartbeat: with the
 * production heartbeat (30 s) up to a third of that later, long enough for a run near its end to finish. What it
 * stores meanwhile must not change the response: a deleted one stays deleted (no stored events, no stored turn to
 * GET or continue), an ended one keeps the events it had when it ended.
 */

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness({}, { backgroundResponses: fastBackgroundSettings({ heartbeatMs: 30_000 }) });
}, 120_000);
afterAll(() => h?.close());
afterEach(() => h.emulator.control.reset());

const events = async (id: string) =>
  (await h.deps.db.query('SELECT count(*)::int AS n FROM background_response_events WHERE response_id = $1', [id]))
    .rows[0].n as number;

test.each(['gpt-5-codex', 'gpt-4o-mini'])(
  '%s: deleted while running, it stays deleted when the run ends (nothing to GET, continue or stream)',
  async (model) => {
    const BAL = 5_000_000;
    const acc = await h.account(BAL);
    const since = new Date();
    const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    h.emulator.control.settings.chunkDelayMs = 60;
    const input = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');
    const r = await c.responses.create({ model, input, background: true });
    await eventually(async () => (await events(r.id)) >= 3);
    expect(await c.responses.delete(r.id)).toMatchObject({ id: r.id, deleted: true });
    const ended = await eventually(async () => {
      const x = await h.deps.db.query('SELECT status, cost_vnd FROM background_responses WHERE id = $1', [r.id]);
      return ['completed', 'cancelled'].includes(x.rows[0].status) ? x.rows[0] : null;
    });
    await expect(c.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
    await expect(c.responses.create({ model, input: 'go on', previous_response_id: r.id })).rejects.toMatchObject({
      status: 404,
    });
    expect(await events(r.id)).toBe(0);
    // The money ended with the run as for any response: what ran charged once, the hold closed.
    expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({ balance: BAL - ended.cost_vnd, held: 0 });
    expect(await verifyProjections(h.deps.db)).toEqual([]);
    expect((await verifyBackgroundResponses(h.deps.db, { since })).mismatches).toEqual([]);
  },
  60_000,
);

test('a run still going after the reconciler failed its response stores no more events', async () => {
  const acc = await h.account(5_000_000);
  const since = new Date();
  const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  h.emulator.control.settings.chunkDelayMs = 60;
  const input = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');
  const r = await c.responses.create({ model: 'gpt-4o-mini', input, background: true });
  await eventually(async () => (await events(r.id)) >= 3);
  await h.deps.temporal!.workflow.getHandle(`bgresp-${r.id}`).terminate('by hand');
  await reconcileBackgroundResponses(
    { db: h.deps.db, temporal: h.deps.temporal!, config: h.config, catalog: h.deps.catalog },
    { graceMs: 0 },
  );
  expect((await c.responses.retrieve(r.id)).status).toBe('failed');
  const stored = await events(r.id);
  // The upstream's answer ends within these 3 s, before the run's next heartbeat tells it its workflow is gone.
  await new Promise((res) => setTimeout(res, 3_000));
  expect(await events(r.id)).toBe(stored);
  const streamed: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const e of await c.responses.retrieve(r.id, { stream: true })) streamed.push(e);
  expect(streamed.map((e) => e.type)).not.toContain('response.completed');
  expect((await c.responses.retrieve(r.id)).status).toBe('failed');
  expect((await verifyBackgroundResponses(h.deps.db, { since })).mismatches).toEqual([]);
}, 60_000);
