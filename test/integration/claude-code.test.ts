import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * Claude Code as a new user runs it: no model settings at all, headless (`claude -p`), pointed at the gateway. Its
 * own default model name reaches a catalog model by pattern, its output cap (above the model's) is clamped, and a
 * tool round trip (the emulator calls the first tool; Claude Code runs it and sends the result) completes.
 */

let gw: TestGateway;
let key: string;
let home: string;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
  ({ key } = await gw.account(50_000_000));
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'claude-home-'));
});
afterAll(async () => {
  await gw.close();
  fs.rmSync(home, { recursive: true, force: true });
});

function runClaude(prompt: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const bin = path.join(__dirname, '../../node_modules/.bin/claude');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    ANTHROPIC_BASE_URL: gw.url,
    ANTHROPIC_API_KEY: key,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
    IS_SANDBOX: '1',
  };
  return new Promise((resolve) => {
    const child = spawn(bin, ['-p', prompt, '--output-format', 'json', '--dangerously-skip-permissions'], {
      cwd: home,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test('Claude Code with no model settings completes a prompt with a tool round trip', async () => {
  const r = await runClaude('say hello');
  if (r.code !== 0) throw new Error(`claude exited ${r.code}: ${r.stdout.slice(0, 1000)} ${r.stderr.slice(0, 1000)}`);
  const out = JSON.parse(r.stdout) as { is_error: boolean; result: string; modelUsage: Record<string, unknown> };
  expect(out.is_error).toBe(false);
  expect(out.result).toMatch(/^The tool returned: /);
  // Its own default name, newer than any catalog model, reached one by pattern.
  const [clientModel] = Object.keys(out.modelUsage);
  expect(clientModel).toMatch(/^claude-/);
  expect(gw.deps.catalog.get(clientModel)?.id).not.toBe(clientModel);
  const turns = gw.emulator.control.requests
    .filter((q) => q.path === '/anthropic/v1/messages')
    .map((q) => q.body as any);
  const main = turns.filter((t) => Array.isArray(t.tools) && t.tools.length > 0);
  expect(main.length).toBeGreaterThanOrEqual(2);
  const model = gw.deps.catalog.get(clientModel)!;
  for (const t of main) expect(t).toMatchObject({ model: model.upstreamModel, max_tokens: model.maxOutputTokens });
  const last = main.at(-1).messages.at(-1);
  expect(last.content.some((b: { type: string }) => b.type === 'tool_result')).toBe(true);
}, 120_000);
