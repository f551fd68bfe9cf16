import { randomUUID } from 'node:crypto';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { completeJob, createJobWithHold, finishUnsuccessful, getJob } from '../../src/video/jobs';
import { startVideoHarness, type VideoHarness } from '../support/video';

/**
 * The edges of a video job where money or files could slip: the end of a job is one commit (charge, release of
 * the hold and the status change together).
 */

const SEEDANCE = 'seedance-2-0';
const BALANCE = 10_000_000;

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness({}, {}, { worker: false });
});
afterAll(async () => {
  await h?.close();
});

/** A job with its hold, as POST /v1/videos commits it (no workflow: the test drives the end itself). */
async function heldJob(accountId: string): Promise<{ id: string; holdId: string }> {
  const id = randomUUID();
  const holdId = randomUUID();
  await createJobWithHold(h.deps.db, {
    id, accountId, apiKeyId: null, model: SEEDANCE, provider: 'emulator-seedance', requestHash: 'x', idempotencyKey: null,
    request: { prompt: 'edge', seconds: 5, returnLastFrame: false, images: {} }, seconds: 5, pricePerSecond: 3600, maxCostVnd: 5 * 3600, holdId,
  });
  return { id, holdId };
}

/** Makes the status change of `jobId` to `kind` fail inside Postgres (a crash between the two writes). */
async function failStatusChange(jobId: string, kind: string): Promise<() => Promise<void>> {
  const fn = `fail_${jobId.replace(/-/g, '')}`;
  await h.deps.db.query(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.job_id = '${jobId}' AND NEW.kind = '${kind}' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$`);
  await h.deps.db.query(`CREATE TRIGGER ${fn} BEFORE INSERT ON video_job_events FOR EACH ROW EXECUTE FUNCTION ${fn}()`);
  return async () => {
    await h.deps.db.query(`DROP TRIGGER ${fn} ON video_job_events`);
    await h.deps.db.query(`DROP FUNCTION ${fn}()`);
  };
}

test('completion is one commit: a status change that fails leaves the money untouched; the retry charges once', async () => {
  const acc = await h.account(BALANCE);
  const job = await heldJob(acc.accountId);
  const restore = await failStatusChange(job.id, 'completed');
  try {
    await expect(completeJob(h.deps.db, { jobId: job.id, holdId: job.holdId, chargeVnd: 4 * 3600, durationSeconds: 4 })).rejects.toThrow(/injected/);
  } finally {
    await restore();
  }
  expect((await getJob(h.deps.db, job.id))!.status).toBe('submitted');
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: BALANCE, held: 5 * 3600, available: BALANCE - 5 * 3600 });
  expect((await listLedger(h.deps.db, acc.accountId)).map((e) => e.kind)).toEqual(['hold_placed', 'topped_up']);

  expect(await completeJob(h.deps.db, { jobId: job.id, holdId: job.holdId, chargeVnd: 4 * 3600, durationSeconds: 4 })).toBe(true);
  expect(await completeJob(h.deps.db, { jobId: job.id, holdId: job.holdId, chargeVnd: 4 * 3600, durationSeconds: 4 })).toBe(false);
  expect((await getJob(h.deps.db, job.id))!).toMatchObject({ status: 'completed', costVnd: 4 * 3600 });
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: BALANCE - 4 * 3600, held: 0, available: BALANCE - 4 * 3600 });
  expect((await listLedger(h.deps.db, acc.accountId)).filter((e) => e.kind === 'charged')).toHaveLength(1);
  expect(await verifyProjections(h.deps.db)).toEqual([]);
});

test('a failure is one commit too, and a job already final is never settled again', async () => {
  const acc = await h.account(BALANCE);
  const job = await heldJob(acc.accountId);
  const restore = await failStatusChange(job.id, 'failed');
  try {
    await expect(finishUnsuccessful(h.deps.db, { jobId: job.id, holdId: job.holdId, status: 'failed', message: 'no' })).rejects.toThrow(/injected/);
  } finally {
    await restore();
  }
  expect((await getBalance(h.deps.db, acc.accountId))!.held).toBe(5 * 3600);
  expect(await finishUnsuccessful(h.deps.db, { jobId: job.id, holdId: job.holdId, status: 'failed', message: 'no' })).toBe(true);
  // A late completion of a failed job (a stale activity) charges nothing.
  expect(await completeJob(h.deps.db, { jobId: job.id, holdId: job.holdId, chargeVnd: 4 * 3600, durationSeconds: 4 })).toBe(false);
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: BALANCE, held: 0, available: BALANCE });
  expect((await getJob(h.deps.db, job.id))!.status).toBe('failed');
});
