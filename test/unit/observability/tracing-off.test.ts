import { spawnSync } from 'node:child_process';
import path from 'node:path';

/**
 * Tracing off loads nothing: with no OTLP endpoint in the environment, the API and worker entry points and
 * initTracing() load no OpenTelemetry SDK module and no Temporal tracing interceptor. (prom-client loads the
 * small @opentelemetry/api package for its exemplars, with or without tracing.) With an endpoint, the SDK loads.
 */

const root = path.join(__dirname, '../../..');

function loadedPackages(env: NodeJS.ProcessEnv): { tracer: boolean; packages: string[] } {
  const script = `
    require('./src/server'); require('./src/worker');
    require('./src/observability/tracing').initTracing('probe').then(async (t) => {
      const pkgs = new Set(Object.keys(require.cache).filter((k) => /opentelemetry/.test(k))
        .map((k) => k.split('node_modules/').pop().split('/').slice(0, 2).join('/')));
      process.stdout.write(JSON.stringify({ tracer: t !== null, packages: [...pkgs].sort() }));
      await require('./src/observability/tracing').shutdownTracing();
    });`;
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
  const r = spawnSync(process.execPath, ['-r', './test/support/swcRegister.js', '-e', script], {
    cwd: root,
    env: { ...clean, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
}

test('no endpoint: no SDK, no interceptors loaded', () => {
  expect(loadedPackages({})).toEqual({ tracer: false, packages: ['@opentelemetry/api'] });
});

test('an endpoint (or OTEL_TRACES_EXPORTER=otlp) loads the SDK; OTEL_SDK_DISABLED or exporter none: off', () => {
  const on = loadedPackages({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
  expect(on.tracer).toBe(true);
  expect(on.packages).toEqual(
    expect.arrayContaining(['@opentelemetry/sdk-trace-base', '@opentelemetry/exporter-trace-otlp-proto']),
  );
  expect(loadedPackages({ OTEL_TRACES_EXPORTER: 'otlp' }).tracer).toBe(true);
  expect(loadedPackages({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_SDK_DISABLED: 'true' })).toEqual({
    tracer: false,
    packages: ['@opentelemetry/api'],
  });
  expect(
    loadedPackages({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_TRACES_EXPORTER: 'none' }).tracer,
  ).toBe(false);
});
