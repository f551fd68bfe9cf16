import { badRequest } from '../errors';
import { compileJson, type Validator } from '../schemas';
import type { OrgCaller, OrgDeps } from './http';
import { boolOf, cursorOf, isToken, isUuid, limitOf, listOf, unix } from './ids';
import { LABEL, NAME } from './names';
import {
  archiveProject,
  createProject,
  getProject,
  listProjects,
  projectObject,
  updateProject,
  type ProjectRow,
} from './projects';
import { deleteProjectKey, getProjectKey, listProjectKeys, projectKeyObject } from './projectApiKeys';
import {
  createServiceAccount,
  deleteServiceAccount,
  getServiceAccount,
  listServiceAccounts,
  serviceAccountObject,
} from './serviceAccounts';
import { audited, bodyOf, missing, type RouteTable } from './routes';

const EXTERNAL_KEY = { anyOf: [LABEL, { type: 'null' }] };
const checkCreate: Validator<{ name: string; external_key_id?: string | null }> = compileJson({
  type: 'object',
  required: ['name'],
  properties: {
    name: NAME,
    external_key_id: EXTERNAL_KEY,
    residency: { anyOf: [{ const: 'GLOBAL' }, { type: 'null' }] },
  },
  additionalProperties: false,
});
const checkUpdate: Validator<{ name?: string | null; external_key_id?: string | null }> = compileJson({
  type: 'object',
  properties: { name: { anyOf: [NAME, { type: 'null' }] }, external_key_id: EXTERNAL_KEY },
  additionalProperties: false,
});
const checkServiceAccount: Validator<{ name: string; create_service_account_only?: boolean | null }> = compileJson({
  type: 'object',
  required: ['name'],
  properties: { name: NAME, create_service_account_only: { enum: [false, null] } },
  additionalProperties: false,
});

/** The project named in the path, of the caller's organization, or 404. */
export async function pathProject(deps: OrgDeps, caller: OrgCaller, id: string): Promise<ProjectRow> {
  const p = isToken(id) ? await getProject(deps.db, caller.accountId, id) : null;
  if (!p) throw missing('project', id);
  return p;
}

function live(p: ProjectRow): ProjectRow {
  if (p.archived_at) throw badRequest(`Project '${p.id}' is archived and cannot be changed.`, 'project_id');
  return p;
}

const projectRef = (p: ProjectRow) => ({ id: p.id, name: p.name });

/** /v1/organization/projects and what hangs under a project: its API keys and service accounts. */
export function projectRoutes(t: RouteTable, deps: OrgDeps): void {
  const P = '/v1/organization/projects';
  t.get(P, async (ctx, caller) => {
    const q = ctx.query;
    const limit = limitOf(q);
    const after = cursorOf(q);
    const rows = await listProjects(deps.db, caller.accountId, {
      after,
      limit,
      includeArchived: boolOf(q, 'include_archived'),
    });
    if (!rows) throw badRequest(`Invalid 'after': no project '${after}'.`, 'after');
    return listOf(rows, limit, projectObject);
  });
  t.post(P, async (ctx, caller) => {
    const b = bodyOf(ctx);
    checkCreate(b);
    const p = await audited(
      deps,
      caller,
      (c) => createProject(c, caller.accountId, { name: b.name, externalKeyId: b.external_key_id }),
      (p) => [
        {
          type: 'project.created',
          project: projectRef(p),
          resourceId: p.id,
          details: { id: p.id, data: { name: p.name, title: p.name } },
        },
      ],
    );
    return projectObject(p!);
  });
  t.get(`${P}/:project_id`, async (ctx, caller) =>
    projectObject(await pathProject(deps, caller, ctx.params.project_id)),
  );
  t.post(`${P}/:project_id`, async (ctx, caller) => {
    const old = live(await pathProject(deps, caller, ctx.params.project_id));
    const b = bodyOf(ctx);
    checkUpdate(b);
    const p = await audited(
      deps,
      caller,
      (c) => updateProject(c, caller.accountId, old.id, { name: b.name, externalKeyId: b.external_key_id }),
      (p) => [
        {
          type: 'project.updated',
          project: projectRef(p),
          resourceId: p.id,
          details: { id: p.id, changes_requested: { ...(b.name ? { title: b.name } : {}) } },
        },
      ],
    );
    return projectObject(p!);
  });
  t.action(`${P}/:project_id/archive`, async (ctx, caller) => {
    const old = await pathProject(deps, caller, ctx.params.project_id);
    if (old.is_default) throw badRequest('The default project cannot be archived.', 'project_id');
    if (old.archived_at) return projectObject(old);
    const p = await audited(
      deps,
      caller,
      (c) => archiveProject(c, caller.accountId, old.id),
      (p) => [{ type: 'project.archived', project: projectRef(p), resourceId: p.id, details: { id: p.id } }],
    );
    return projectObject(p!);
  });

  // The project's API keys (made in the console, or with a service account below).
  t.get(`${P}/:project_id/api_keys`, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const limit = limitOf(ctx.query);
    const after = cursorOf(ctx.query, 'after', isUuid);
    const rows = await listProjectKeys(deps.db, caller.accountId, p.id, { after, limit });
    if (!rows) throw badRequest(`Invalid 'after': no API key '${after}' in this project.`, 'after');
    return listOf(rows, limit, projectKeyObject);
  });
  t.get(`${P}/:project_id/api_keys/:key_id`, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const id = ctx.params.key_id;
    const k = isUuid(id) ? await getProjectKey(deps.db, caller.accountId, p.id, id) : null;
    if (!k) throw missing('API key', id);
    return projectKeyObject(k);
  });
  t.delete(`${P}/:project_id/api_keys/:key_id`, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const id = ctx.params.key_id;
    const done =
      isUuid(id) &&
      (await audited(
        deps,
        caller,
        async (c) => ((await deleteProjectKey(c, caller.accountId, p.id, id)) ? id : null),
        () => [{ type: 'api_key.deleted', project: projectRef(p), resourceId: id, details: { id } }],
      ));
    if (!done) throw missing('API key', id);
    return { object: 'organization.project.api_key.deleted', id, deleted: true };
  });

  // Service accounts: a bot identity and its key, made together.
  t.get(`${P}/:project_id/service_accounts`, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const limit = limitOf(ctx.query);
    const after = cursorOf(ctx.query);
    const rows = await listServiceAccounts(deps.db, caller.accountId, p.id, { after, limit });
    if (!rows) throw badRequest(`Invalid 'after': no service account '${after}' in this project.`, 'after');
    return listOf(rows, limit, serviceAccountObject);
  });
  t.post(`${P}/:project_id/service_accounts`, async (ctx, caller) => {
    const p = live(await pathProject(deps, caller, ctx.params.project_id));
    const b = bodyOf(ctx);
    checkServiceAccount(b);
    const { sa, key } = (await audited(
      deps,
      caller,
      (c) => createServiceAccount(c, caller.accountId, p.id, b.name),
      (made) => [
        {
          type: 'service_account.created',
          project: projectRef(p),
          resourceId: made.sa.id,
          details: { id: made.sa.id, data: { role: made.sa.role } },
        },
        {
          type: 'api_key.created',
          project: projectRef(p),
          resourceId: made.key.id,
          details: { id: made.key.id, data: { scopes: ['api.model.request'] } },
        },
      ],
    ))!;
    return {
      ...serviceAccountObject(sa),
      api_key: {
        object: 'organization.project.service_account.api_key',
        value: key.value,
        name: key.name,
        created_at: unix(key.createdAt)!,
        id: key.id,
      },
    };
  });
  t.get(`${P}/:project_id/service_accounts/:sa_id`, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const id = ctx.params.sa_id;
    const sa = isToken(id) ? await getServiceAccount(deps.db, caller.accountId, p.id, id) : null;
    if (!sa) throw missing('service account', id);
    return serviceAccountObject(sa);
  });
  t.delete(`${P}/:project_id/service_accounts/:sa_id`, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const id = ctx.params.sa_id;
    const done =
      isToken(id) &&
      (await audited(
        deps,
        caller,
        async (c) => ((await deleteServiceAccount(c, caller.accountId, p.id, id)) ? id : null),
        () => [{ type: 'service_account.deleted', project: projectRef(p), resourceId: id, details: { id } }],
      ));
    if (!done) throw missing('service account', id);
    return { object: 'organization.project.service_account.deleted', id, deleted: true };
  });
}
