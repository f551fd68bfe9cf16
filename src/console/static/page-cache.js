/* Console: the response cache: settings, each project's and key's switch, hits, misses, VND saved (chart), purges. */
import { api } from './api.js';
import { appendKids, h, num, replace, s, vnd } from './core.js';
import { cards, field, formError, load, onSubmit, pageHead, table } from './views.js';
import { compact, daysBetween, niceCeil } from './page-usage.js';

/** Hits and misses per day as paired bars (hand-written SVG, as the usage chart). */
export function cacheChart(days, from, to, label) {
  const all = daysBetween(from, to);
  const by = new Map(days.map((d) => [d.day, d]));
  const max = niceCeil(Math.max(1, ...days.map((d) => Math.max(d.hits, d.misses))));
  const W = 720;
  const H = 200;
  const L = 44;
  const B = 24;
  const T = 8;
  const plotH = H - B - T;
  const step = (W - L - 8) / all.length;
  const bw = Math.max(1, Math.min(14, step * 0.35));
  const y = (v) => T + plotH - (v / max) * plotH;
  const svg = s('svg', {
    class: 'chart',
    id: 'cache-chart',
    viewBox: '0 0 ' + W + ' ' + H,
    role: 'img',
    'aria-label': 'Cache hits and misses per day' + (label ? ' of ' + label : ''),
  });
  for (const v of [0, max]) {
    appendKids(svg, [
      s('line', { class: 'grid', x1: L, x2: W - 8, y1: y(v), y2: y(v) }),
      s('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, compact(v)),
    ]);
  }
  const every = Math.ceil(all.length / 8);
  all.forEach((day, i) => {
    const d = by.get(day) || { hits: 0, misses: 0, saved_vnd: 0 };
    const x = L + i * step + step / 2;
    const bar = (v, dx, fill, what) =>
      v > 0
        ? s(
            'rect',
            {
              x: (x + dx).toFixed(1),
              y: y(v).toFixed(1),
              width: bw.toFixed(1),
              height: (y(0) - y(v)).toFixed(1),
              fill,
            },
            s(
              'title',
              null,
              day + ': ' + num(v) + ' ' + what + (what === 'hits' ? ', ' + vnd(d.saved_vnd) + ' saved' : ''),
            ),
          )
        : null;
    appendKids(svg, [bar(d.hits, -bw, '#10b981', 'hits'), bar(d.misses, 0, '#94a3b8', 'misses')]);
    if (i % every === 0)
      svg.appendChild(s('text', { x: x.toFixed(1), y: H - 8, 'text-anchor': 'middle' }, day.slice(5)));
  });
  return svg;
}

const projectName = (p) => (p.project_id === null ? 'Keys of no project' : p.name || p.project_id);

/**
 * Each project's hits, misses and VND saved, and the chart of the one picked (the whole account first): the figures
 * GET /v1/cache/stats gives per project.
 */
function projectStats(stats, from, to) {
  const chart = h('div', { id: 'cache-chart-box' }, cacheChart(stats.days, from, to));
  const pick = h(
    'select',
    {
      id: 'cache-chart-project',
      'aria-label': 'Chart of',
      onchange: (e) => {
        const p = stats.projects.find((x) => String(x.project_id) === e.target.value);
        replace(chart, p ? cacheChart(p.days, from, to, projectName(p)) : cacheChart(stats.days, from, to));
      },
    },
    h('option', { value: '' }, 'The whole account'),
    ...stats.projects.map((p) => h('option', { value: String(p.project_id) }, projectName(p))),
  );
  const rows = stats.projects.map((p) =>
    h(
      'tr',
      { 'data-project': String(p.project_id) },
      h('td', null, projectName(p)),
      h('td', { class: 'mono hide-sm' }, p.project_id || '—'),
      h('td', { class: 'num' }, num(p.hits)),
      h('td', { class: 'num' }, num(p.misses)),
      h('td', { class: 'num' }, vnd(p.saved_vnd)),
    ),
  );
  return [
    field('Chart of', pick),
    chart,
    h('h2', null, 'By project'),
    stats.projects.length
      ? table([['Project'], ['Id', 'hide-sm'], ['Hits', 'num'], ['Misses', 'num'], ['VND saved', 'num']], rows)
      : h('p', { class: 'hint', id: 'cache-projects-empty' }, 'No hits or misses in these 30 days.'),
  ];
}

function settingsForm(v, reload) {
  const enabled = h('input', { type: 'checkbox', id: 'cache-enabled', checked: v.enabled || null });
  const ttl = h('input', {
    type: 'number',
    id: 'cache-ttl',
    min: 1,
    max: v.max_ttl_seconds,
    value: v.default_ttl_seconds,
  });
  const scope = h(
    'select',
    { id: 'cache-scope' },
    h('option', { value: 'account', selected: v.scope === 'account' || null }, 'The whole account shares entries'),
    h('option', { value: 'project', selected: v.scope === 'project' || null }, "Each project's keys share entries"),
    h('option', { value: 'key', selected: v.scope === 'key' || null }, 'Each API key has its own entries'),
  );
  const err = h('div');
  const btn = h('button', { type: 'submit', id: 'cache-save' }, 'Save');
  const form = h(
    'form',
    { class: 'form', id: 'cache-settings' },
    field('Cache answers for every key of this account', enabled),
    field('Keep entries for (seconds)', ttl),
    field('Sharing', scope),
    err,
    btn,
  );
  onSubmit(
    form,
    err,
    btn,
    () => ({ enabled: enabled.checked, default_ttl_seconds: Number(ttl.value), scope: scope.value }),
    async (what) => {
      await api('PATCH', '/cache/settings', what);
      reload();
    },
  );
  return form;
}

// A switch per key (under its project's) or per project (under the account's): on, off, or inherited.
function switchRows(items, kind, reload) {
  return items.map((k) => {
    const sel = h(
      'select',
      {
        'aria-label': 'Cache for ' + kind + ' ' + (k.name || k.id),
        ['data-' + kind]: k.id,
        onchange: async (e) => {
          const val = e.target.value;
          await api('PUT', '/cache/' + kind + 's/' + k.id, { enabled: val === 'inherit' ? null : val === 'on' });
          reload();
        },
      },
      h(
        'option',
        { value: 'inherit', selected: k.enabled === null || null },
        kind === 'key' ? "The project's setting" : "The account's setting",
      ),
      h('option', { value: 'on', selected: k.enabled === true || null }, 'On'),
      h('option', { value: 'off', selected: k.enabled === false || null }, 'Off'),
    );
    return h(
      'tr',
      null,
      h('td', null, k.name || '—'),
      h('td', { class: 'mono hide-sm' }, k.id),
      h('td', null, sel),
      h('td', null, k.effective ? 'cached' : 'not cached'),
    );
  });
}

function purgeForm() {
  const model = h('input', { id: 'purge-model', placeholder: 'gpt-4o-mini' });
  const entry = h('input', { id: 'purge-entry', placeholder: 'x-gateway-cache-key of an answer' });
  const done = h('div', { class: 'hint', id: 'purge-result' });
  const err = h('div');
  const run = async (path, what) => {
    formError(err, null);
    try {
      const r = await api('DELETE', path);
      replace(done, r.deleted === true ? 'Entry deleted.' : num(r.deleted) + ' entries of ' + what + ' deleted.');
    } catch (e) {
      formError(err, e);
    }
  };
  return h(
    'div',
    { class: 'form' },
    field('Delete every entry of a model', model),
    h(
      'button',
      {
        class: 'secondary',
        onclick: () => run('/cache/entries?model=' + encodeURIComponent(model.value), model.value),
      },
      'Delete',
    ),
    field('Delete one entry', entry),
    h(
      'button',
      { class: 'secondary', onclick: () => run('/cache/entries/' + encodeURIComponent(entry.value.trim())) },
      'Delete',
    ),
    err,
    done,
  );
}

export function pageCache(main, _p, _q, scope) {
  const body = h('div');
  replace(
    main,
    pageHead(
      'Response cache',
      'Identical requests answered from the cache, with no upstream call. A hit costs the hit price; a request can ' +
        'also ask with the x-gateway-cache header (ttl=SECONDS, no-store, refresh).',
    ),
    body,
  );
  const reload = () => pageCache(main, _p, _q, scope);
  load(
    body,
    scope,
    () => api('GET', '/cache?days=30'),
    ({ settings, stats }) => {
      const to = new Date().toISOString().slice(0, 10);
      const from = new Date(Date.now() - 29 * 86400000).toISOString().slice(0, 10);
      replace(
        body,
        cards([
          ['VND saved (30 days)', vnd(stats.saved_vnd), 'cache-saved'],
          ['Hits', num(stats.hits), 'cache-hits'],
          ['Misses', num(stats.misses), 'cache-misses'],
          ['Price of a hit', vnd(settings.hit_price_vnd), 'cache-hit-price'],
        ]),
        ...projectStats(stats, from, to),
        h('h2', null, 'Settings'),
        settingsForm(settings, reload),
        h('h2', null, 'Projects'),
        table([['Project'], ['Id', 'hide-sm'], ['Cache'], ['Now']], switchRows(settings.projects, 'project', reload)),
        h('h2', null, 'API keys'),
        table([['Key'], ['Id', 'hide-sm'], ['Cache'], ['Now']], switchRows(settings.keys, 'key', reload)),
        h('h2', null, 'Purge'),
        purgeForm(),
      );
    },
  );
}
