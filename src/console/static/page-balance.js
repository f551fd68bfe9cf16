/* Console: balance and ledger, and one request's detail. */
import { api } from './api.js';
import { link } from './app.js';
import { appendKids, h, num, replace, short, unitsText, vnd, when } from './core.js';
import { cards, emptyState, errorState, load, pageHead, props, tableOf } from './views.js';

// ---------------------------------------------------------------- balance and ledger
export const KIND = {
  topped_up: { label: 'Top-up', cls: 'ok', sign: '+' },
  hold_placed: { label: 'Hold', cls: 'warn', sign: '' },
  hold_released: { label: 'Release', cls: 'muted', sign: '' },
  charged: { label: 'Charge', cls: 'bad', sign: '−' },
  uncollected: { label: 'Uncollected', cls: 'warn', sign: '' },
};
export function ledgerRef(e) {
  if (!e.link) return '—';
  if (e.link.type === 'job') return link('/jobs/' + e.link.id, 'Video job ' + short(e.link.id), { class: 'ref-job' });
  if (e.link.type === 'request')
    return link('/requests/' + e.link.id, 'Request ' + short(e.link.id), { class: 'ref-request' });
  if (e.link.type === 'usage')
    return link('/usage', 'API requests', {
      class: 'ref-usage',
      title: 'The requests settled together in one billing write; each is listed with its cost under Usage.',
    });
  return h(
    'span',
    { class: 'hint', title: "Funds set aside for API requests; each request's charge links to it." },
    'API credit ' + short(e.link.id),
  );
}
export function ledgerRows(entries) {
  return entries.map((e) => {
    const k = KIND[e.kind] || { label: e.kind, cls: '', sign: '' };
    const amountCls = e.kind === 'topped_up' ? 'amount-pos' : e.kind === 'charged' ? 'amount-neg' : 'amount-muted';
    return h(
      'tr',
      { 'data-kind': e.kind },
      h('td', { class: 'time' }, when(e.createdAt)),
      h('td', null, h('span', { class: 'badge ' + k.cls }, k.label)),
      h('td', { class: 'num ' + amountCls }, k.sign + vnd(e.amount)),
      h('td', { class: 'nowrap' }, ledgerRef(e)),
      h('td', { class: 'hide-sm truncate', title: e.memo || '' }, e.memo || ''),
    );
  });
}
export const LEDGER_HEAD = [['Time'], ['Type'], ['Amount', 'num'], ['For'], ['Note', 'hide-sm']];
export function balanceCards(b) {
  return cards([
    ['Available', vnd(b.available), 'bal-available'],
    ['Held for running work', vnd(b.held), 'bal-held'],
    ['Total balance', vnd(b.balance), 'bal-total'],
  ]);
}
export function pageBalance(main, _p, _q, scope) {
  const body = h('div');
  replace(
    main,
    pageHead('Balance', 'Prepaid balance in VND. Holds set funds aside while work runs; charges take the actual cost.'),
    body,
  );
  load(
    body,
    scope,
    () => api('GET', '/balance?limit=50'),
    (b) => {
      const tbody = h('tbody');
      const more = h('div', { class: 'media-actions' });
      const addPage = (page) => {
        appendKids(tbody, ledgerRows(page.ledger));
        replace(
          more,
          page.nextBefore
            ? h(
                'button',
                {
                  class: 'secondary',
                  onclick: async (e) => {
                    e.target.disabled = true;
                    try {
                      addPage(await api('GET', '/balance?limit=50&before=' + page.nextBefore));
                    } catch (ex) {
                      replace(more, errorState(ex, null));
                    }
                  },
                },
                'Load older entries',
              )
            : null,
        );
      };
      const ledger = b.ledger.length
        ? [tableOf({ id: 'ledger' }, LEDGER_HEAD, tbody), more]
        : emptyState(
            'ledger',
            'No ledger entries yet',
            'Top-ups, holds, releases and charges appear here as soon as they happen.',
          );
      replace(body, balanceCards(b), h('section', { class: 'panel' }, h('h2', null, 'Ledger'), ledger));
      if (b.ledger.length) addPage(b);
    },
  );
}

export function pageRequest(main, params, _q, scope) {
  const body = h('div');
  replace(
    main,
    h('div', { class: 'crumbs' }, link('/balance', 'Balance'), ' / Request'),
    pageHead('Request ' + short(params[0])),
    body,
  );
  load(
    body,
    scope,
    () => api('GET', '/requests/' + params[0]),
    (u) => {
      replace(
        body,
        h(
          'section',
          { class: 'panel' },
          props([
            ['Request id', h('code', null, u.id)],
            ['Time', when(u.createdAt)],
            ['Operation', u.operation],
            ['Model', u.model],
            ['Units', unitsText(u.units)],
            ['Cost', vnd(u.costVnd), { id: 'request-cost' }],
            ['HTTP status', String(u.status)],
            ['Latency', num(u.latencyMs) + ' ms'],
            ['API key', u.apiKey ? [u.apiKey.name || '(unnamed)', ' ', h('code', null, u.apiKey.prefix + '…')] : '—'],
          ]),
        ),
      );
    },
  );
}
