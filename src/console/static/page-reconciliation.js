/* Console: operator page: the daily reconciliation of each provider's bill against the gateway's records. */
import { api } from './api.js';
import { h, replace } from './core.js';
import { emptyState, load, pageHead, table } from './views.js';

const HEAD = [
  ['Day'],
  ['Provider'],
  ['Model'],
  ['Field'],
  ['Reported units', 'num'],
  ['Recorded units', 'num'],
  ['Drift', 'num'],
  ['Explained (gateway costs)', 'num'],
  ['Unexplained', 'num'],
  ['Provider cost ₫', 'num'],
  ['Charged ₫ (share)', 'num'],
  ['Margin ₫', 'num'],
];

const MARGIN_HEAD = [
  ['Day'],
  ['Provider'],
  ['Model'],
  ['Calls', 'num'],
  ['Charged ₫ (ledger)', 'num'],
  ['Uncollected ₫', 'num'],
  ['Provider cost ₫', 'num'],
  ['Margin ₫', 'num'],
];

const units = (n) => n.toLocaleString('en-US');
const money = (n) => n.toLocaleString('vi-VN', { maximumFractionDigits: 2 });
const pct = (r) => (r === null ? '—' : (r >= 0 ? '+' : '') + (r * 100).toFixed(2) + ' %');

export function pageReconciliation(main, _p, _q, scope) {
  const body = h('div');
  replace(
    main,
    pageHead(
      'Reconciliation',
      "Each provider's own usage and cost report for a day against what the gateway recorded sending it, per " +
        'model and field; drift is reported minus recorded, margin is what customers were charged minus what ' +
        'the provider billed. Drift the gateway explains is the units of calls no customer was charged for ' +
        '(interrupted batch lines, lost background attempts, ...), recorded as its own costs; the rest is unexplained.',
    ),
    body,
  );
  load(
    body,
    scope,
    () => api('GET', '/admin/reconciliation?days=14'),
    (view) => {
      const notReconciled = view.providers.filter((p) => !p.reconciled);
      // Reconciled providers whose report leaves some fields out (Anthropic bills no images, characters or seconds).
      const partly = view.providers.filter((p) => p.reconciled && p.not_reconciled_fields.length);
      const behind = view.providers.filter((p) => p.reconciled && p.not_reconciled_days.length);
      const empty = view.providers
        .filter((p) => p.reconciled)
        .map((p) => [p, p.days.filter((d) => d.status === 'reconciled_empty').map((d) => d.day)])
        .filter(([, days]) => days.length);
      replace(
        body,
        h(
          'section',
          { class: 'panel', id: 'days-not-reconciled' },
          h('h2', null, 'Days not reconciled'),
          behind.length
            ? h(
                'ul',
                null,
                behind.map((p) =>
                  h(
                    'li',
                    { class: 'warn' },
                    `${p.id} (${p.kind}): ${p.not_reconciled_days.join(', ')} not reconciled yet ` +
                      '(the next run retries them).',
                  ),
                ),
              )
            : h('p', null, 'Every reconciled provider has each of the last 14 days reconciled.'),
          empty.length
            ? h(
                'ul',
                { id: 'days-empty' },
                empty.map(([p, days]) => h('li', null, `${p.id}: ${days.join(', ')} reconciled, no usage.`)),
              )
            : null,
        ),
        h(
          'section',
          { class: 'panel', id: 'margins' },
          h('h2', null, 'Margin by model'),
          view.margins.length
            ? table(
                MARGIN_HEAD,
                view.margins.map((m) =>
                  h(
                    'tr',
                    { class: m.margin_vnd < 0 ? 'warn' : null },
                    h('td', null, m.day),
                    h('td', null, m.provider),
                    h('td', null, m.model),
                    h('td', { class: 'num' }, units(m.calls)),
                    h('td', { class: 'num' }, money(m.charged_vnd)),
                    h('td', { class: 'num' }, money(m.shortfall_vnd)),
                    h('td', { class: 'num' }, money(m.reported_cost_vnd)),
                    h('td', { class: 'num' }, money(m.margin_vnd)),
                  ),
                ),
              )
            : h('p', null, 'No margin yet.'),
        ),
        h(
          'section',
          { class: 'panel' },
          h('h2', null, 'Last 14 days'),
          view.data.length
            ? table(
                HEAD,
                view.data.map((r) =>
                  h(
                    'tr',
                    { class: r.unexplained_units !== 0 ? 'warn' : null },
                    h('td', null, r.day),
                    h('td', null, r.provider),
                    h('td', null, r.model),
                    h('td', null, r.field),
                    h('td', { class: 'num' }, units(r.reported_units)),
                    h('td', { class: 'num' }, units(r.recorded_units)),
                    h('td', { class: 'num' }, `${units(r.drift_units)} (${pct(r.drift_ratio)})`),
                    h('td', { class: 'num' }, units(r.explained_units)),
                    h('td', { class: 'num' }, units(r.unexplained_units)),
                    h('td', { class: 'num' }, money(r.reported_cost_vnd)),
                    h('td', { class: 'num' }, money(r.charged_vnd)),
                    h('td', { class: 'num' }, money(r.margin_vnd)),
                  ),
                ),
              )
            : emptyState('chart', 'Nothing reconciled yet', 'Each provider is reconciled daily at 01:00 UTC.'),
        ),
        h(
          'section',
          { class: 'panel', id: 'not-reconciled' },
          h('h2', null, 'Not reconciled'),
          notReconciled.length
            ? h(
                'ul',
                null,
                notReconciled.map((p) =>
                  h(
                    'li',
                    null,
                    `${p.id} (${p.kind}): not reconciled — its bill would come from ${p.report ?? 'no report yet'}.`,
                  ),
                ),
              )
            : h('p', null, 'Every provider is reconciled.'),
          partly.length
            ? h(
                'ul',
                { id: 'fields-not-reconciled' },
                partly.map((p) =>
                  h(
                    'li',
                    null,
                    `${p.id} (${p.kind}): ${p.fields.join(', ')} reconciled; not reconciled: ` +
                      `${p.not_reconciled_fields.join(', ')} (its report carries none).`,
                  ),
                ),
              )
            : null,
        ),
      );
    },
  );
}
