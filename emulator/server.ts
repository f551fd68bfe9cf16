import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import Router from '@koa/router';
import { koaBody } from 'koa-body';
import { EmulatorControl, type Fault } from './control';
import { FAULT_SHAPES, MOUNTS } from './protocols';

/**
 * The provider emulator: one HTTP server speaking the upstreams' real wire protocols, mounted under
 * /openai/v1 (OpenAI-compatible), /anthropic (Anthropic Messages), /veo/v1beta (Gemini API long-running
 * operations), /seedance/api/v3 (BytePlus content generation tasks), /bedrock (Amazon Bedrock's runtime, SigV4 and
 * event-stream frames) and /vertex (Vertex AI with its OAuth token endpoint), among others. Each protocol lives in
 * its own module, which exports its `Mount` (emulator/protocols.ts lists them); an injected fault answers in the
 * error shape of its protocol where protocols.ts gives one.
 */
export type { Mount } from './mount';

const DEPLOYMENT_PREFIX = /^\/_d\/([^/]+)(?=\/)/;

export interface Emulator {
  url: string;
  control: EmulatorControl;
  server: http.Server;
  close(): Promise<void>;
}

export async function startEmulator(opts: { port?: number; host?: string } = {}): Promise<Emulator> {
  const control = new EmulatorControl();
  const app = new Koa();
  app.silent = true;
  let url = '';
  const router = new Router();
  router.post('/_emulator/faults', koaBody(), (ctx) => {
    control.addFault(ctx.request.body as unknown as Fault);
    ctx.body = { ok: true };
  });
  router.post('/_emulator/config', koaBody(), (ctx) => {
    Object.assign(control.settings, ctx.request.body as object);
    ctx.body = control.settings;
  });
  router.post('/_emulator/reset', (ctx) => {
    control.reset();
    ctx.body = { ok: true };
  });
  router.get('/_emulator/requests', (ctx) => {
    ctx.body = control.requests;
  });
  for (const m of MOUNTS) m(router, control, () => url);
  app.use(async (ctx, next) => {
    if (ctx.path.startsWith('/_emulator/')) return next();
    // `/_d/<name>/...` is the same upstream playing deployment <name>: the prefix only selects faults.
    const d = DEPLOYMENT_PREFIX.exec(ctx.path);
    if (d) {
      ctx.path = ctx.path.slice(d[0].length);
      ctx.req.headers['x-emulator-deployment'] = d[1]; // so recorded requests say which deployment they hit
    }
    await control.passGate();
    if (control.settings.latencyMs > 0) await new Promise((r) => setTimeout(r, control.settings.latencyMs));
    const f = control.take(ctx.method, ctx.path, d ? d[1] : null);
    if (f?.delayMs) await new Promise((r) => setTimeout(r, f.delayMs));
    if (f?.drop) {
      ctx.req.socket.destroy();
      ctx.respond = false;
      return;
    }
    if (f?.resetAfterHeaders) {
      ctx.respond = false;
      ctx.res.writeHead(200, { 'content-type': 'application/json' });
      ctx.res.write('{"id":"', () => ctx.res.destroy());
      return;
    }
    if (f?.cutAfter !== undefined) ctx.state.emulatorCutAfter = f.cutAfter;
    if (f?.errorAfter !== undefined) ctx.state.emulatorErrorAfter = f.errorAfter;
    if (f?.status) {
      ctx.status = f.status;
      if (f.retryAfter !== undefined) ctx.set('retry-after', f.retryAfter);
      const shaped = FAULT_SHAPES.find(([prefix]) => ctx.path.startsWith(prefix));
      if (shaped) return shaped[1](ctx, f.status);
      ctx.body = {
        error: {
          message: `emulated failure ${f.status}`,
          type: f.status >= 500 ? 'server_error' : 'invalid_request_error',
          param: null,
          code: `emulated_${f.status}`,
        },
      };
      return;
    }
    await next();
    if (f?.answerDelayMs) await new Promise((r) => setTimeout(r, f.answerDelayMs));
  });
  app.use(router.routes()).use(router.allowedMethods());
  const server = http.createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((res) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', res));
  const addr = server.address() as AddressInfo;
  url = `http://127.0.0.1:${addr.port}`;
  return {
    url,
    control,
    server,
    close: () =>
      new Promise<void>((res) => {
        server.close(() => res());
        server.closeAllConnections();
      }),
  };
}
