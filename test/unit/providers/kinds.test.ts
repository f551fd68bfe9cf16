import fs from 'node:fs';
import path from 'node:path';
import { Catalog, type ProviderConfig } from '../../../src/catalog/catalog';
import {
  chatProtocol,
  KINDS,
  PROVIDER_KINDS,
  wireOf,
  type KindRow,
  type ProviderKind,
} from '../../../src/providers/kinds';

/*
 * The kinds table (src/providers/kinds.ts) is the one place a kind is described: every kind has a complete row and a
 * folder of its own, the row's answers agree with the adapters it builds, and no file outside src/providers/ branches
 * on a kind by name or on an adapter's class (docs/architecture.md, "Provider kinds").
 */

const root = path.resolve(__dirname, '../../..');
const FIELDS: (keyof KindRow)[] = [
  'adapter',
  'chat',
  'streaming',
  'embeddings',
  'video',
  'nativeBatches',
  'reports',
  'credentials',
  'telemetryName',
  'litellm',
  'owner',
];

/** A provider of `kind` as the catalog would load it (a cloud kind gets its region and project). */
function providerOf(kind: ProviderKind): ProviderConfig {
  const cloud = KINDS[kind].credentials.source === 'cloud';
  const file = {
    providers: {
      p: {
        kind,
        ...(cloud ? { region: 'us-east-1', project: 'proj' } : { baseUrl: 'http://127.0.0.1:9', apiKeyEnv: 'K' }),
        ...(KINDS[kind].credentials.apiVersion ? { apiVersion: 'v1' } : {}),
      },
    },
    models: [],
  };
  return new Catalog(file as never, KINDS, { K: 'key' }).providers.get('p')!;
}

describe.each(PROVIDER_KINDS)('kind %s', (kind) => {
  const row: KindRow = KINDS[kind];

  test('has a complete row and a folder whose kind.ts is the row', async () => {
    for (const f of FIELDS) expect(row[f]).not.toBeUndefined();
    expect(row.chat === 'by model').toBe(row.wireOf !== undefined);
    expect(row.chat !== null || row.video !== null).toBe(true);
    const folder = (await import(path.join(root, 'src/providers', kind, 'kind.ts'))) as Record<string, unknown>;
    expect(Object.values(folder)).toContain(row);
    expect(row.streaming).toBe(row.chat !== null);
    if (row.credentials.source === 'cloud') expect(row.credentials.defaultBaseUrl).toBeDefined();
  });

  test('its adapters are of its kind and answer as its row says', async () => {
    const p = providerOf(kind);
    const adapter = row.adapter?.(p, {});
    try {
      expect(adapter === undefined).toBe(row.chat === null);
      if (adapter) {
        expect(adapter.kind).toBe(kind);
        expect(typeof adapter.embed === 'function').toBe(row.embeddings === 'gemini');
      }
      const video = row.video?.adapter(p);
      if (video) {
        expect(video.id).toBe('p');
        await video.close();
      }
      if (row.nativeBatches) expect(typeof row.nativeBatches.api(p).submit).toBe('function');
    } finally {
      await adapter?.close();
    }
  });

  test('its wire protocol is the chat protocol of its chat models, or its video protocol', () => {
    const models = ['claude-sonnet-4-6', 'gemini-2.5-pro', 'veo-3.0-generate-001', 'gpt-4o', 'us.meta.llama3-70b'];
    for (const m of models) {
      const wire = wireOf(kind, m);
      const chat = chatProtocol(kind, m);
      if (chat) expect(wire).toBe(chat);
      else expect(['converse', 'veo', 'seedance']).toContain(wire);
    }
  });
});

/** Each kind named as a string literal: 'openai', "azure-openai", ... */
const KIND_LITERAL = `['"](?:${PROVIDER_KINDS.join('|')})['"]`;
/** Every concrete adapter class under src/providers/ (read from the sources, so a new kind's are checked too). */
const ADAPTERS = tsFiles('src/providers')
  .flatMap((f) => [...fs.readFileSync(path.join(root, f), 'utf8').matchAll(/^export class (\w+Adapter)\b/gm)])
  .map((m) => m[1])
  .join('|');
const BRANCHES = [
  new RegExp(`\\bkind\\s*[!=]==?\\s*${KIND_LITERAL}`),
  new RegExp(`${KIND_LITERAL}\\s*[!=]==?\\s*[\\w.?]*\\bkind\\b`),
  new RegExp(`\\binstanceof\\s+(?:${ADAPTERS})\\b`),
];

function tsFiles(dir: string): string[] {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return tsFiles(rel);
    return e.name.endsWith('.ts') ? [rel] : [];
  });
}

test('no file outside src/providers/ compares a kind to a literal or asks an adapter its class', () => {
  expect(ADAPTERS.split('|')).toEqual(expect.arrayContaining(['OpenAIAdapter', 'GeminiAdapter', 'BedrockAdapter']));
  const files = ['src', 'activities', 'workflows'].flatMap(tsFiles).filter((f) => !f.startsWith('src/providers/'));
  const found = files.flatMap((f) =>
    fs
      .readFileSync(path.join(root, f), 'utf8')
      .split('\n')
      .flatMap((line, i) => (BRANCHES.some((re) => re.test(line)) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
  );
  expect(found).toEqual([]);
});

test('a switch on a kind names no kind outside src/providers/', () => {
  const files = ['src', 'activities', 'workflows'].flatMap(tsFiles).filter((f) => !f.startsWith('src/providers/'));
  const found = files.filter((f) => {
    const text = fs.readFileSync(path.join(root, f), 'utf8');
    return new RegExp(`switch\\s*\\([^)]*\\bkind\\)\\s*\\{[^}]*case\\s+${KIND_LITERAL}`, 's').test(text);
  });
  expect(found).toEqual([]);
});
