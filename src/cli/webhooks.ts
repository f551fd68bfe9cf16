import { parseArgs } from 'node:util';
import type { Db } from '../db';
import { ApiError } from '../errors';
import { loadWebhookSettings } from '../webhooks/settings';
import {
  checkDescription,
  checkEndpointUrl,
  createEndpoint,
  deleteEndpoint,
  endpointView,
  listEndpoints,
  parseEventTypes,
  rotateSecret,
} from '../webhooks/endpoints';

/**
 * The webhook section of the admin CLI (src/cli/admin.ts wires these in):
 *   create-webhook <accountId> <url> [--events t1,t2] [--description text] [--json]   prints the secret once
 *   list-webhooks <accountId> [--json]
 *   delete-webhook <accountId> <webhookId> [--json]
 *   rotate-webhook-secret <accountId> <webhookId> [--json]                           prints the new secret once
 * The URL is checked as the API checks it (WEBHOOK_ALLOW_PRIVATE_URLS of the CLI's environment).
 */

export const WEBHOOK_COMMANDS = ['create-webhook', 'list-webhooks', 'delete-webhook', 'rotate-webhook-secret'] as const;
export type WebhookCommand = (typeof WEBHOOK_COMMANDS)[number];

export const WEBHOOKS_USAGE = [
  'create-webhook <accountId> <url> [--events video.completed,...] [--description text]',
  '                                            register an endpoint (default: every event type; the secret shown once)',
  "list-webhooks <accountId>                   an account's endpoints",
  'delete-webhook <accountId> <webhookId>      delete an endpoint (its pending deliveries stop)',
  'rotate-webhook-secret <accountId> <webhookId>',
  '                                            a new secret (shown once); the old one signs too for a day',
].join('\n');

export class WebhookUsageError extends Error {}
class CommandError extends Error {}

export function isWebhookCommand(cmd: string): cmd is WebhookCommand {
  return (WEBHOOK_COMMANDS as readonly string[]).includes(cmd);
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
function uuid(v: string | undefined, what: string): string {
  if (v === undefined) throw new WebhookUsageError(`missing <${what}>`);
  if (!UUID_RE.test(v)) throw new WebhookUsageError(`<${what}> must be a UUID, got ${JSON.stringify(v)}`);
  return v.toLowerCase();
}

/** ApiErrors from the shared checks read as usage errors here. */
async function checked<T>(f: () => T | Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof ApiError) throw new WebhookUsageError(e.message);
    throw e;
  }
}

/**
 * Parses and validates the arguments (WebhookUsageError before any database work), then returns the work to do.
 * The work prints through `out` and returns the exit code.
 */
export async function planWebhookCommand(
  cmd: WebhookCommand,
  argv: string[],
  env: NodeJS.ProcessEnv,
): Promise<(db: Db, out: (l: string) => void) => Promise<number>> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: { events: { type: 'string' }, description: { type: 'string' }, json: { type: 'boolean' } },
    });
  } catch (e) {
    throw new WebhookUsageError((e as Error).message);
  }
  const { values, positionals: pos } = parsed;
  const json = values.json === true;
  const expect = (n: number) => {
    if (pos.length > n) throw new WebhookUsageError(`${cmd}: unexpected argument ${JSON.stringify(pos[n])}`);
  };
  if (cmd !== 'create-webhook' && (values.events !== undefined || values.description !== undefined))
    throw new WebhookUsageError(`${cmd} takes no --events or --description`);
  const settings = loadWebhookSettings(env);
  const print = (out: (l: string) => void, human: string[], data: unknown) => {
    if (json) out(JSON.stringify(data, null, 2));
    else human.forEach((l) => out(l));
  };
  const requireAccount = async (db: Db, id: string) => {
    if (!(await db.query('SELECT 1 FROM accounts WHERE id = $1', [id])).rowCount)
      throw new CommandError(`account ${id} not found`);
  };
  const secretLines = (secret: string) => [
    '',
    `  ${secret}`,
    '',
    'Store the signing secret now: it is not shown again.',
  ];

  switch (cmd) {
    case 'create-webhook': {
      expect(2);
      const accountId = uuid(pos[0], 'accountId');
      if (pos[1] === undefined) throw new WebhookUsageError('missing <url>');
      const events = await checked(() => parseEventTypes(values.events, '--events', true));
      const description = await checked(() => checkDescription(values.description));
      const url = await checked(() => checkEndpointUrl(pos[1], settings));
      return async (db, out) => {
        await requireAccount(db, accountId);
        const { endpoint, secret } = await createEndpoint(
          db,
          accountId,
          { url, events, description },
          settings.maxEndpoints,
        );
        print(
          out,
          [`created webhook ${endpoint.id} -> ${endpoint.url} (${endpoint.events.join(', ')})`, ...secretLines(secret)],
          endpointView(endpoint, secret),
        );
        return 0;
      };
    }
    case 'list-webhooks': {
      expect(1);
      const accountId = uuid(pos[0], 'accountId');
      return async (db, out) => {
        await requireAccount(db, accountId);
        const list = await listEndpoints(db, accountId);
        print(
          out,
          list.length
            ? list.map((e) => `${e.id}  ${e.url}  ${e.events.join(',')}${e.description ? `  (${e.description})` : ''}`)
            : ['no webhook endpoints'],
          list.map((e) => endpointView(e)),
        );
        return 0;
      };
    }
    case 'delete-webhook':
    case 'rotate-webhook-secret': {
      expect(2);
      const accountId = uuid(pos[0], 'accountId');
      const id = uuid(pos[1], 'webhookId');
      return async (db, out) => {
        await requireAccount(db, accountId);
        if (cmd === 'delete-webhook') {
          if (!(await deleteEndpoint(db, accountId, id)))
            throw new CommandError(`no webhook ${id} on account ${accountId}`);
          print(out, [`deleted webhook ${id}`], { id, deleted: true });
          return 0;
        }
        const r = await rotateSecret(db, accountId, id, settings.rotationGraceMs);
        if (!r) throw new CommandError(`no webhook ${id} on account ${accountId}`);
        print(out, [`new secret for webhook ${id}`, ...secretLines(r.secret)], endpointView(r.endpoint, r.secret));
        return 0;
      };
    }
  }
}
