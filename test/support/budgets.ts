/**
 * Time budgets sized for a loaded machine (2 cores at load average 8-10, as CI and shared development hosts are):
 * a test that waits for a workflow (a batch, a video job, a webhook delivery) names its own budget instead of
 * relying on Jest's default; its waits are conditions (eventually), so a quiet machine still finishes in seconds.
 */
export const WORKFLOW_TEST_MS = 300_000;
