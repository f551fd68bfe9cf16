/*
 * Console: the organization's pages (issue 48, point 7): projects (keys, members, limits, a usage chart per
 * project), members and invites, the audit log with its filters, admin keys. They call the Admin API's own routes
 * at /console/api/organizations/<id>/... (the same objects and rules: a reader changes nothing, the server refuses
 * it too). An operator picks any organization (?org=<id>); the gateway's own entries are the audit log's "Gateway".
 */
import { api } from './api.js';
import { go } from './app.js';
import { BASE, h, num, replace, state, vnd, ymd } from './core.js';
import { PALETTE, usageChart } from './page-usage.js';
import {
  confirmDialog,
  emptyState,
  field,
  formError,
  load,
  loadList,
  loading,
  onSubmit,
  pageHead,
  showOnce,
  table,
} from './views.js';

const TABS = [
  ['projects', '/org', 'Projects'],
  ['members', '/org/members', 'Members & invites'],
  ['audit', '/org/audit', 'Audit log'],
  ['admin-keys', '/org/admin-keys', 'Admin keys'],
];
const GATEWAY = 'gateway';

const isOperator = () => state.me && state.me.user.role === 'operator';
const orgOf = (query) => query.get('org') || state.me.user.accountId;
const qs = (org) => (org === state.me.user.accountId ? '' : '?org=' + encodeURIComponent(org));
const at = (org, path) => '/organizations/' + encodeURIComponent(org) + path;
const dateOf = (unix) => (unix ? new Date(unix * 1000).toLocaleString('en-GB', { hour12: false }) : '—');
/** The list at GET `path` into `el` as a table of `headers`, a row(item) each; `empty` when there is none. */
const listTable = (el, scope, path, headers, row, empty) =>
  loadList(
    el,
    scope,
    () => api('GET', path),
    empty,
    (items) => table(headers, items.map(row)),
  );
/** A table row of `values` (text or elements), then its action cell (right-aligned; null: none). */
const cells = (attrs, values, action) =>
  h(
    'tr',
    attrs,
    values.map((v) => h('td', null, v)),
    h('td', { class: 'num' }, action || null),
  );
/** fn(), its error shown in `err`; then refresh() either way. */
async function attempt(err, fn, refresh) {
  formError(err, null);
  try {
    await fn();
  } catch (ex) {
    formError(err, ex);
  }
  refresh();
}
/** Asks first, then attempt(). */
async function confirmThen(title, text, label, err, fn, refresh) {
  if (await confirmDialog(title, text, label)) await attempt(err, fn, refresh);
}
/**
 * A form of one field, a name (ids: `<prefix>-form`, `<prefix>-name`, `create-<prefix>`): send(name) on submit,
 * its error in `err`; the form is cleared after.
 */
function nameForm(prefix, label, buttonText, err, send) {
  const btn = h('button', { type: 'submit', id: 'create-' + prefix }, buttonText);
  const input = h('input', { id: prefix + '-name', maxlength: 200, required: true });
  const form = h('form', { class: 'inline', id: prefix + '-form' }, field(label, input), btn);
  onSubmit(
    form,
    err,
    btn,
    () => input.value.trim() || new Error('Give it a name.'),
    async (name) => {
      await send(name);
      form.reset();
    },
  );
  return form;
}
const button = (cls, text, onclick) => h('button', { class: 'ghost small ' + cls, onclick }, text);
const readerNote = () =>
  h('p', { class: 'hint', id: 'reader-note' }, 'You are a reader of this organization: you can look, not change.');

/**
 * The frame of every organization page: the organization (a selector for operators), the tabs, then fill(body,
 * org) with the organization's id, name and the role the user acts with.
 */
function orgFrame(main, query, scope, active, fill) {
  const org = orgOf(query);
  const body = h('div', { id: 'org-body' });
  const picker = h('div', { class: 'org-picker' });
  const tabs = h(
    'div',
    { class: 'chips org-tabs', role: 'navigation', 'aria-label': 'Organization sections' },
    TABS.map(([key, path, text]) =>
      h('a', { href: BASE + path + qs(org), class: key === active ? 'active' : null, 'data-tab': key }, text),
    ),
  );
  replace(main, pageHead('Organization', null, picker), tabs, body);
  if (isOperator()) {
    api('GET', '/organizations').then((list) => {
      if (!scope.alive()) return;
      const sel = h(
        'select',
        {
          id: 'org-select',
          'aria-label': 'Organization',
          onchange: (e) => go(TABS.find((t) => t[0] === active)[1] + qs(e.target.value)),
        },
        active === 'audit' ? h('option', { value: GATEWAY }, 'Gateway (no organization)') : null,
        list.data.map((o) => h('option', { value: o.id }, o.name + ' · ' + o.id.slice(0, 8))),
      );
      sel.value = org;
      replace(picker, field('Organization', sel));
    });
  }
  if (org === GATEWAY) return fill(body, { id: GATEWAY, name: 'Gateway', role: 'reader' });
  load(
    body,
    scope,
    () => api('GET', at(org, '')),
    (o) => {
      if (!isOperator()) replace(picker, h('span', { class: 'badge info', id: 'org-role' }, o.name + ' · ' + o.role));
      fill(body, o);
    },
  );
}

// ---------------------------------------------------------------- projects
export function pageOrgProjects(main, _p, query, scope) {
  orgFrame(main, query, scope, 'projects', (body, o) => {
    const list = h('div', { id: 'projects' });
    const err = h('div');
    const form = nameForm('project', 'Project name', 'Create project', err, async (name) => {
      await api('POST', at(o.id, '/projects'), { name });
      refresh();
    });
    const refresh = () =>
      listTable(
        list,
        scope,
        at(o.id, '/projects?include_archived=true&limit=100'),
        [['Project'], ['Status'], ['Created'], ['', 'num']],
        (p) =>
          cells(
            { 'data-project': p.id },
            [
              h('a', { href: BASE + '/org/projects/' + p.id + qs(o.id) }, p.name),
              h('span', { class: 'badge ' + (p.archived_at ? 'muted' : 'ok') }, p.status),
              dateOf(p.created_at),
            ],
            o.role === 'owner' && !p.archived_at ? button('archive', 'Archive', () => archive(p)) : null,
          ),
        emptyState('grid', 'No projects', 'Create one above.'),
      );
    const archive = (p) =>
      confirmThen(
        'Archive “' + p.name + '”?',
        "The project's keys stop working within seconds. An archived project cannot be changed again.",
        'Archive project',
        err,
        () => api('POST', at(o.id, '/projects/' + p.id + '/archive')),
        refresh,
      );
    replace(
      body,
      o.role === 'owner'
        ? h('section', { class: 'panel' }, h('h2', null, 'Create a project'), form, err)
        : [readerNote(), err],
      h('section', { class: 'panel' }, h('h2', null, 'Projects'), list),
    );
    refresh();
  });
}

// ---------------------------------------------------------------- one project
export function pageOrgProject(main, params, query, scope) {
  const pid = params[0];
  orgFrame(main, query, scope, 'projects', (body, o) => {
    const P = (path) => at(o.id, '/projects/' + pid + path);
    const owner = o.role === 'owner';
    load(
      body,
      scope,
      () => api('GET', P('')),
      (p) => {
        const live = owner && !p.archived_at;
        const sections = {
          usage: h('div', { id: 'project-usage' }),
          keys: h('div', { id: 'project-keys' }),
          members: h('div', { id: 'project-members' }),
          limits: h('div', { id: 'project-limits' }),
        };
        replace(
          body,
          h(
            'div',
            { class: 'crumbs' },
            h('a', { href: BASE + '/org' + qs(o.id) }, 'Projects'),
            ' / ',
            h('span', { id: 'project-title' }, p.name),
            ' ',
            h('span', { class: 'badge ' + (p.archived_at ? 'muted' : 'ok') }, p.status),
          ),
          owner ? null : readerNote(),
          h('section', { class: 'panel' }, h('h2', null, 'Usage, last 7 days'), sections.usage),
          h('section', { class: 'panel' }, h('h2', null, 'API keys'), sections.keys),
          h('section', { class: 'panel' }, h('h2', null, 'Members'), sections.members),
          h('section', { class: 'panel' }, h('h2', null, 'Limits'), sections.limits),
        );
        projectUsage(sections.usage, scope, o, pid);
        projectKeys(sections.keys, scope, P, live);
        projectMembers(sections.members, scope, o, P, live);
        projectLimits(sections.limits, scope, P, live);
      },
    );
  });
}

/** Requests and VND a day over the last 7 days, by model (the usage and costs routes, filtered to the project). */
function projectUsage(el, scope, o, pid) {
  const start = new Date();
  start.setHours(0, 0, 0, 0);
  start.setDate(start.getDate() - 6);
  const from = Math.floor(start.getTime() / 1000);
  const q = '?start_time=' + from + '&bucket_width=1d&limit=7&group_by[]=model&project_ids[]=' + pid;
  load(
    el,
    scope,
    () => Promise.all([api('GET', at(o.id, '/usage/completions' + q)), api('GET', at(o.id, '/costs' + q))]),
    ([usage, costs]) => {
      const rows = new Map();
      const row = (day, model) => {
        const k = day + '\u0000' + model;
        if (!rows.has(k)) rows.set(k, { day, model, requests: 0, costVnd: 0 });
        return rows.get(k);
      };
      for (const b of usage.data)
        for (const r of b.results)
          row(ymd(new Date(b.start_time * 1000)), r.model || '—').requests += r.num_model_requests;
      for (const b of costs.data)
        for (const r of b.results)
          row(ymd(new Date(b.start_time * 1000)), r.model || 'other').costVnd += r.amount.value;
      const all = [...rows.values()];
      const models = [...new Set(all.map((r) => r.model))].sort();
      const colors = new Map(models.map((m, i) => [m, PALETTE[i % PALETTE.length]]));
      const to = ymd(new Date());
      const total = all.reduce((a, r) => a + r.costVnd, 0);
      const requests = all.reduce((a, r) => a + r.requests, 0);
      replace(
        el,
        h('p', { class: 'hint', id: 'project-usage-total' }, num(requests) + ' requests · ' + vnd(total)),
        usageChart(all, ymd(start), to, 'cost', colors),
        models.length
          ? h(
              'div',
              { class: 'legend' },
              models.map((m) => h('span', { style: '--c:' + colors.get(m) }, m)),
            )
          : null,
      );
    },
  );
}

function projectKeys(el, scope, P, live) {
  const list = h('div');
  const shown = h('div', { id: 'new-project-key' });
  const err = h('div');
  const form = nameForm('project-key', 'Key name (a service account)', 'Create key', err, async (name) => {
    const sa = await api('POST', P('/service_accounts'), { name });
    showOnce(shown, {
      title: 'Key “' + sa.api_key.name + '” created.',
      text: 'Copy it now: this is the only time the full key is shown.',
      value: sa.api_key.value,
      inputId: 'new-project-key-value',
      label: 'New API key',
      copyId: 'copy-project-key',
      noun: 'key',
    });
    refresh();
  });
  const refresh = () =>
    listTable(
      list,
      scope,
      P('/api_keys?limit=100'),
      [['Name'], ['Key'], ['Owner'], ['Created'], ['', 'num']],
      (k) =>
        cells(
          null,
          [
            k.name || '—',
            h('code', null, k.redacted_value),
            k.owner.type === 'service_account'
              ? 'service account “' + k.owner.service_account.name + '”'
              : k.owner.user
                ? k.owner.user.email
                : '—',
            dateOf(k.created_at),
          ],
          live
            ? button('revoke', 'Delete', () =>
                confirmThen(
                  'Delete this key?',
                  'Requests using it are refused within seconds.',
                  'Delete key',
                  err,
                  () => api('DELETE', P('/api_keys/' + k.id)),
                  refresh,
                ),
              )
            : null,
        ),
      emptyState('key', 'No keys in this project', 'Create one above; it calls models as this project.'),
    );
  replace(el, shown, live ? [form, err] : err, list);
  refresh();
}

function projectMembers(el, scope, o, P, live) {
  const list = h('div');
  const err = h('div');
  const who = h('select', { id: 'project-member-user', 'aria-label': 'Member' });
  const role = h(
    'select',
    { id: 'project-member-role', 'aria-label': 'Project role' },
    h('option', { value: 'member' }, 'member'),
    h('option', { value: 'owner' }, 'owner'),
  );
  const btn = h('button', { type: 'submit', id: 'add-project-member' }, 'Add');
  const form = h(
    'form',
    { class: 'inline', id: 'project-member-form' },
    field('Member', who),
    field('Role', role),
    btn,
  );
  onSubmit(
    form,
    err,
    btn,
    () => who.value || new Error('Choose a member of the organization.'),
    async (userId) => {
      await api('POST', P('/users'), { user_id: userId, role: role.value });
      refresh();
    },
  );
  if (live)
    api('GET', at(o.id, '/users?limit=100')).then((u) =>
      replace(
        who,
        u.data.map((x) => h('option', { value: x.id }, x.email)),
      ),
    );
  const refresh = () =>
    listTable(
      list,
      scope,
      P('/users?limit=100'),
      [['Member'], ['Role'], ['Added'], ['', 'num']],
      (m) =>
        cells(
          null,
          [
            m.email,
            live
              ? roleSelect(
                  ['member', 'owner'],
                  m.role,
                  (r) => attempt(err, () => api('POST', P('/users/' + m.id), { role: r }), refresh),
                  'Role of ' + m.email,
                )
              : m.role,
            dateOf(m.added_at),
          ],
          live
            ? button('remove', 'Remove', () =>
                confirmThen(
                  'Remove ' + m.email + ' from the project?',
                  'They keep their organization role.',
                  'Remove',
                  err,
                  () => api('DELETE', P('/users/' + m.id)),
                  refresh,
                ),
              )
            : null,
        ),
      emptyState('users', 'No project members', 'Organization owners manage every project.'),
    );
  replace(el, live ? [form, err] : err, list);
  refresh();
}

function roleSelect(roles, current, onPick, label) {
  const sel = h(
    'select',
    { class: 'role-select', 'aria-label': label, onchange: (e) => onPick(e.target.value) },
    roles.map((r) => h('option', { value: r }, r)),
  );
  sel.value = current;
  return sel;
}

function projectLimits(el, scope, P, live) {
  const spend = h('div', { id: 'spend-limit' });
  const rates = h('div', { id: 'rate-limits' });
  const err = h('div');
  const amount = h('input', { id: 'spend-limit-amount', type: 'number', min: 1, step: 1, inputmode: 'numeric' });
  const sbtn = h('button', { type: 'submit', id: 'set-spend-limit' }, 'Set');
  const sform = h('form', { class: 'inline', id: 'spend-limit-form' }, field('Spend limit a month (₫)', amount), sbtn);
  onSubmit(
    sform,
    err,
    sbtn,
    () =>
      Number.isInteger(Number(amount.value)) && Number(amount.value) >= 1
        ? Number(amount.value)
        : new Error('A whole number of ₫, 1 or more.'),
    async (v) => {
      await api('POST', P('/spend_limit'), { threshold_amount: v, currency: 'VND', interval: 'month' });
      refreshSpend();
    },
  );
  const model = h('input', { id: 'rate-limit-model', placeholder: 'gpt-4o-mini', maxlength: 200, required: true });
  const rpm = h('input', { id: 'rate-limit-rpm', type: 'number', min: 0, step: 1, placeholder: '0: none' });
  const tpm = h('input', { id: 'rate-limit-tpm', type: 'number', min: 0, step: 1, placeholder: '0: none' });
  const rbtn = h('button', { type: 'submit', id: 'set-rate-limit' }, 'Set');
  const rform = h(
    'form',
    { class: 'inline', id: 'rate-limit-form' },
    field('Model', model),
    field('Requests / min', rpm),
    field('Tokens / min', tpm),
    rbtn,
  );
  onSubmit(
    rform,
    err,
    rbtn,
    () => {
      const b = {};
      if (rpm.value !== '') b.max_requests_per_1_minute = Number(rpm.value);
      if (tpm.value !== '') b.max_tokens_per_1_minute = Number(tpm.value);
      if (!model.value.trim()) return new Error('Name the model.');
      return Object.keys(b).length ? b : new Error('Give requests or tokens a minute (0 clears).');
    },
    async (b) => {
      await api('POST', P('/rate_limits/rl-' + encodeURIComponent(model.value.trim())), b);
      rform.reset();
      refreshRates();
    },
  );
  const refreshSpend = async () => {
    replace(spend, loading());
    try {
      const l = await api('GET', P('/spend_limit'));
      replace(
        spend,
        h('p', { id: 'spend-limit-value' }, 'Spend limit: ', h('strong', null, vnd(l.threshold_amount)), ' a month '),
        live
          ? h(
              'button',
              {
                class: 'ghost small',
                id: 'clear-spend-limit',
                onclick: () => attempt(err, () => api('DELETE', P('/spend_limit')), refreshSpend),
              },
              'Remove',
            )
          : null,
      );
    } catch (ex) {
      if (ex.status === 404) replace(spend, h('p', { id: 'spend-limit-value' }, 'No spend limit.'));
      else formError(spend, ex);
    }
  };
  const refreshRates = () =>
    listTable(
      rates,
      scope,
      P('/rate_limits'),
      [['Model'], ['Requests / min', 'num'], ['Tokens / min', 'num']],
      (r) =>
        h(
          'tr',
          null,
          h('td', null, r.model),
          h('td', { class: 'num' }, r.max_requests_per_1_minute ? num(r.max_requests_per_1_minute) : '—'),
          h('td', { class: 'num' }, r.max_tokens_per_1_minute ? num(r.max_tokens_per_1_minute) : '—'),
        ),
      h('p', { class: 'hint' }, 'No rate limits: each key keeps its own.'),
    );
  replace(el, spend, live ? sform : null, h('h3', null, 'Rate limits per model'), rates, live ? rform : null, err);
  refreshSpend();
  refreshRates();
}

// ---------------------------------------------------------------- members and invites
export function pageOrgMembers(main, _p, query, scope) {
  orgFrame(main, query, scope, 'members', (body, o) => {
    const owner = o.role === 'owner';
    const users = h('div', { id: 'members' });
    const invites = h('div', { id: 'invites' });
    const link = h('div', { id: 'invite-link' });
    const err = h('div');
    const email = h('input', { id: 'invite-email', type: 'email', maxlength: 320, required: true });
    const role = h(
      'select',
      { id: 'invite-role', 'aria-label': 'Role' },
      h('option', { value: 'reader' }, 'reader'),
      h('option', { value: 'owner' }, 'owner'),
    );
    const btn = h('button', { type: 'submit', id: 'send-invite' }, 'Invite');
    const form = h('form', { class: 'inline', id: 'invite-form' }, field('Email', email), field('Role', role), btn);
    onSubmit(
      form,
      err,
      btn,
      () => email.value.trim() || new Error('Give an email address.'),
      async (addr) => {
        const inv = await api('POST', at(o.id, '/invites'), { email: addr, role: role.value });
        form.reset();
        if (inv.accept_url)
          showOnce(link, {
            title: 'Invitation for ' + inv.email + ' made.',
            text: 'No mail is configured: pass this one-time link on. It expires ' + dateOf(inv.expires_at) + '.',
            value: inv.accept_url,
            inputId: 'invite-url',
            label: 'Invitation link',
            copyId: 'copy-invite',
            noun: 'link',
          });
        else replace(link, h('p', { class: 'hint' }, 'Invitation mailed to ' + inv.email + '.'));
        refreshInvites();
      },
    );
    const refresh = () => {
      refreshUsers();
      refreshInvites();
    };
    const refreshUsers = () =>
      listTable(
        users,
        scope,
        at(o.id, '/users?limit=100'),
        [['Member'], ['Role'], ['Added'], ['', 'num']],
        (u) =>
          cells(
            { 'data-user': u.email },
            [
              u.email,
              owner
                ? roleSelect(
                    ['owner', 'reader'],
                    u.role,
                    (r) => attempt(err, () => api('POST', at(o.id, '/users/' + u.id), { role: r }), refresh),
                    'Role of ' + u.email,
                  )
                : u.role,
              dateOf(u.added_at),
            ],
            owner
              ? button('remove-member', 'Remove', () =>
                  confirmThen(
                    'Remove ' + u.email + '?',
                    'Their sign-in and their sessions end now; their keys and log entries stay.',
                    'Remove member',
                    err,
                    () => api('DELETE', at(o.id, '/users/' + u.id)),
                    refresh,
                  ),
                )
              : null,
          ),
        null,
      );
    const refreshInvites = () =>
      listTable(
        invites,
        scope,
        at(o.id, '/invites?limit=100'),
        [['Email'], ['Role'], ['Status'], ['Expires'], ['', 'num']],
        (i) =>
          cells(
            null,
            [
              i.email,
              i.role,
              h('span', { class: 'badge ' + (i.status === 'pending' ? 'info' : 'muted') }, i.status),
              dateOf(i.expires_at),
            ],
            owner && i.status !== 'accepted'
              ? button('delete-invite', 'Delete', () =>
                  attempt(err, () => api('DELETE', at(o.id, '/invites/' + i.id)), refresh),
                )
              : null,
          ),
        h('p', { class: 'hint' }, 'No invitations.'),
      );
    replace(
      body,
      owner ? null : readerNote(),
      err,
      h('section', { class: 'panel' }, h('h2', null, 'Members'), users),
      h('section', { class: 'panel' }, h('h2', null, 'Invitations'), owner ? [link, form] : null, invites),
    );
    refreshUsers();
    refreshInvites();
  });
}

// ---------------------------------------------------------------- audit log
const EVENT_TYPES = [
  'project.created',
  'project.updated',
  'project.archived',
  'api_key.created',
  'api_key.updated',
  'api_key.deleted',
  'service_account.created',
  'service_account.deleted',
  'user.added',
  'user.updated',
  'user.deleted',
  'invite.sent',
  'invite.accepted',
  'invite.deleted',
  'login.succeeded',
  'login.failed',
  'organization.updated',
  'rate_limit.updated',
];

function actorText(a) {
  if (!a) return '—';
  if (a.type === 'session') return (a.session.user && (a.session.user.email || a.session.user.id)) || 'session';
  if (a.type === 'api_key') return 'key ' + a.api_key.id;
  return a.type;
}

export function pageOrgAudit(main, _p, query, scope) {
  orgFrame(main, query, scope, 'audit', (body, o) => {
    const list = h('div', { id: 'audit' });
    const types = h(
      'select',
      { id: 'audit-types', multiple: true, size: 4, 'aria-label': 'Event types' },
      EVENT_TYPES.map((t) => h('option', { value: t, selected: query.getAll('type').includes(t) }, t)),
    );
    const actor = h('input', { id: 'audit-actor', placeholder: 'email or id', value: query.get('actor') || '' });
    const project = h('select', { id: 'audit-project', 'aria-label': 'Project' }, h('option', { value: '' }, 'Any'));
    const from = h('input', { id: 'audit-from', type: 'date', value: query.get('from') || '' });
    const to = h('input', { id: 'audit-to', type: 'date', value: query.get('to') || '' });
    const btn = h('button', { type: 'submit', id: 'audit-filter' }, 'Filter');
    const form = h(
      'form',
      { class: 'toolbar', id: 'audit-form' },
      field('Event types', types),
      field('Actor', actor),
      o.id === GATEWAY ? null : field('Project', project),
      field('From', from),
      field('To', to),
      btn,
    );
    if (o.id !== GATEWAY)
      api('GET', at(o.id, '/projects?include_archived=true&limit=100')).then((v) => {
        for (const p of v.data) project.appendChild(h('option', { value: p.id }, p.name));
        project.value = query.get('project') || '';
      });
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const q = new URLSearchParams();
      if (o.id !== state.me.user.accountId) q.set('org', o.id);
      for (const opt of types.selectedOptions) q.append('type', opt.value);
      if (actor.value.trim()) q.set('actor', actor.value.trim());
      if (project.value) q.set('project', project.value);
      if (from.value) q.set('from', from.value);
      if (to.value) q.set('to', to.value);
      go('/org/audit' + (q.toString() ? '?' + q : ''));
    });
    // The page's filters as the Admin API's query (dates are whole days of this browser's time zone).
    const filters = new URLSearchParams({ limit: '20' });
    for (const t of query.getAll('type')) filters.append('event_types[]', t);
    const who = query.get('actor');
    if (who) filters.append(who.includes('@') ? 'actor_emails[]' : 'actor_ids[]', who);
    if (query.get('project')) filters.append('project_ids[]', query.get('project'));
    const day = (s, plus) => Math.floor(new Date(s + 'T00:00:00').getTime() / 1000) + plus;
    if (query.get('from')) filters.set('effective_at[gte]', String(day(query.get('from'), 0)));
    if (query.get('to')) filters.set('effective_at[lt]', String(day(query.get('to'), 86400)));
    const path = o.id === GATEWAY ? '/admin/audit_logs' : at(o.id, '/audit_logs');
    const show = (cursor) => {
      const q = new URLSearchParams(filters);
      if (cursor) q.set(cursor[0], cursor[1]);
      load(
        list,
        scope,
        () => api('GET', path + '?' + q),
        (v) => {
          const pager = h(
            'div',
            { class: 'media-actions' },
            h(
              'button',
              {
                class: 'secondary small',
                id: 'audit-newer',
                disabled: !cursor,
                onclick: () => show(['before', v.first_id]),
              },
              'Newer',
            ),
            h(
              'button',
              {
                class: 'secondary small',
                id: 'audit-older',
                disabled: !v.has_more && !(cursor && cursor[0] === 'before'),
                onclick: () => show(['after', v.last_id]),
              },
              'Older',
            ),
          );
          replace(
            list,
            v.data.length
              ? [
                  table(
                    [['When'], ['Event'], ['Actor'], ['Project'], ['Details']],
                    v.data.map((e) =>
                      h(
                        'tr',
                        { 'data-type': e.type },
                        h('td', null, dateOf(e.effective_at)),
                        h('td', null, h('code', null, e.type)),
                        h('td', { class: 'audit-actor' }, actorText(e.actor)),
                        h('td', null, e.project ? e.project.name : '—'),
                        h('td', null, h('code', { class: 'audit-details' }, JSON.stringify(e[e.type] || {}))),
                      ),
                    ),
                  ),
                  pager,
                ]
              : [emptyState('search', 'No entries', 'Nothing matches these filters.'), cursor ? pager : null],
          );
        },
      );
    };
    replace(body, h('section', { class: 'panel' }, form), h('section', { class: 'panel' }, list));
    show(null);
  });
}

// ---------------------------------------------------------------- admin keys
export function pageOrgAdminKeys(main, _p, query, scope) {
  orgFrame(main, query, scope, 'admin-keys', (body, o) => {
    const owner = o.role === 'owner';
    const list = h('div', { id: 'admin-keys' });
    const shown = h('div', { id: 'new-admin-key' });
    const err = h('div');
    const form = nameForm('admin-key', 'Key name', 'Create admin key', err, async (name) => {
      const k = await api('POST', at(o.id, '/admin_api_keys'), { name });
      showOnce(shown, {
        title: 'Admin key “' + k.name + '” created.',
        text:
          'Copy it now: this is the only time the full key is shown. ' +
          'It manages the organization (/v1/organization).',
        value: k.value,
        inputId: 'new-admin-key-value',
        label: 'New admin key',
        copyId: 'copy-admin-key',
        noun: 'key',
      });
      refresh();
    });
    const refresh = () =>
      listTable(
        list,
        scope,
        at(o.id, '/admin_api_keys?limit=100'),
        [['Name'], ['Key'], ['Created'], ['Last used'], ['', 'num']],
        (k) =>
          cells(
            { 'data-admin-key': k.id },
            [k.name || '—', h('code', null, k.redacted_value), dateOf(k.created_at), dateOf(k.last_used_at)],
            owner
              ? button('delete-admin-key', 'Delete', () =>
                  confirmThen(
                    'Delete “' + (k.name || k.redacted_value) + '”?',
                    'Calls with it are refused within seconds.',
                    'Delete key',
                    err,
                    () => api('DELETE', at(o.id, '/admin_api_keys/' + k.id)),
                    refresh,
                  ),
                )
              : null,
          ),
        emptyState('key', 'No admin keys', 'An admin key calls the Admin API (/v1/organization/*).'),
      );
    replace(
      body,
      shown,
      owner ? h('section', { class: 'panel' }, h('h2', null, 'Create an admin key'), form, err) : [readerNote(), err],
      h('section', { class: 'panel' }, h('h2', null, 'Admin keys'), list),
    );
    refresh();
  });
}
