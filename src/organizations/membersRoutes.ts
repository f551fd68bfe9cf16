import type Router from '@koa/router';
import { ApiError, badRequest, conflict } from '../errors';
import { tx, PG_ERROR, pgErrorCode } from '../db';
import { jsonBody, route, type GatewayState } from '../api/middleware';
import { hashPassword, passwordProblem } from '../auth';
import { compileJson, type Validator } from '../schemas';
import { appendAudit } from './audit';
import type { OrgDeps } from './http';
import { cursorOf, isToken, isUuid, limitOf, listOf } from './ids';
import { claimInvite, createInvite, deleteInvite, getInvite, inviteObject, listInvites } from './invites';
import {
  getMember,
  getProjectMember,
  keepAnOwner,
  listMembers,
  listProjectMembers,
  projectUserObject,
  putProjectMember,
  removeMember,
  removeProjectMember,
  setMemberRole,
  userObject,
} from './members';
import { smtpMailer, type Mailer } from './mail';
import { getProject } from './projects';
import { pathProject } from './projectsRoutes';
import { audited, bodyOf, missing, type RouteTable } from './routes';
import { EMAIL } from './names';

const checkInvite: Validator<{
  email: string;
  role: 'owner' | 'reader';
  projects?: { id: string; role: 'owner' | 'member' }[];
}> = compileJson({
  type: 'object',
  required: ['email', 'role'],
  properties: {
    email: EMAIL,
    role: { enum: ['owner', 'reader'] },
    projects: {
      type: 'array',
      maxItems: 100,
      items: {
        type: 'object',
        required: ['id', 'role'],
        properties: { id: { type: 'string', maxLength: 80 }, role: { enum: ['owner', 'member'] } },
        additionalProperties: false,
      },
    },
  },
  additionalProperties: false,
});
const checkRole: Validator<{ role: 'owner' | 'reader' }> = compileJson({
  type: 'object',
  required: ['role'],
  properties: { role: { enum: ['owner', 'reader'] } },
  additionalProperties: false,
});
const checkProjectUser: Validator<{ user_id: string; role: 'owner' | 'member' }> = compileJson({
  type: 'object',
  required: ['user_id', 'role'],
  properties: { user_id: { type: 'string', maxLength: 80 }, role: { enum: ['owner', 'member'] } },
  additionalProperties: false,
});
const checkProjectRole: Validator<{ role: 'owner' | 'member' }> = compileJson({
  type: 'object',
  required: ['role'],
  properties: { role: { enum: ['owner', 'member'] } },
  additionalProperties: false,
});
const checkAccept: Validator<{ token: string; password: string }> = compileJson({
  type: 'object',
  required: ['token', 'password'],
  properties: { token: { type: 'string', maxLength: 100 }, password: { type: 'string', maxLength: 200 } },
  additionalProperties: false,
});

/** /v1/organization/users, /invites and /projects/{id}/users: members with OpenAI's roles. */
export function memberRoutes(t: RouteTable, deps: OrgDeps): void {
  const mailer: Mailer | null = deps.config.smtpUrl ? smtpMailer(deps.config.smtpUrl, deps.config.mailFrom) : null;
  const U = '/v1/organization/users';
  const member = async (accountId: string, id: string) => {
    const u = isUuid(id) ? await getMember(deps.db, accountId, id) : null;
    if (!u) throw missing('user', id);
    return u;
  };
  t.get(U, async (ctx, caller) => {
    const limit = limitOf(ctx.query);
    const after = cursorOf(ctx.query, 'after', isUuid);
    const e = ctx.query['emails[]'] ?? ctx.query.emails;
    const emails = e === undefined ? null : Array.isArray(e) ? e : [e];
    const rows = await listMembers(deps.db, caller.accountId, { after, limit, emails });
    if (!rows) throw badRequest(`Invalid 'after': no user '${after}'.`, 'after');
    return listOf(rows, limit, userObject);
  });
  t.get(`${U}/:user_id`, async (ctx, caller) => userObject(await member(caller.accountId, ctx.params.user_id)));
  t.post(`${U}/:user_id`, async (ctx, caller) => {
    const u = await member(caller.accountId, ctx.params.user_id);
    const b = bodyOf(ctx);
    checkRole(b);
    const row = await audited(
      deps,
      caller,
      async (c) => {
        if (u.org_role === 'owner' && b.role !== 'owner') await keepAnOwner(c, caller.accountId, u.id);
        return setMemberRole(c, caller.accountId, u.id, b.role);
      },
      () => [{ type: 'user.updated', resourceId: u.id, details: { id: u.id, changes_requested: { role: b.role } } }],
    );
    return userObject(row!);
  });
  t.delete(`${U}/:user_id`, async (ctx, caller) => {
    const u = await member(caller.accountId, ctx.params.user_id);
    await audited(
      deps,
      caller,
      async (c) => {
        if (u.org_role === 'owner') await keepAnOwner(c, caller.accountId, u.id);
        return (await removeMember(c, caller.accountId, u.id)) ? u.id : null;
      },
      () => [{ type: 'user.deleted', resourceId: u.id, details: { id: u.id } }],
    );
    return { object: 'organization.user.deleted', id: u.id, deleted: true };
  });

  const I = '/v1/organization/invites';
  t.get(I, async (ctx, caller) => {
    const limit = limitOf(ctx.query);
    const after = cursorOf(ctx.query);
    const rows = await listInvites(deps.db, caller.accountId, { after, limit });
    if (!rows) throw badRequest(`Invalid 'after': no invite '${after}'.`, 'after');
    return listOf(rows, limit, inviteObject);
  });
  t.post(I, async (ctx, caller) => {
    const b = bodyOf(ctx);
    checkInvite(b);
    const projects = b.projects ?? [];
    for (const [i, p] of projects.entries())
      if (!isToken(p.id) || !(await getProject(deps.db, caller.accountId, p.id)))
        throw badRequest(`Invalid 'projects[${i}].id': no project '${p.id}'.`, `projects[${i}].id`);
    const made = (await audited(
      deps,
      caller,
      (c) => createInvite(c, caller.accountId, { ...b, projects, ttlMs: deps.config.inviteTtlMs }),
      (m) => [
        {
          type: 'invite.sent',
          resourceId: m.invite.id,
          details: { id: m.invite.id, data: { email: m.invite.email, role: m.invite.role } },
        },
      ],
    ))!;
    const link = `${deps.config.publicBaseUrl}/console/invite#${made.token}`;
    if (mailer) {
      try {
        await mailer.send(
          made.invite.email,
          'You are invited to an organization on the model gateway',
          `Accept the invitation (it expires ${made.invite.expires_at.toISOString()}):\n\n${link}\n`,
        );
        return inviteObject(made.invite);
      } catch {
        // The invitation stands; its link goes to the inviter instead, below.
      }
    }
    // No mail: the inviter is shown the one-time link to pass on (the console shows it too).
    return { ...inviteObject(made.invite), accept_url: link };
  });
  t.get(`${I}/:invite_id`, async (ctx, caller) => {
    const id = ctx.params.invite_id;
    const i = isToken(id) ? await getInvite(deps.db, caller.accountId, id) : null;
    if (!i) throw missing('invite', id);
    return inviteObject(i);
  });
  t.delete(`${I}/:invite_id`, async (ctx, caller) => {
    const id = ctx.params.invite_id;
    let state: 'deleted' | 'accepted' | null = null;
    if (isToken(id))
      await audited(
        deps,
        caller,
        async (c) => ((state = await deleteInvite(c, caller.accountId, id)) === 'deleted' ? id : null),
        () => [{ type: 'invite.deleted', resourceId: id, details: { id } }],
      );
    if (state === 'accepted') throw conflict('This invite was accepted already; remove the user instead.');
    if (state !== 'deleted') throw missing('invite', id);
    return { object: 'organization.invite.deleted', id, deleted: true };
  });

  const P = '/v1/organization/projects/:project_id/users';
  const projectMember = async (projectId: string, id: string) => {
    const m = isUuid(id) ? await getProjectMember(deps.db, projectId, id) : null;
    if (!m) throw missing('project user', id);
    return m;
  };
  t.get(P, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const limit = limitOf(ctx.query);
    const after = cursorOf(ctx.query, 'after', isUuid);
    const rows = await listProjectMembers(deps.db, p.id, { after, limit });
    if (!rows) throw badRequest(`Invalid 'after': no user '${after}' in this project.`, 'after');
    return listOf(rows, limit, (m) => ({ ...projectUserObject(m) }));
  });
  t.post(P, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const b = bodyOf(ctx);
    checkProjectUser(b);
    if (!isUuid(b.user_id) || !(await getMember(deps.db, caller.accountId, b.user_id)))
      throw badRequest(`Invalid 'user_id': no user '${b.user_id}' in the organization.`, 'user_id');
    const m = await audited(
      deps,
      caller,
      (c) => putProjectMember(c, caller.accountId, p.id, b.user_id, b.role),
      () => [
        {
          type: 'user.added',
          project: { id: p.id, name: p.name },
          resourceId: b.user_id,
          details: { id: b.user_id, data: { role: b.role } },
        },
      ],
    );
    return projectUserObject(m!);
  });
  t.get(`${P}/:user_id`, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    return projectUserObject(await projectMember(p.id, ctx.params.user_id));
  });
  t.post(`${P}/:user_id`, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const old = await projectMember(p.id, ctx.params.user_id);
    const b = bodyOf(ctx);
    checkProjectRole(b);
    const m = await audited(
      deps,
      caller,
      (c) => putProjectMember(c, caller.accountId, p.id, old.user_id, b.role),
      () => [
        {
          type: 'user.updated',
          project: { id: p.id, name: p.name },
          resourceId: old.user_id,
          details: { id: old.user_id, changes_requested: { role: b.role } },
        },
      ],
    );
    return projectUserObject(m!);
  });
  t.delete(`${P}/:user_id`, async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const old = await projectMember(p.id, ctx.params.user_id);
    await audited(
      deps,
      caller,
      async (c) => ((await removeProjectMember(c, p.id, old.user_id)) ? old.user_id : null),
      () => [
        {
          type: 'user.deleted',
          project: { id: p.id, name: p.name },
          resourceId: old.user_id,
          details: { id: old.user_id },
        },
      ],
    );
    return { object: 'organization.project.user.deleted', id: old.user_id, deleted: true };
  });
}

/**
 * The console's acceptance of an invitation (no session yet: the token is the proof): a login of the organization
 * with the invited role and projects, made in the transaction that claims the invitation, once.
 */
export function mountInviteAcceptance(r: Router<GatewayState>, deps: OrgDeps): void {
  r.post('/console/api/invites/accept', route('/console/api/invites/accept'), jsonBody(16 * 1024), async (ctx) => {
    const b = ctx.request.body as unknown;
    checkAccept(b);
    const problem = passwordProblem(b.password);
    if (problem) throw badRequest(problem, 'password');
    const hash = await hashPassword(b.password);
    const made = await tx(deps.db, async (c) => {
      const inv = await claimInvite(c, b.token);
      if (!inv)
        throw new ApiError(
          404,
          'This invitation is unknown, used or expired.',
          'invalid_request_error',
          'token',
          'invite_invalid',
        );
      let userId: string;
      try {
        const u = await c.query(
          `INSERT INTO console_users (account_id, email, password_hash, org_role) VALUES ($1, $2, $3, $4) RETURNING id`,
          [inv.account_id, inv.email, hash, inv.role],
        );
        userId = u.rows[0].id;
      } catch (e) {
        if (pgErrorCode(e) === PG_ERROR.uniqueViolation)
          throw conflict(`A login for ${inv.email} exists already.`, 'email_taken');
        throw e;
      }
      await c.query('UPDATE invites SET user_id = $2 WHERE id = $1', [inv.id, userId]);
      for (const p of inv.projects)
        if (await getProject(c, inv.account_id, p.id)) await putProjectMember(c, inv.account_id, p.id, userId, p.role);
      await appendAudit(c, {
        accountId: inv.account_id,
        type: 'invite.accepted',
        actor: { type: 'session', session: { user: { id: userId, email: inv.email }, ip_address: ctx.ip } },
        resourceId: inv.id,
        details: { id: inv.id },
      });
      return { id: userId, email: inv.email, role: inv.role };
    });
    ctx.body = { object: 'organization.user', ...made };
  });
}
