/* Console: operator pages: accounts, one account (top-ups, logins, keys, uncollected). */
import { api } from './api.js';
import { go, link } from './app.js';
import { h, replace, short, vnd, when } from './core.js';
import { KEY_HEAD, keyControlRows, limitsForm } from './key-controls.js';
import { LEDGER_HEAD, balanceCards, ledgerRows } from './page-balance.js';
import { JOB_HEAD, STATUSES, jobChips, jobRows } from './page-jobs.js';
import { emptyState, field, load, loadList, onSubmit, pageHead, table, tableOf } from './views.js';

// ---------------------------------------------------------------- operator: accounts
export const ACCOUNT_HEAD = [
  ['Account'],
  ['Available', 'num'],
  ['Held', 'num hide-sm'],
  ['Total', 'num'],
  ['Logins', 'num hide-sm'],
  ['Keys', 'num hide-sm'],
  ['Created', 'hide-sm'],
];
export function pageAccounts(main, _p, _q, scope) {
  const list = h('div');
  const err = h('div');
  const btn = h('button', { type: 'submit', id: 'create-account' }, 'Create account');
  const form = h(
    'form',
    { class: 'inline', id: 'account-form' },
    field(
      'Account name',
      h('input', {
        id: 'account-name',
        name: 'name',
        maxlength: 200,
        required: true,
        placeholder: 'Customer or company name',
      }),
    ),
    btn,
  );
  const named = () => form.name.value.trim() || new Error('Enter a name for the account.');
  onSubmit(form, err, btn, named, async (name) => {
    const acc = await api('POST', '/admin/accounts', { name });
    go('/admin/accounts/' + acc.id);
  });
  const filter = h('input', {
    type: 'search',
    id: 'account-filter',
    placeholder: 'Filter by name or id',
    'aria-label': 'Filter accounts',
  });
  replace(
    main,
    pageHead(
      'Accounts',
      'Every customer account with its balance. Open one to top up, add logins or see its video jobs.',
    ),
    h('section', { class: 'panel' }, h('h2', null, 'New account'), form, err),
    h(
      'section',
      { class: 'panel' },
      h('div', { class: 'page-head' }, h('h2', null, 'All accounts'), h('div', null, filter)),
      list,
    ),
  );
  loadList(
    list,
    scope,
    () => api('GET', '/admin/accounts'),
    emptyState('users', 'No accounts yet', 'Create the first account above.'),
    (data) => {
      const tbody = h('tbody');
      const draw = () => {
        const q = filter.value.trim().toLowerCase();
        const rows = data.filter((a) => !q || a.name.toLowerCase().includes(q) || a.id.includes(q));
        replace(
          tbody,
          rows.length
            ? rows.map((a) =>
                h(
                  'tr',
                  {
                    class: 'clickable',
                    'data-account-id': a.id,
                    onclick: (e) => {
                      if (!e.target.closest('a')) go('/admin/accounts/' + a.id);
                    },
                  },
                  h('td', null, link('/admin/accounts/' + a.id, a.name), h('div', { class: 'hint mono' }, short(a.id))),
                  h('td', { class: 'num' }, vnd(a.available)),
                  h('td', { class: 'num hide-sm' }, vnd(a.held)),
                  h('td', { class: 'num' }, vnd(a.balance)),
                  h('td', { class: 'num hide-sm' }, String(a.logins)),
                  h('td', { class: 'num hide-sm' }, String(a.keys)),
                  h('td', { class: 'nowrap hide-sm' }, when(a.createdAt)),
                ),
              )
            : h(
                'tr',
                null,
                h('td', { colspan: 7 }, emptyState('search', 'No match', 'No account matches “' + q + '”.')),
              ),
        );
      };
      filter.addEventListener('input', draw);
      draw();
      return tableOf({ id: 'accounts' }, ACCOUNT_HEAD, tbody);
    },
  );
}

export function newIdempotencyKey() {
  return crypto.randomUUID ? crypto.randomUUID() : Date.now().toString(36) + Math.random().toString(36).slice(2);
}
/** Operator: the account's requests whose bill it could not cover in full (charged, shortfall), and the total. */
export function uncollectedView(u) {
  if (!u || !u.requests) return emptyState('ledger', 'Nothing uncollected', 'Every request was charged its full cost.');
  return h(
    'div',
    null,
    h(
      'p',
      { id: 'uncollected-total' },
      vnd(u.totalVnd) + ' uncollected over ' + u.requests + (u.requests === 1 ? ' request' : ' requests'),
    ),
    table(
      [['When'], ['Model'], ['Charged', 'num'], ['Shortfall', 'num'], ['Request', 'hide-sm']],
      u.rows.map((r) =>
        h(
          'tr',
          { class: 'uncollected-row' },
          h('td', { class: 'time' }, when(r.createdAt)),
          h('td', null, r.model),
          h('td', { class: 'num' }, vnd(r.costVnd)),
          h('td', { class: 'num amount-neg' }, vnd(r.shortfallVnd)),
          h('td', { class: 'hide-sm nowrap' }, short(r.id)),
        ),
      ),
    ),
  );
}
export function pageAccount(main, params, query, scope) {
  const id = params[0];
  const status = STATUSES.includes(query.get('status')) ? query.get('status') : '';
  const head = h('div');
  const cards = h('div');
  const logins = h('div');
  const jobs = h('div');
  const ledger = h('div');
  const uncollected = h('div');
  const keys = h('div');
  const defaults = h('div');
  replace(
    main,
    h('div', { class: 'crumbs' }, link('/admin/accounts', 'Accounts'), ' / ' + short(id)),
    head,
    cards,
    h('div', { class: 'grid2' }, topUpPanel(), loginPanel()),
    h(
      'section',
      { class: 'panel' },
      h('h2', null, 'API keys'),
      keys,
      h('h2', { style: 'margin-top:1rem' }, 'Defaults for keys without their own limits'),
      defaults,
    ),
    h('section', { class: 'panel' }, h('h2', null, 'Video jobs'), jobChips('/admin/accounts/' + id, status), jobs),
    h('section', { class: 'panel' }, h('h2', null, 'Uncollected'), uncollected),
    h('section', { class: 'panel' }, h('h2', null, 'Recent ledger'), ledger),
  );

  const refresh = () =>
    load(
      cards,
      scope,
      () => api('GET', '/admin/accounts/' + id),
      (a) => {
        replace(head, pageHead(a.name, 'Account ' + a.id + ' · created ' + when(a.createdAt)));
        replace(cards, balanceCards(a));
        replace(uncollected, uncollectedView(a.uncollected));
        replace(
          logins,
          a.logins.length
            ? table(
                [['Email'], ['Role'], ['Created', 'hide-sm']],
                a.logins.map((u) =>
                  h(
                    'tr',
                    null,
                    h('td', null, u.email, u.disabledAt ? h('span', { class: 'badge muted' }, ' disabled') : null),
                    h('td', null, u.role),
                    h('td', { class: 'hide-sm nowrap' }, when(u.createdAt)),
                  ),
                ),
              )
            : emptyState('users', 'No logins', 'Add one below so the customer can sign in.'),
        );
        replace(
          ledger,
          a.ledger.length
            ? table(
                LEDGER_HEAD,
                ledgerRows(a.ledger).map((tr) => {
                  tr.querySelectorAll('a').forEach((x) => x.replaceWith(x.textContent));
                  return tr;
                }),
              )
            : emptyState('ledger', 'No ledger entries yet', 'Top-ups and charges appear here.'),
        );
      },
    );
  const refreshKeys = () =>
    load(
      keys,
      scope,
      () => api('GET', '/admin/accounts/' + id + '/keys'),
      (view) => {
        replace(
          keys,
          view.data.length
            ? table(
                KEY_HEAD,
                keyControlRows(
                  view,
                  (k) => '/admin/accounts/' + id + '/keys/' + k.id + '/limits',
                  refreshKeys,
                  (k) => (k.revokedAt ? h('span', { class: 'badge muted' }, 'revoked') : null),
                ),
              )
            : emptyState(
                'key',
                'No API keys',
                'The customer creates keys in the console, or an operator with the admin CLI.',
              ),
        );
        replace(
          defaults,
          limitsForm('defaults', view.defaults, '/admin/accounts/' + id + '/limits', null, refreshKeys),
        );
      },
    );
  refreshKeys();
  loadList(
    jobs,
    scope,
    () => api('GET', '/admin/accounts/' + id + '/jobs?limit=100' + (status ? '&status=' + status : '')),
    emptyState(
      'film',
      status ? 'No ' + status + ' jobs' : 'No video jobs',
      'This account has not submitted any video jobs' + (status ? ' with this status.' : ' yet.'),
    ),
    (data) => table(JOB_HEAD.concat([['Temporal']]), jobRows(data, { temporal: true })),
  );
  refresh();

  function topUpPanel() {
    const err = h('div');
    const ok = h('div');
    let idem = newIdempotencyKey();
    const btn = h('button', { type: 'submit', id: 'topup-submit' }, 'Top up');
    const form = h(
      'form',
      { id: 'topup-form', novalidate: true },
      field(
        'Amount (VND)',
        h('input', {
          id: 'topup-amount',
          name: 'amount',
          type: 'number',
          min: 1,
          step: 1,
          inputmode: 'numeric',
          required: true,
          placeholder: '1000000',
        }),
      ),
      field(
        'Reason',
        h('input', {
          id: 'topup-reason',
          name: 'reason',
          maxlength: 500,
          required: true,
          placeholder: 'e.g. bank transfer #1234',
        }),
      ),
      btn,
      err,
      ok,
    );
    const prepare = () => {
      replace(ok);
      const amount = Number(form.amount.value);
      const reason = form.reason.value.trim();
      if (!Number.isInteger(amount) || amount < 1) return new Error('Enter a whole number of VND greater than 0.');
      if (!reason) return new Error('Give a reason; it is recorded in the ledger.');
      return { amount, reason, idempotencyKey: idem };
    };
    // After an error the same idempotency key is sent again, so resubmitting cannot add twice.
    onSubmit(form, err, btn, prepare, async (body) => {
      const r = await api('POST', '/admin/accounts/' + id + '/topups', body);
      replace(
        ok,
        h(
          'div',
          { class: 'form-ok', role: 'status' },
          r.applied
            ? 'Topped up ' + vnd(body.amount) + '.'
            : 'This top-up was already recorded; nothing was added twice.',
        ),
      );
      idem = newIdempotencyKey(); // the next top-up is a new one
      form.reset();
      refresh();
    });
    return h('section', { class: 'panel' }, h('h2', null, 'Top up'), form);
  }
  function loginPanel() {
    const err = h('div');
    const ok = h('div');
    const btn = h('button', { type: 'submit', id: 'login-create' }, 'Create login');
    const form = h(
      'form',
      { id: 'newlogin-form', novalidate: true },
      field(
        'Email',
        h('input', { id: 'newlogin-email', name: 'email', type: 'email', autocomplete: 'off', required: true }),
      ),
      field(
        'Initial password (10+ characters)',
        h('input', {
          id: 'newlogin-password',
          name: 'password',
          type: 'password',
          autocomplete: 'new-password',
          minlength: 10,
          required: true,
        }),
      ),
      field(
        'Role',
        h(
          'select',
          { id: 'newlogin-role', name: 'role' },
          h('option', { value: 'customer' }, 'Customer'),
          h('option', { value: 'operator' }, 'Operator'),
        ),
      ),
      btn,
      err,
      ok,
    );
    const prepare = () => {
      replace(ok);
      return { accountId: id, email: form.email.value.trim(), password: form.password.value, role: form.role.value };
    };
    onSubmit(form, err, btn, prepare, async (body) => {
      const u = await api('POST', '/admin/logins', body);
      replace(
        ok,
        h(
          'div',
          { class: 'form-ok', role: 'status' },
          'Login ' + u.email + ' created. Share the password over a safe channel.',
        ),
      );
      form.reset();
      refresh();
    });
    return h(
      'section',
      { class: 'panel' },
      h('h2', null, 'Logins'),
      logins,
      h('h2', { style: 'margin-top:1rem' }, 'Add a login'),
      form,
    );
  }
}
