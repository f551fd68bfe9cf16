import { badRequest } from '../errors';
import { compileJson, type Validator } from '../schemas';
import type { OrgDeps } from './http';
import { cursorOf, isToken, limitOf, listOf, one, unix } from './ids';
import { NAME } from './names';
import { createAdminKey, deleteAdminKey, getAdminKey, listAdminKeys, type AdminKeyRow } from './adminKeys';
import { audited, missing, bodyOf, type RouteTable } from './routes';

const checkCreate: Validator<{ name: string; expires_in_seconds?: number }> = compileJson({
  type: 'object',
  required: ['name'],
  properties: { name: NAME, expires_in_seconds: { type: 'integer', minimum: 1, maximum: 31536000 } },
  additionalProperties: false,
});

export const adminKeyObject = (k: AdminKeyRow) => ({
  object: 'organization.admin_api_key' as const,
  id: k.id,
  name: k.name,
  redacted_value: k.redacted_value,
  created_at: unix(k.created_at)!,
  expires_at: unix(k.expires_at),
  last_used_at: unix(k.last_used_at),
  owner: k.owner_user_id ? { type: 'user', object: 'organization.user', id: k.owner_user_id, role: 'owner' } : {},
});

const ADMIN_SCOPES = ['api.management.read', 'api.management.write'];

/** /v1/organization/admin_api_keys: an admin key makes and deletes the organization's admin keys. */
export function adminKeyRoutes(t: RouteTable, deps: OrgDeps): void {
  const P = '/v1/organization/admin_api_keys';
  t.get(P, async (ctx, caller) => {
    const limit = limitOf(ctx.query);
    const after = cursorOf(ctx.query);
    const order = one(ctx.query, 'order') ?? 'asc';
    if (order !== 'asc' && order !== 'desc') throw badRequest(`Invalid 'order': expected asc or desc.`, 'order');
    const rows = await listAdminKeys(deps.db, caller.accountId, { after, limit, order });
    if (!rows) throw badRequest(`Invalid 'after': no admin key '${after}'.`, 'after');
    return listOf(rows, limit, adminKeyObject);
  });
  t.post(P, async (ctx, caller) => {
    const b = bodyOf(ctx);
    checkCreate(b);
    const { row, value } = (await audited(
      deps,
      caller,
      (c) =>
        createAdminKey(c, caller.accountId, {
          name: b.name,
          expiresInSeconds: b.expires_in_seconds,
          ownerUserId: caller.userId,
        }),
      (made) => [
        {
          type: 'api_key.created',
          resourceId: made.row.id,
          details: { id: made.row.id, data: { scopes: ADMIN_SCOPES } },
        },
      ],
    ))!;
    return { ...adminKeyObject(row), value };
  });
  t.get(`${P}/:key_id`, async (ctx, caller) => {
    const id = ctx.params.key_id;
    const k = isToken(id) ? await getAdminKey(deps.db, caller.accountId, id) : null;
    if (!k) throw missing('admin API key', id);
    return adminKeyObject(k);
  });
  t.delete(`${P}/:key_id`, async (ctx, caller) => {
    const id = ctx.params.key_id;
    const done =
      isToken(id) &&
      (await audited(
        deps,
        caller,
        async (c) => ((await deleteAdminKey(c, caller.accountId, id)) ? id : null),
        () => [{ type: 'api_key.deleted', resourceId: id, details: { id } }],
      ));
    if (!done) throw missing('admin API key', id);
    return { object: 'organization.admin_api_key.deleted', id, deleted: true };
  });
}
