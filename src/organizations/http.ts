import type { Ctx } from '../api/middleware';
import { ApiError } from '../errors';
import type { KeyResolver } from '../auth';
import type { Db } from '../db';
import type { Config } from '../config';
import type { AdminPrincipal } from './adminKeys';
import { adminKeyActor, type AuditActor } from './audit';

export interface OrgDeps {
  db: Db;
  keys: KeyResolver;
  adminKeys: { resolve(key: string): Promise<AdminPrincipal | null> };
  /** Writes this process's queued usage and charges (usage and costs read the database). */
  credit: { flush(): Promise<unknown> };
  config: Pick<Config, 'smtpUrl' | 'mailFrom' | 'publicBaseUrl' | 'inviteTtlMs' | 'keyCacheMs'>;
}

/** The caller of an organization route: an admin key of one organization (or, later, a console session). */
export interface OrgCaller {
  accountId: string;
  actor: AuditActor;
  adminKeyId: string | null;
  /** The organization role the caller acts with: a reader changes nothing (403). */
  role: 'owner' | 'reader';
  /** The member the caller acts for (an admin key's owner), if any. */
  userId: string | null;
}

function bearer(ctx: Ctx): string {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'));
  return m ? m[1] : ctx.get('x-api-key').trim();
}

/**
 * An admin key's organization; a project key is refused with 403 (it calls models and never manages), anything
 * else with 401, both in OpenAI's error shape.
 */
export async function adminCaller(ctx: Ctx, deps: OrgDeps): Promise<OrgCaller> {
  const key = bearer(ctx);
  if (!key)
    throw new ApiError(
      401,
      'You did not provide an API key. Send an admin key as Authorization: Bearer <key>.',
      'invalid_request_error',
      null,
      'missing_api_key',
    );
  const admin: AdminPrincipal | null = await deps.adminKeys.resolve(key);
  if (admin)
    return {
      accountId: admin.accountId,
      actor: adminKeyActor(admin.adminKeyId),
      adminKeyId: admin.adminKeyId,
      role: admin.role,
      userId: admin.ownerUserId,
    };
  if (await deps.keys.resolve(key))
    throw new ApiError(
      403,
      'This is a project API key: the /v1/organization/* routes need an admin API key (sk-admin-...).',
      'invalid_request_error',
      null,
      'admin_key_required',
    );
  throw new ApiError(401, 'Incorrect API key provided.', 'invalid_request_error', null, 'invalid_api_key');
}
