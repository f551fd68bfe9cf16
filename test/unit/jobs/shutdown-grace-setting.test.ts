import { loadJobWorkerSettings } from '../../../src/jobs/settings';

test('JOBS_SHUTDOWN_GRACE_MS: 25 s by default, 0 cuts activities short at once, a negative or a word refused', () => {
  expect(loadJobWorkerSettings({}).shutdownGraceMs).toBe(25_000);
  expect(loadJobWorkerSettings({ JOBS_SHUTDOWN_GRACE_MS: '' }).shutdownGraceMs).toBe(25_000);
  expect(loadJobWorkerSettings({ JOBS_SHUTDOWN_GRACE_MS: '0' }).shutdownGraceMs).toBe(0);
  expect(loadJobWorkerSettings({ JOBS_SHUTDOWN_GRACE_MS: '90000' }).shutdownGraceMs).toBe(90_000);
  expect(() => loadJobWorkerSettings({ JOBS_SHUTDOWN_GRACE_MS: '-1' })).toThrow(/JOBS_SHUTDOWN_GRACE_MS must be 0 or/);
  expect(() => loadJobWorkerSettings({ JOBS_SHUTDOWN_GRACE_MS: 'long' })).toThrow(/0 or a positive/);
});
