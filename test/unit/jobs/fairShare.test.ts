import fs from 'node:fs';
import path from 'node:path';
import { FAIRNESS_DYNAMIC_CONFIG, fairShare } from '../../../src/jobs/fairShare';

/**
 * A job's fair share (src/jobs/fairShare.ts): its account is its fairness key, within Temporal's 64 bytes, and the
 * server of docker-compose.yml is given the same dynamic config as the dev servers the gateway starts.
 */

test("a job's priority: its account as the fairness key, at most 64 bytes", () => {
  const id = '5f0c3c1e-8d52-4f7e-9a43-2b1d6f0e9c11';
  expect(fairShare(id)).toEqual({ priority: { fairnessKey: id } });
  expect(Buffer.byteLength(fairShare('x'.repeat(100)).priority.fairnessKey!)).toBe(64);
  // Two accounts, two keys: their tasks take turns.
  expect(fairShare('a').priority.fairnessKey).not.toBe(fairShare('b').priority.fairnessKey);
});

test("docker-compose's Temporal server has fairness on, as the dev servers do", () => {
  const yaml = fs.readFileSync(path.join(__dirname, '../../../config/temporal-dynamicconfig.yaml'), 'utf8');
  for (const [k, v] of Object.entries(FAIRNESS_DYNAMIC_CONFIG))
    expect(yaml).toMatch(new RegExp(`^${k.replace('.', '\\.')}:\\n  - value: ${v}$`, 'm'));
  const compose = fs.readFileSync(path.join(__dirname, '../../../docker-compose.yml'), 'utf8');
  expect(compose).toContain('./config/temporal-dynamicconfig.yaml:/etc/temporal/config/dynamicconfig/gateway.yaml');
});
