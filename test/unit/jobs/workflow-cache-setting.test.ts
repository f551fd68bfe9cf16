import { loadJobWorkerSettings } from '../../../src/jobs/settings';

/**
 * JOBS_WORKFLOW_CACHE (src/jobs/settings.ts): the workers keep no workflow between its tasks by default, so every
 * workflow task waits in its task queue, where accounts take turns, not on a worker's sticky queue (first come,
 * first served); a positive number caches that many.
 */

test('JOBS_WORKFLOW_CACHE: none by default, a whole number of 0 or more, anything else refused', () => {
  expect(loadJobWorkerSettings({}).workflowCache).toBe(0);
  expect(loadJobWorkerSettings({ JOBS_WORKFLOW_CACHE: '' }).workflowCache).toBe(0);
  expect(loadJobWorkerSettings({ JOBS_WORKFLOW_CACHE: '0' }).workflowCache).toBe(0);
  expect(loadJobWorkerSettings({ JOBS_WORKFLOW_CACHE: '500' }).workflowCache).toBe(500);
  for (const bad of ['-1', '2.5', 'many'])
    expect(() => loadJobWorkerSettings({ JOBS_WORKFLOW_CACHE: bad })).toThrow(
      `JOBS_WORKFLOW_CACHE must be a whole number, 0 or more, got "${bad}"`,
    );
});
