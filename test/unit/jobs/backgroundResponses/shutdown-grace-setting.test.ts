import { loadBackgroundResponseSettings } from '../../../../src/jobs/backgroundResponses/settings';

test('BACKGROUND_SHUTDOWN_GRACE_MS: 25 s by default, 0 cuts runs short at once, a negative or a word refused', () => {
  expect(loadBackgroundResponseSettings({}).shutdownGraceMs).toBe(25_000);
  expect(loadBackgroundResponseSettings({ BACKGROUND_SHUTDOWN_GRACE_MS: '0' }).shutdownGraceMs).toBe(0);
  expect(loadBackgroundResponseSettings({ BACKGROUND_SHUTDOWN_GRACE_MS: '90000' }).shutdownGraceMs).toBe(90_000);
  expect(() => loadBackgroundResponseSettings({ BACKGROUND_SHUTDOWN_GRACE_MS: '-1' })).toThrow(/0 or a positive/);
  expect(() => loadBackgroundResponseSettings({ BACKGROUND_SHUTDOWN_GRACE_MS: 'long' })).toThrow(/0 or a positive/);
});
