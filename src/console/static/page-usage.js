/* Console: usage by day and model: chart and table. */
import { api } from './api.js';
import { go } from './app.js';
import { appendKids, h, num, replace, s, unitsText, vnd, ymd } from './core.js';
import { cards, emptyState, field, load, pageHead, table } from './views.js';

// ---------------------------------------------------------------- usage
export const PALETTE = [
  '#4f46e5',
  '#0ea5e9',
  '#10b981',
  '#f59e0b',
  '#ef4444',
  '#8b5cf6',
  '#14b8a6',
  '#ec4899',
  '#84cc16',
  '#64748b',
];
export function daysBetween(from, to) {
  const out = [];
  const d = new Date(from + 'T00:00:00Z');
  const end = new Date(to + 'T00:00:00Z');
  while (d <= end && out.length < 400) {
    out.push(d.toISOString().slice(0, 10));
    d.setUTCDate(d.getUTCDate() + 1);
  }
  return out;
}
export function compact(n) {
  if (n >= 1e9) return num(Math.round(n / 1e8) / 10) + ' tỷ';
  if (n >= 1e6) return num(Math.round(n / 1e5) / 10) + ' tr';
  if (n >= 1e3) return num(Math.round(n / 100) / 10) + 'k';
  return num(n);
}
/** The smallest 1, 2 or 5 x 10^k at or above n (a round top for the chart's axis). */
export function niceCeil(n) {
  const p = Math.pow(10, Math.floor(Math.log10(n)));
  for (const m of [1, 2, 5, 10]) if (m * p >= n) return m * p;
  return 10 * p;
}
/** Stacked bars per day, one colour per model; hand-written SVG. */
export function usageChart(rows, from, to, metric, colors) {
  const days = daysBetween(from, to);
  const byDay = new Map(days.map((d) => [d, []]));
  for (const r of rows) if (byDay.has(r.day)) byDay.get(r.day).push(r);
  const value = (r) => (metric === 'cost' ? r.costVnd : r.requests);
  const totals = days.map((d) => byDay.get(d).reduce((a, r) => a + value(r), 0));
  const max = niceCeil(Math.max(1, ...totals));
  const W = 720;
  const H = 240;
  const L = 52;
  const B = 26;
  const T = 10;
  const plotW = W - L - 8;
  const plotH = H - B - T;
  const step = plotW / days.length;
  const bw = Math.max(2, Math.min(36, step * 0.7));
  const y = (v) => T + plotH - (v / max) * plotH;
  const svg = s('svg', {
    class: 'chart',
    id: 'usage-chart',
    viewBox: '0 0 ' + W + ' ' + H,
    role: 'img',
    'aria-label': (metric === 'cost' ? 'Cost' : 'Requests') + ' per day by model',
  });
  for (const f of max % 2 === 0 ? [0, 0.5, 1] : [0, 1]) {
    const v = max * f;
    appendKids(svg, [
      s('line', { class: 'grid', x1: L, x2: W - 8, y1: y(v), y2: y(v) }),
      s('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, compact(v)),
    ]);
  }
  const every = Math.ceil(days.length / 8);
  days.forEach((d, i) => {
    const x = L + i * step + (step - bw) / 2;
    let acc = 0;
    for (const r of byDay.get(d)) {
      const v = value(r);
      if (v <= 0) continue;
      const y0 = y(acc);
      acc += v;
      const y1 = y(acc);
      svg.appendChild(
        s(
          'rect',
          {
            x: x.toFixed(1),
            y: y1.toFixed(1),
            width: bw.toFixed(1),
            height: Math.max(1, y0 - y1).toFixed(1),
            rx: 2,
            fill: colors.get(r.model),
          },
          s(
            'title',
            null,
            d + ' · ' + r.model + ': ' + (metric === 'cost' ? vnd(r.costVnd) : num(r.requests) + ' requests'),
          ),
        ),
      );
    }
    if (i % every === 0)
      svg.appendChild(
        s('text', { x: (L + i * step + step / 2).toFixed(1), y: H - 8, 'text-anchor': 'middle' }, d.slice(5)),
      );
  });
  return svg;
}
export const USAGE_HEAD = [
  ['Requests', 'num'],
  ['Units', 'hide-sm'],
  ['Cost', 'num'],
];
/** A usage row's requests, units and cost; a total leaves the units (of unlike kinds) out. */
export const usageCells = (r, isTotal) => [
  h('td', { class: 'num' }, num(r.requests)),
  h('td', { class: 'hide-sm' }, isTotal ? null : unitsText(r.units)),
  h('td', { class: 'num' }, vnd(r.costVnd)),
];
export function pageUsage(main, _p, query, scope) {
  const today = new Date();
  const start = new Date(today);
  start.setDate(start.getDate() - 29);
  const from = query.get('from') || ymd(start);
  const to = query.get('to') || ymd(today);
  const metric = query.get('metric') === 'requests' ? 'requests' : 'cost';
  const tz = Intl.DateTimeFormat().resolvedOptions().timeZone || 'Asia/Ho_Chi_Minh';
  const nav = (f, t, m) => go('/usage?' + new URLSearchParams({ from: f, to: t, metric: m }).toString());
  const fromIn = h('input', { type: 'date', id: 'usage-from', value: from, max: ymd(today) });
  const toIn = h('input', { type: 'date', id: 'usage-to', value: to, max: ymd(today) });
  const quick = (n) =>
    h(
      'button',
      {
        type: 'button',
        class: 'secondary',
        onclick: () => {
          const d = new Date();
          d.setDate(d.getDate() - (n - 1));
          nav(ymd(d), ymd(new Date()), metric);
        },
      },
      n + ' days',
    );
  const form = h(
    'form',
    { class: 'toolbar', id: 'usage-form' },
    field('From', fromIn),
    field('To', toIn),
    h('button', { type: 'submit' }, 'Show'),
    quick(7),
    quick(30),
    quick(90),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (fromIn.value && toIn.value) nav(fromIn.value, toIn.value, metric);
  });
  const body = h('div');
  replace(main, pageHead('Usage', 'API requests per day and model, with their cost.'), form, body);
  load(
    body,
    scope,
    () => api('GET', '/usage?' + new URLSearchParams({ from, to, tz }).toString()),
    (u) => {
      if (!u.rows.length)
        return replace(
          body,
          h(
            'section',
            { class: 'panel' },
            emptyState(
              'chart',
              'No usage in this period',
              'Requests made with your API keys between ' + from + ' and ' + to + ' will show here.',
            ),
          ),
        );
      const models = Array.from(new Set(u.rows.map((r) => r.model))).sort();
      const colors = new Map(models.map((m, i) => [m, PALETTE[i % PALETTE.length]]));
      const perModel = models.map((m) => {
        const rs = u.rows.filter((r) => r.model === m);
        const units = {};
        for (const r of rs) for (const k in r.units) units[k] = (units[k] || 0) + r.units[k];
        return {
          model: m,
          requests: rs.reduce((a, r) => a + r.requests, 0),
          costVnd: rs.reduce((a, r) => a + r.costVnd, 0),
          units,
        };
      });
      const total = {
        requests: perModel.reduce((a, r) => a + r.requests, 0),
        costVnd: perModel.reduce((a, r) => a + r.costVnd, 0),
      };
      const seg = h(
        'div',
        { class: 'seg', role: 'group', 'aria-label': 'Chart metric' },
        h(
          'button',
          { type: 'button', class: metric === 'cost' ? 'active' : null, onclick: () => nav(from, to, 'cost') },
          'Cost',
        ),
        h(
          'button',
          {
            type: 'button',
            class: metric === 'requests' ? 'active' : null,
            onclick: () => nav(from, to, 'requests'),
          },
          'Requests',
        ),
      );
      replace(
        body,
        cards([
          ['Cost', vnd(total.costVnd), 'usage-total-cost'],
          ['Requests', num(total.requests)],
          ['Models used', num(models.length)],
        ]),
        h(
          'section',
          { class: 'panel' },
          h('div', { class: 'page-head' }, h('h2', null, metric === 'cost' ? 'Cost per day' : 'Requests per day'), seg),
          usageChart(u.rows, from, to, metric, colors),
          h(
            'div',
            { class: 'legend' },
            models.map((m) => h('span', { style: '--c:' + colors.get(m) }, m)),
          ),
        ),
        h(
          'section',
          { class: 'panel' },
          h('h2', null, 'By model'),
          table(
            [['Model']].concat(USAGE_HEAD),
            perModel.map((r) => h('tr', null, h('td', null, r.model), usageCells(r))),
            h('tr', null, h('td', null, 'Total'), usageCells(total, true)),
          ),
        ),
        h(
          'section',
          { class: 'panel' },
          h('h2', null, 'By day and model'),
          table(
            [['Day'], ['Model']].concat(USAGE_HEAD),
            u.rows
              .slice()
              .reverse()
              .map((r) =>
                h(
                  'tr',
                  { class: 'usage-row' },
                  h('td', { class: 'nowrap' }, r.day),
                  h('td', null, r.model),
                  usageCells(r),
                ),
              ),
          ),
        ),
      );
    },
  );
}
