/* Console: Top up (an order's QR and bank details, its status turning paid, the history, the low-balance alert),
   and the operators' page (the queue of transfers that matched no order, the daily statements). */
import { api } from './api.js';
import { h, replace, short, vnd, when } from './core.js';
import { emptyState, errorState, field, formError, load, onSubmit, pageHead, props, tableOf } from './views.js';

export const PRESETS = [50_000, 100_000, 200_000, 500_000, 1_000_000];
export const TOPUP_BADGE = { open: 'warn', paid: 'ok', expired: 'muted' };
const isoOf = (t) => (t === null || t === undefined ? null : new Date(t * 1000).toISOString());

function copyButton(id, value) {
  const note = h('span', { class: 'hint', role: 'status' });
  return h(
    'span',
    { class: 'copy' },
    h(
      'button',
      {
        type: 'button',
        class: 'secondary small',
        id,
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(value);
            note.textContent = 'Copied';
          } catch (e) {
            note.textContent = 'Select and copy it';
          }
        },
      },
      'Copy',
    ),
    note,
  );
}

/** One order: its QR and what to type in a banking app, or VNPay's link; polled until it is no longer open. */
function orderPanel(el, o, scope, onChange) {
  const status = h('span', { class: 'badge ' + (TOPUP_BADGE[o.status] || ''), id: 'topup-status' }, o.status);
  const q = o.vietqr;
  const detail = q
    ? h(
        'div',
        { class: 'topup-qr' },
        h('img', { src: q.qr_png, alt: 'VietQR code of this top-up', id: 'topup-qr', width: 240, height: 240 }),
        props([
          ['Bank BIN', h('span', null, h('code', { id: 'topup-bin' }, q.bank_bin), copyButton('copy-bin', q.bank_bin))],
          [
            'Account number',
            h(
              'span',
              null,
              h('code', { id: 'topup-account' }, q.account_number),
              copyButton('copy-account', q.account_number),
            ),
          ],
          ['Account name', q.account_name],
          ['Amount', h('span', null, h('code', null, String(o.amount)), copyButton('copy-amount', String(o.amount)))],
          [
            'Transfer content',
            h('span', null, h('code', { id: 'topup-memo' }, o.memo), copyButton('copy-memo', o.memo)),
          ],
        ]),
      )
    : h('p', null, h('a', { href: o.payment_url, class: 'button', id: 'topup-vnpay' }, 'Pay with VNPay'));
  replace(
    el,
    h(
      'div',
      { class: 'card topup-order', 'data-id': o.id },
      h('h2', null, 'Top-up ', h('code', null, short(o.id)), ' ', status),
      props([
        ['Amount', vnd(o.amount)],
        ['Received', vnd(o.amount_received) + (o.payment ? ' (' + o.payment + ')' : '')],
        ['Expires', when(isoOf(o.expires_at))],
      ]),
      o.status === 'open' ? detail : null,
      o.status === 'open' && q
        ? h('p', { class: 'hint' }, 'Scan the code in any banking app, or transfer with exactly this content.')
        : null,
    ),
  );
  if (o.status === 'open')
    scope.later(2000, async () => {
      try {
        const now = await api('GET', '/topups/' + o.id);
        if (now.status !== o.status) onChange();
        orderPanel(el, now, scope, onChange);
      } catch (e) {
        scope.later(5000, () => orderPanel(el, o, scope, onChange));
      }
    });
}

function historyTable(list) {
  if (!list.data.length) return emptyState('ledger', 'No top-ups yet', 'Your top-ups will be listed here.');
  return tableOf(
    { id: 'topup-history' },
    [['Created'], ['Amount', 'num'], ['Method'], ['Status'], ['Received', 'num'], ['Memo', 'hide-sm']],
    h(
      'tbody',
      null,
      list.data.map((o) =>
        h(
          'tr',
          { 'data-id': o.id },
          h('td', { class: 'time' }, when(isoOf(o.created_at))),
          h('td', { class: 'num' }, vnd(o.amount)),
          h('td', null, o.method === 'vietqr' ? 'VietQR' : 'VNPay'),
          h('td', null, h('span', { class: 'badge ' + (TOPUP_BADGE[o.status] || '') }, o.status)),
          h('td', { class: 'num' }, vnd(o.amount_received)),
          h('td', { class: 'hide-sm' }, h('code', null, o.memo)),
        ),
      ),
    ),
  );
}

export function pageTopup(main, _p, query, scope) {
  const amount = h('input', {
    id: 'topup-amount',
    type: 'number',
    min: 1,
    step: 1,
    inputmode: 'numeric',
    value: 100000,
  });
  const method = h(
    'select',
    { id: 'topup-method' },
    h('option', { value: 'vietqr' }, 'Bank transfer (VietQR)'),
    h('option', { value: 'vnpay' }, 'VNPay'),
  );
  const presets = h(
    'div',
    { class: 'presets' },
    PRESETS.map((v) =>
      h(
        'button',
        { type: 'button', class: 'secondary small', 'data-amount': v, onclick: () => (amount.value = String(v)) },
        vnd(v),
      ),
    ),
  );
  const btn = h('button', { type: 'submit', id: 'create-topup' }, 'Create top-up');
  const err = h('div');
  const form = h(
    'form',
    { id: 'topup-form', class: 'card' },
    presets,
    field('Amount (VND)', amount),
    field('Method', method),
    btn,
    err,
  );
  const order = h('div', { id: 'topup-order' });
  const history = h('div');
  const alertBox = h('div');
  const notice = query.get('vnpay')
    ? h(
        'div',
        { class: 'card', id: 'vnpay-result' },
        query.get('vnpay') === '00'
          ? 'VNPay: payment accepted.'
          : 'VNPay: the payment was not completed (' + query.get('vnpay') + ').',
      )
    : null;
  replace(
    main,
    pageHead(
      'Top up',
      'Add to your prepaid balance by bank transfer (VietQR) or VNPay. Credited when the money arrives.',
    ),
    notice,
    form,
    order,
    h('h2', null, 'History'),
    history,
    h('h2', null, 'Low-balance alert'),
    alertBox,
  );
  const refresh = () =>
    load(
      history,
      scope,
      () => api('GET', '/topups?limit=50'),
      (list) => replace(history, historyTable(list)),
    );
  onSubmit(
    form,
    err,
    btn,
    () => {
      const n = Number(amount.value);
      return Number.isSafeInteger(n) && n > 0
        ? { amount: n, method: method.value }
        : new Error('Enter a whole amount in VND.');
    },
    async (body) => {
      const o = await api('POST', '/topups', body);
      orderPanel(order, o, scope, refresh);
      refresh();
    },
  );
  const id = query.get('id');
  if (id)
    api('GET', '/topups/' + encodeURIComponent(id)).then(
      (o) => scope.alive() && orderPanel(order, o, scope, refresh),
      (e) => scope.alive() && replace(order, errorState(e, null)),
    );
  refresh();
  load(
    alertBox,
    scope,
    () => api('GET', '/balance_alert'),
    (a) => {
      const input = h('input', {
        id: 'alert-threshold',
        type: 'number',
        min: 0,
        step: 1,
        value: a.low_balance_threshold === null ? '' : a.low_balance_threshold,
        placeholder: 'none',
      });
      const save = h('button', { type: 'submit', id: 'save-alert' }, 'Save');
      const aErr = h('div');
      const f = h(
        'form',
        { id: 'alert-form', class: 'card' },
        h('p', { class: 'hint' }, 'The webhook event balance.low is sent once each time the balance falls below this.'),
        field('Threshold (VND, empty: none)', input),
        save,
        aErr,
      );
      replace(alertBox, f);
      onSubmit(
        f,
        aErr,
        save,
        () => {
          if (input.value === '') return { low_balance_threshold: null };
          const n = Number(input.value);
          return Number.isSafeInteger(n) && n >= 0
            ? { low_balance_threshold: n }
            : new Error('Enter a whole amount in VND.');
        },
        async (body) => {
          await api('PUT', '/balance_alert', body);
          formError(aErr, null);
        },
      );
    },
  );
}

// ---------------------------------------------------------------- operators
export function pageTopupsAdmin(main, _p, _q, scope) {
  const queue = h('div');
  const statements = h('div');
  replace(
    main,
    pageHead(
      'Top-ups',
      'Transfers that matched no order wait here: assign each to an account, or return it, with a reason.',
    ),
    h('h2', null, 'Unmatched transfers'),
    queue,
    h('h2', null, 'Daily statements'),
    statements,
  );
  const refresh = () =>
    load(
      queue,
      scope,
      () => api('GET', '/admin/topups/unmatched'),
      (list) => {
        if (!list.data.length)
          return replace(
            queue,
            emptyState('grid', 'Nothing waiting', 'Every received transfer is credited or returned.'),
          );
        replace(
          queue,
          tableOf(
            { id: 'unmatched' },
            [['Received'], ['Amount', 'num'], ['Feed'], ['Content'], ['Decision']],
            h(
              'tbody',
              null,
              list.data.map((t) => unmatchedRow(t, refresh)),
            ),
          ),
        );
      },
    );
  refresh();
  load(
    statements,
    scope,
    () => api('GET', '/admin/topups/statements'),
    (list) => {
      if (!list.data.length)
        return replace(statements, emptyState('chart', 'No statement yet', 'The first runs tonight.'));
      replace(
        statements,
        tableOf(
          { id: 'statements' },
          [
            ['Day'],
            ['Feed'],
            ['Transfers', 'num'],
            ['Amount', 'num'],
            ['Credited', 'num'],
            ['Unmatched', 'num'],
            ['Returned', 'num'],
            ['Found by statement', 'num'],
          ],
          h(
            'tbody',
            null,
            list.data.map((r) =>
              h(
                'tr',
                null,
                h('td', null, r.day),
                h('td', null, r.provider),
                h('td', { class: 'num' }, String(r.transfers)),
                h('td', { class: 'num' }, vnd(r.amount)),
                h('td', { class: 'num' }, String(r.credited)),
                h('td', { class: 'num' }, String(r.unmatched)),
                h('td', { class: 'num' }, String(r.returned)),
                h('td', { class: 'num' }, String(r.recovered)),
              ),
            ),
          ),
        ),
      );
    },
  );
}

function unmatchedRow(t, refresh) {
  const account = h('input', { placeholder: 'account id', class: 'assign-account', 'aria-label': 'Account id' });
  const reason = h('input', { placeholder: 'reason', class: 'decision-reason', 'aria-label': 'Reason' });
  const err = h('div');
  const act = (action) => async () => {
    formError(err, null);
    try {
      const body =
        action === 'assign' ? { accountId: account.value.trim(), reason: reason.value } : { reason: reason.value };
      await api('POST', '/admin/topups/transfers/' + t.id + '/' + action, body);
      refresh();
    } catch (e) {
      formError(err, e);
    }
  };
  return h(
    'tr',
    { 'data-id': t.id },
    h('td', { class: 'time' }, when(t.received_at)),
    h('td', { class: 'num' }, vnd(t.amount)),
    h('td', null, t.provider + ' ' + t.transaction_id),
    h('td', { class: 'truncate', title: t.content }, t.content),
    h(
      'td',
      null,
      account,
      reason,
      h('button', { type: 'button', class: 'small assign', onclick: act('assign') }, 'Assign'),
      h('button', { type: 'button', class: 'secondary small return', onclick: act('return') }, 'Return'),
      err,
    ),
  );
}
