/* Console: batches: list, cancel, files. */
import { api } from './api.js';
import { BASE, h, num, replace, vnd, when } from './core.js';
import { confirmDialog, emptyState, formError, pageHead, pollList, statusBadge, statusChips, table } from './views.js';

// ---------------------------------------------------------------- batches
export const BATCH_STATUSES = [
  'validating',
  'in_progress',
  'finalizing',
  'cancelling',
  'completed',
  'failed',
  'expired',
  'cancelled',
];
export const BATCH_OPEN = ['validating', 'in_progress', 'finalizing', 'cancelling'];
export const batchOpen = (b) => BATCH_OPEN.includes(b.status);
export const batchLabel = (st) => (st[0].toUpperCase() + st.slice(1)).replace('_', ' ');
export function batchFiles(b) {
  const base = BASE + '/media/batches/' + b.id + '/';
  const one = (which, text) =>
    b.files[which]
      ? h('a', { href: base + which + '.jsonl', download: b.id + '_' + which + '.jsonl', class: 'file-' + which }, text)
      : null;
  const links = [one('input', 'Input'), one('output', 'Output'), one('error', 'Errors')].filter(Boolean);
  return links.length ? links.flatMap((l, i) => (i ? [' · ', l] : [l])) : '—';
}
export const BATCH_HEAD = [
  ['Created'],
  ['Status'],
  ['Model', 'hide-sm'],
  ['Requests', 'num'],
  ['Cost', 'num'],
  ['Files'],
  [''],
];
export function batchRow(b, onCancel) {
  const done = b.completed + b.failed;
  return h(
    'tr',
    { 'data-batch-id': b.id, 'data-status': b.status },
    h('td', { class: 'time' }, when(b.createdAt)),
    h('td', { class: 'status' }, statusBadge(b.status)),
    h(
      'td',
      { class: 'hide-sm' },
      b.model,
      h('div', { class: 'hint' }, b.endpoint === '/v1/messages' ? 'Message Batches' : b.endpoint),
    ),
    h(
      'td',
      { class: 'num counts', title: b.completed + ' succeeded, ' + b.failed + ' failed of ' + b.total },
      num(done) + ' / ' + num(b.total),
      b.failed ? h('div', { class: 'hint failed-count' }, num(b.failed) + ' failed') : null,
    ),
    h(
      'td',
      { class: 'num cost' },
      vnd(b.costVnd),
      batchOpen(b) ? h('div', { class: 'hint', title: 'Held until the batch ends' }, '≤ ' + vnd(b.maxCostVnd)) : null,
    ),
    h('td', { class: 'files nowrap' }, batchFiles(b)),
    h(
      'td',
      { class: 'nowrap' },
      b.status === 'validating' || b.status === 'in_progress'
        ? h('button', { class: 'secondary small cancel', onclick: () => onCancel(b) }, 'Cancel')
        : null,
    ),
  );
}
export function pageBatches(main, _p, query, scope) {
  const status = BATCH_STATUSES.includes(query.get('status')) ? query.get('status') : '';
  const body = h('div');
  const live = h('span');
  const note = h('div');
  replace(
    main,
    pageHead(
      'Batches',
      'Bulk requests submitted with POST /v1/batches or /v1/messages/batches, billed per request at batch prices.',
      live,
    ),
    statusChips('/batches', status, BATCH_STATUSES, batchLabel),
    note,
    h('section', { class: 'panel' }, body),
  );
  const cancel = async (b) => {
    const ok = await confirmDialog(
      'Cancel this batch?',
      'Requests that have run are kept and charged; the rest are not run, and their funds are released.',
      'Cancel batch',
    );
    if (!ok) return;
    try {
      await api('POST', '/batches/' + b.id + '/cancel');
      formError(note, null);
    } catch (e) {
      formError(note, e);
    }
    refresh();
  };
  const refresh = pollList(
    body,
    live,
    scope,
    '/batches?limit=100' + (status ? '&status=' + status : ''),
    batchOpen,
    'Updating while batches run',
    emptyState(
      'grid',
      status ? 'No ' + batchLabel(status).toLowerCase() + ' batches' : 'No batches yet',
      'Upload a JSONL file with POST /v1/files and start it with POST /v1/batches; it appears here at once.',
    ),
    (batches) =>
      table(
        BATCH_HEAD,
        batches.map((b) => batchRow(b, cancel)),
      ),
  );
}
