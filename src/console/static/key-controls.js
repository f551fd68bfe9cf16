/* Console: per-key limits, usage and spend, shared by the keys page and the operator account page. */
import { api } from './api.js';
import { ago, h, num, replace, short, vnd, when } from './core.js';
import { field, onSubmit } from './views.js';

// ---------------------------------------------------------------- per-key controls (customer and operator pages)
export const LIMIT_FIELDS = [
  { name: 'rpm', label: 'Requests / min', fmt: (v) => num(v) + ' req/min' },
  { name: 'tpm', label: 'Tokens / min', fmt: (v) => num(v) + ' tokens/min' },
  { name: 'budgetDayVnd', label: 'Budget / day (VND)', fmt: (v) => vnd(v) + '/day' },
  { name: 'budgetMonthVnd', label: 'Budget / month (VND)', fmt: (v) => vnd(v) + '/month' },
];
/**
 * Expiry dates are shown and entered in the budget time zone (the server's BUDGET_TIME_ZONE), the zone of the
 * budget days and months beside them, whatever the browser's own zone.
 */
export function zoneWallClock(iso, zone) {
  if (!iso) return '';
  const f = new Intl.DateTimeFormat('en-CA', {
    timeZone: zone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  });
  const p = Object.fromEntries(f.formatToParts(new Date(iso)).map((x) => [x.type, x.value]));
  return p.year + '-' + p.month + '-' + p.day + 'T' + p.hour + ':' + p.minute;
}
/** The instant a datetime-local value means as a wall clock in `zone` (ISO 8601, UTC). */
export function zoneInstant(value, zone) {
  const wall = Date.parse(value + ':00Z'); // the wall clock read as if it were UTC
  let t = wall;
  // The zone's offset at the instant, twice: the second pass settles a guess that crossed a DST change.
  for (let i = 0; i < 2; i++) t = wall - (Date.parse(zoneWallClock(new Date(t).toISOString(), zone) + ':00Z') - t);
  return new Date(t).toISOString();
}
/** The limits that apply to a key, each marked when it comes from the account default. */
export function limitsCell(k, zone) {
  const parts = LIMIT_FIELDS.filter((f) => k.effective[f.name] !== null).map((f) =>
    h(
      'div',
      { class: 'nowrap' },
      f.fmt(k.effective[f.name]),
      k.limits[f.name] === null ? h('span', { class: 'hint' }, ' (account default)') : null,
    ),
  );
  if (k.expiresAt)
    parts.push(
      h(
        'div',
        { class: 'nowrap hint' },
        'expires ' + zoneWallClock(k.expiresAt, zone).replace('T', ' ') + ' (' + zone + ')',
      ),
    );
  return parts.length ? parts : h('span', { class: 'hint' }, 'no limits');
}
/** Requests and tokens in the current rate-limit window, against the limits where set. */
export function usageCell(k, view) {
  const of = (used, limit) => num(used) + (limit !== null ? ' / ' + num(limit) : '');
  return [
    h('div', { class: 'nowrap' }, of(k.usage.requests, k.effective.rpm) + ' req'),
    h('div', { class: 'nowrap' }, of(k.usage.tokens, k.effective.tpm) + ' tokens'),
    h('div', { class: 'hint' }, 'last ' + view.windowSeconds + ' s'),
  ];
}
export function spendCell(k) {
  const of = (spent, budget) => vnd(spent) + (budget !== null ? ' / ' + vnd(budget) : '');
  return [
    h('div', { class: 'nowrap' }, 'today ' + of(k.spend.day, k.effective.budgetDayVnd)),
    h('div', { class: 'nowrap' }, 'month ' + of(k.spend.month, k.effective.budgetMonthVnd)),
  ];
}
/**
 * A form for limits (empty: none of its own); PATCHes `path` and calls onSaved. `expiryZone`: for keys, the budget
 * zone their expiry is entered in (null: no expiry).
 */
export function limitsForm(idPrefix, current, path, expiryZone, onSaved) {
  const err = h('div');
  const btn = h('button', { type: 'submit', id: idPrefix + '-save' }, 'Save limits');
  const inputs = LIMIT_FIELDS.map((f) =>
    field(
      f.label,
      h('input', {
        id: idPrefix + '-' + f.name,
        name: f.name,
        type: 'number',
        min: f.name.startsWith('budget') ? 0 : 1,
        step: 1,
        inputmode: 'numeric',
        value: current[f.name] === null ? '' : String(current[f.name]),
        placeholder: expiryZone ? 'account default' : 'no limit',
      }),
    ),
  );
  const expiry = expiryZone
    ? field(
        'Expires (' + expiryZone + ')',
        h('input', {
          id: idPrefix + '-expiresAt',
          name: 'expiresAt',
          type: 'datetime-local',
          value: zoneWallClock(current.expiresAt, expiryZone),
        }),
      )
    : null;
  const form = h('form', { class: 'inline', id: idPrefix + '-form', novalidate: true }, inputs, expiry, btn, err);
  const prepare = () => {
    const body = {};
    for (const f of LIMIT_FIELDS) {
      const v = form[f.name].value.trim();
      body[f.name] = v === '' ? null : Number(v);
      if (v !== '' && !Number.isInteger(body[f.name]))
        return new Error(f.label + ': enter a whole number, or leave it empty.');
    }
    if (expiryZone) body.expiresAt = form.expiresAt.value ? zoneInstant(form.expiresAt.value, expiryZone) : null;
    return body;
  };
  onSubmit(form, err, btn, prepare, async (body) => {
    await api('PATCH', path, body);
    onSaved();
  });
  return form;
}
/** Keys with their limits, window usage and spend; a Limits button opens each key's form below its row. */
export function keyControlRows(view, pathOf, refresh, lastCell) {
  return view.data.flatMap((k) => {
    const formRow = h('tr', { class: 'limits-row', hidden: true }, h('td', { colspan: 7 }));
    const toggle = () => {
      formRow.hidden = !formRow.hidden;
      if (!formRow.hidden)
        replace(
          formRow.firstChild,
          limitsForm(
            'limits-' + short(k.id),
            { ...k.limits, expiresAt: k.expiresAt },
            pathOf(k),
            view.budgetTimeZone,
            refresh,
          ),
        );
    };
    return [
      h(
        'tr',
        { 'data-key-id': k.id, class: k.revokedAt ? 'revoked' : null },
        h(
          'td',
          null,
          k.name || h('span', { class: 'hint' }, '(unnamed)'),
          h('div', null, h('code', null, k.prefix + '…')),
        ),
        h(
          'td',
          { class: 'nowrap hide-sm' },
          when(k.createdAt),
          h('div', { class: 'hint' }, 'used ' + ago(k.lastUsedAt)),
        ),
        h('td', null, limitsCell(k, view.budgetTimeZone)),
        h('td', null, usageCell(k, view)),
        h('td', null, spendCell(k)),
        h(
          'td',
          null,
          k.revokedAt ? null : h('button', { class: 'ghost small edit-limits', onclick: toggle }, 'Limits'),
        ),
        h('td', { class: 'num' }, lastCell(k)),
      ),
      formRow,
    ];
  });
}
export const KEY_HEAD = [['Key'], ['Created', 'hide-sm'], ['Limits'], ['This minute'], ['Spent'], [''], ['']];
