import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * A catalog for routing tests: every provider is the test's emulator playing a named deployment (its baseUrl has
 * the emulator's `/_d/<name>` prefix, so a fault can hit that one deployment), plus `dead`, a port nothing listens
 * on (connection refused). `pools` lists models with the deployments they have, each on its own provider.
 */
export interface PoolSpec {
  id: string;
  mode?: 'chat' | 'completion' | 'embedding' | 'speech' | 'transcription' | 'image' | 'video';
  upstreamModel: string;
  pricing: Record<string, number>;
  deployments: { id: string; weight?: number; dead?: boolean; apiKeyEnv?: string }[];
  fallbacks?: string[];
  maxOutputTokens?: number;
  timeoutMs?: number;
  /** Provider kind of its deployments (default openai), and `api: responses` for a native Responses model. */
  kind?: 'openai' | 'anthropic' | 'seedance';
  api?: 'responses';
  /** Video models: allowedDurations, defaultDuration, family. */
  video?: { allowedDurations: number[]; defaultDuration: number; family: string };
}

const PROTOCOL_PATHS = { openai: 'openai/v1', anthropic: 'anthropic', seedance: 'seedance/api/v3' };

/** A loopback port with nothing listening on it. */
export async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((res) => srv.listen(0, '127.0.0.1', res));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((res) => srv.close(() => res()));
  return port;
}

/** Writes the catalog to a temporary file and returns its path. */
export async function writeRoutingCatalog(pools: PoolSpec[]): Promise<string> {
  const dead = await closedPort();
  const providers: Record<string, unknown> = {};
  const models = pools.map((p) => {
    const kind = p.kind ?? 'openai';
    const protocol = PROTOCOL_PATHS[kind];
    for (const d of p.deployments) {
      providers[`p-${d.id}`] = {
        kind,
        apiKeyEnv: 'EMULATOR_API_KEY',
        timeoutMs: p.timeoutMs ?? 5000,
        baseUrl: d.dead ? `http://127.0.0.1:${dead}/${protocol}` : `\${EMULATOR_URL}/_d/${d.id}/${protocol}`,
      };
    }
    return {
      id: p.id,
      mode: p.mode ?? 'chat',
      pricing: p.pricing,
      ...(p.api ? { api: p.api } : {}),
      ...p.video,
      ...(p.maxOutputTokens ? { maxOutputTokens: p.maxOutputTokens } : {}),
      ...(p.fallbacks ? { fallbacks: p.fallbacks } : {}),
      deployments: p.deployments.map((d) => ({
        id: d.id,
        provider: `p-${d.id}`,
        upstreamModel: p.upstreamModel,
        ...(d.weight ? { weight: d.weight } : {}),
        ...(d.apiKeyEnv ? { apiKeyEnv: d.apiKeyEnv } : {}),
      })),
    };
  });
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-routing-')), 'catalog.json');
  fs.writeFileSync(file, JSON.stringify({ providers, models }));
  return file;
}
