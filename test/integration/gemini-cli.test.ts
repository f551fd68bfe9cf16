import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * Gemini CLI, headless (`gemini -p`), pointed at the gateway by GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY: a
 * prompt with a tool round trip (the emulated upstream calls the CLI's first tool; the CLI runs it and sends the
 * result back) on a Claude model, an OpenAI model, and with no model chosen (its own default name, which the
 * default catalog's `gemini-*` pattern maps to gemini-2.5-flash).
 */

let gw: TestGateway;
let key: string;
let home: string;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
  ({ key } = await gw.account(50_000_000));
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'gemini-home-'));
  fs.mkdirSync(path.join(home, '.gemini'));
  fs.writeFileSync(
    path.join(home, '.gemini', 'settings.json'),
    JSON.stringify({
      security: { auth: { selectedType: 'gemini-api-key' } },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
    }),
  );
});
afterAll(async () => {
  await gw.close();
  fs.rmSync(home, { recursive: true, force: true });
});

function runGemini(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const bin = path.join(__dirname, '../../node_modules/.bin/gemini');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    GOOGLE_GEMINI_BASE_URL: gw.url,
    GEMINI_API_KEY: key,
    GEMINI_CLI_TRUST_WORKSPACE: 'true',
    GEMINI_TELEMETRY_ENABLED: 'false',
    NO_BROWSER: 'true',
    CI: '1',
  };
  return new Promise((resolve) => {
    const child = spawn(bin, args, { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test.each([
  ['a Claude model', ['-m', 'claude-sonnet-4-6'], '/anthropic/v1/messages'],
  ['an OpenAI model', ['-m', 'gpt-4o-mini'], '/openai/v1/chat/completions'],
  ['its own default model name', [], '/gemini/v1beta/models/gemini-2.5-flash:'],
])(
  'Gemini CLI completes a prompt with a tool round trip on %s',
  async (_what, modelArgs, upstreamPath) => {
    gw.emulator.control.reset();
    const r = await runGemini([...modelArgs, '-p', 'say hello', '--yolo', '--output-format', 'json']);
    if (r.code !== 0) throw new Error(`gemini exited ${r.code}: ${r.stdout.slice(0, 1500)} ${r.stderr.slice(0, 1500)}`);
    const out = JSON.parse(r.stdout) as {
      response: string;
      stats: { models: Record<string, unknown>; tools: { totalCalls: number; totalSuccess: number } };
    };
    expect(out.response).toMatch(/^The tool returned: /);
    expect(out.stats.tools.totalCalls).toBeGreaterThanOrEqual(1);
    expect(out.stats.tools.totalSuccess).toBe(out.stats.tools.totalCalls);
    const turns = gw.emulator.control.requests.filter((q) => q.method === 'POST');
    expect(turns.length).toBeGreaterThanOrEqual(2);
    expect(turns.map((q) => q.path).filter((p) => !p.startsWith(upstreamPath))).toEqual([]);
    if (!modelArgs.length) {
      // The CLI's own default name, a gemini-* pattern of the default catalog.
      const [name] = Object.keys(out.stats.models);
      expect(name).toMatch(/^gemini-/);
      expect(gw.deps.catalog.get(name)?.id).toBe('gemini-2.5-flash');
    }
  },
  120_000,
);
