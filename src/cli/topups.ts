import { parseArgs } from 'node:util';
import type { Db } from '../db';
import { ApiError } from '../errors';
import { loadWebhookSettings } from '../webhooks/settings';
import { loadTopupSettings, topupService } from '../jobs/topups';

/**
 * The top-up section of the admin CLI (src/cli/admin.ts wires it in): the operators' queue of transfers that
 * matched no order, and their decision on each, recorded with who and why.
 *   topups-unmatched [--json]
 *   topup-assign <transferId> <accountId> --reason text [--json]   credit it to the account
 *   topup-return <transferId> --reason text [--json]               mark it returned to the sender
 */

export const TOPUP_COMMANDS = ['topups-unmatched', 'topup-assign', 'topup-return'] as const;
export type TopupCommand = (typeof TOPUP_COMMANDS)[number];

export const TOPUPS_USAGE = [
  'topups-unmatched                            received transfers that matched no top-up, oldest first',
  'topup-assign <transferId> <accountId> --reason text',
  '                                            credit an unmatched transfer to the account (once)',
  'topup-return <transferId> --reason text     mark an unmatched transfer returned to its sender',
].join('\n');

export class TopupUsageError extends Error {}

export function isTopupCommand(cmd: string): cmd is TopupCommand {
  return (TOPUP_COMMANDS as readonly string[]).includes(cmd);
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Checks the arguments before the database is reached; the returned function runs the command. */
export function planTopupCommand(
  cmd: TopupCommand,
  args: string[],
  env: NodeJS.ProcessEnv,
): (db: Db, out: (line: string) => void) => Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: { reason: { type: 'string' }, json: { type: 'boolean' } },
    allowPositionals: true,
    strict: true,
  });
  const want = cmd === 'topups-unmatched' ? 0 : cmd === 'topup-assign' ? 2 : 1;
  if (positionals.length !== want)
    throw new TopupUsageError(`${cmd}: expected ${want} argument${want === 1 ? '' : 's'}, got ${positionals.length}`);
  if (cmd !== 'topups-unmatched' && !values.reason?.trim()) throw new TopupUsageError(`${cmd}: --reason is required`);
  if (cmd === 'topup-assign' && !UUID_RE.test(positionals[1]))
    throw new TopupUsageError(`<accountId> must be a UUID, got ${JSON.stringify(positionals[1])}`);
  const actor = `cli:${env.USER || env.LOGNAME || 'operator'}`;
  return async (db, out) => {
    // No Temporal here: a credit's topup.succeeded deliveries are started by the worker's delivery reconciler.
    const svc = topupService({
      db,
      config: {
        topups: loadTopupSettings(env),
        webhooks: loadWebhookSettings(env),
        temporalTaskQueue: '',
        publicBaseUrl: '',
      },
      temporal: null,
    });
    try {
      if (cmd === 'topups-unmatched') {
        const list = (await svc.unmatched(1000)).data;
        if (values.json) out(JSON.stringify(list, null, 2));
        else if (!list.length) out('no unmatched transfers');
        else
          for (const t of list)
            out(`${t.id}\t${t.provider}:${t.transaction_id}\t${t.amount} VND\t${t.received_at}\t${t.content}`);
        return 0;
      }
      const t =
        cmd === 'topup-assign'
          ? await svc.resolve(positionals[0], {
              action: 'assign',
              accountId: positionals[1].toLowerCase(),
              actor,
              reason: values.reason!,
            })
          : await svc.resolve(positionals[0], { action: 'return', actor, reason: values.reason! });
      out(values.json ? JSON.stringify(t, null, 2) : `transfer ${t.id} ${t.status} (${t.amount} VND)`);
      return 0;
    } catch (e) {
      if (e instanceof ApiError) throw new Error(e.message);
      throw e;
    }
  };
}
