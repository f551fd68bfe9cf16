/* Console: background responses (POST /v1/responses with background: true): list with status and cost. */
import { h, num, replace, vnd, when } from './core.js';
import { emptyState, pageHead, pollList, statusBadge, statusChips, table } from './views.js';

// ---------------------------------------------------------------- background responses
export const RESPONSE_STATUSES = ['queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled'];
export const responseOpen = (r) => r.status === 'queued' || r.status === 'in_progress';
export const responseLabel = (st) => (st[0].toUpperCase() + st.slice(1)).replace('_', ' ');
export const RESPONSE_HEAD = [
  ['Created'],
  ['Status'],
  ['Model', 'hide-sm'],
  ['Response'],
  ['Tokens', 'num hide-sm'],
  ['Cost', 'num'],
];
export function responseRow(r) {
  const tokens =
    r.inputTokens !== null || r.outputTokens !== null
      ? num(r.inputTokens || 0) + ' in · ' + num(r.outputTokens || 0) + ' out'
      : '—';
  return h(
    'tr',
    { 'data-response-id': r.id, 'data-status': r.status },
    h('td', { class: 'time' }, when(r.createdAt)),
    h('td', { class: 'status' }, statusBadge(r.status)),
    h('td', { class: 'hide-sm model' }, r.model),
    h(
      'td',
      { class: 'truncate' },
      h('code', { title: r.id }, r.id),
      r.error ? h('div', { class: 'hint error', title: r.error.message }, r.error.message) : null,
    ),
    h('td', { class: 'num hide-sm tokens' }, tokens),
    h(
      'td',
      { class: 'num cost' },
      r.costVnd !== null
        ? vnd(r.costVnd)
        : h('span', { class: 'hint', title: 'Held until the response ends' }, '≤ ' + vnd(r.maxCostVnd)),
    ),
  );
}
export function pageResponses(main, _p, query, scope) {
  const status = RESPONSE_STATUSES.includes(query.get('status')) ? query.get('status') : '';
  const body = h('div');
  const live = h('span');
  replace(
    main,
    pageHead(
      'Background responses',
      'Responses created with POST /v1/responses and background: true. ' +
        'The cost is charged once a response ends; until then its bound is held.',
      live,
    ),
    statusChips('/responses', status, RESPONSE_STATUSES, responseLabel, (st) => ({ 'data-status': st || 'all' })),
    h('section', { class: 'panel' }, body),
  );
  pollList(
    body,
    live,
    scope,
    '/responses?limit=100' + (status ? '&status=' + status : ''),
    responseOpen,
    'Updating while responses run',
    emptyState(
      'chart',
      status ? 'No ' + responseLabel(status).toLowerCase() + ' responses' : 'No background responses yet',
      'Create one with POST /v1/responses and background: true using one of your API keys; it appears here at once.',
    ),
    (rows) => table(RESPONSE_HEAD, rows.map(responseRow)),
  );
}
