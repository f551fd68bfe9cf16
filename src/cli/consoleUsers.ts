import { randomBytes } from 'node:crypto';
import type { Db } from '../db';
import { createLogin, listLogins, setLoginDisabled, setPassword, type Role } from '../console';

/**
 * The console-login section of the admin CLI (src/cli/admin.ts wires these in):
 *   create-login <accountId> <email> [--operator] [--password <pw>]
 *   set-password <email> [--password <pw>]
 *   list-logins [accountId]
 *   disable-login <email>
 *   enable-login <email>
 * Without --password (or env CONSOLE_PASSWORD) a strong random password is generated and printed once.
 */

export const CONSOLE_USER_COMMANDS = [
  'create-login',
  'set-password',
  'list-logins',
  'disable-login',
  'enable-login',
] as const;
export type ConsoleUserCommand = (typeof CONSOLE_USER_COMMANDS)[number];

export const CONSOLE_USERS_USAGE = [
  'create-login <accountId> <email> [--operator] [--password <pw>]   ' +
    'console login for an account (prints the password if generated)',
  "set-password <email> [--password <pw>]                            new password; ends the login's sessions",
  "list-logins [accountId]                                           console logins (all, or one account's)",
  'disable-login <email> | enable-login <email>                      ' +
    'block or unblock a login (disabling ends its sessions)',
].join('\n');

export class UsageError extends Error {}

export function isConsoleUserCommand(cmd: string): cmd is ConsoleUserCommand {
  return (CONSOLE_USER_COMMANDS as readonly string[]).includes(cmd);
}

/** A random password: 18 base64url characters (108 bits). */
export function generatePassword(): string {
  return randomBytes(14).toString('base64url').slice(0, 18);
}

function parse(args: string[]): { positional: string[]; operator: boolean; password?: string } {
  const positional: string[] = [];
  let operator = false;
  let password: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--operator') operator = true;
    else if (a === '--password') {
      password = args[++i];
      if (password === undefined) throw new UsageError('--password needs a value');
    } else if (a.startsWith('--password=')) password = a.slice('--password='.length);
    else if (a.startsWith('--')) throw new UsageError(`unknown option ${a}`);
    else positional.push(a);
  }
  return { positional, operator, password };
}

/** Runs one console-login command; returns the lines to print. Throws UsageError for bad arguments. */
export async function runConsoleUserCommand(
  db: Db,
  cmd: ConsoleUserCommand,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<string[]> {
  const { positional, operator, password: given } = parse(args);
  const need = (n: number, usage: string) => {
    if (positional.length !== n) throw new UsageError(`usage: ${usage}`);
  };
  switch (cmd) {
    case 'create-login': {
      need(2, 'create-login <accountId> <email> [--operator] [--password <pw>]');
      const fromUser = given ?? env.CONSOLE_PASSWORD;
      const password = fromUser ?? generatePassword();
      const role: Role = operator ? 'operator' : 'customer';
      const u = await createLogin(db, { accountId: positional[0], email: positional[1], password, role });
      return [
        `created ${u.role} login ${u.email} for account ${u.accountId} (${u.accountName})`,
        ...(fromUser ? [] : [`password: ${password}`]),
      ];
    }
    case 'set-password': {
      need(1, 'set-password <email> [--password <pw>]');
      const fromUser = given ?? env.CONSOLE_PASSWORD;
      const password = fromUser ?? generatePassword();
      await setPassword(db, positional[0], password);
      return [
        `password changed for ${positional[0]}; its sessions were ended`,
        ...(fromUser ? [] : [`password: ${password}`]),
      ];
    }
    case 'list-logins': {
      if (positional.length > 1) throw new UsageError('usage: list-logins [accountId]');
      const rows = await listLogins(db, positional[0]);
      if (!rows.length) return ['no console logins'];
      return rows.map((u) =>
        [u.email, u.role, u.accountId, u.accountName, u.disabledAt ? 'disabled' : 'active'].join('\t'),
      );
    }
    case 'disable-login':
    case 'enable-login': {
      need(1, `${cmd} <email>`);
      await setLoginDisabled(db, positional[0], cmd === 'disable-login');
      return [`${positional[0]} ${cmd === 'disable-login' ? 'disabled (sessions ended)' : 'enabled'}`];
    }
  }
}
