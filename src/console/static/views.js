/* Console shared views: loading, empty and error states, tables, lists, cards, dialogs, form helpers. */
import { api } from './api.js';
import { BASE, h, replace, s } from './core.js';

// ---------------------------------------------------------------- shared views
export function loading(text) {
  return h('div', { class: 'state', role: 'status' }, h('span', { class: 'spinner' }), ' ', text || 'Loading…');
}
// Line icons drawn as SVG paths (emoji fonts are missing on many systems).
export const ICONS = {
  key: 'M15 7a4 4 0 1 1-3.9 4.9L4 19v-3h2v-2h2l1.2-1.2A4 4 0 0 1 15 7z M16 10h.01',
  ledger: 'M5 4h14v16H5z M9 8h6 M9 12h6 M9 16h3',
  chart: 'M4 20h16 M7 16v-4 M12 16V8 M17 16v-7',
  film: 'M3 6h18v12H3z M7 6v12 M17 6v12 M3 10h4 M3 14h4 M17 10h4 M17 14h4',
  search: 'M11 4a7 7 0 1 1 0 14a7 7 0 0 1 0-14z M16 16l4 4',
  grid: 'M4 4h7v7H4z M13 4h7v7h-7z M4 13h7v7H4z M13 13h7v7h-7z',
  users:
    'M9 11a3.5 3.5 0 1 0 0-7a3.5 3.5 0 0 0 0 7z M3 20c0-3.3 2.7-6 6-6s6 2.7 6 6 ' +
    'M16 4.5a3.5 3.5 0 0 1 0 6.5 M18 14c2 .8 3 3 3 6',
  alert: 'M12 3l10 17H2z M12 10v4 M12 17v.5',
};
export function icon(name) {
  return s(
    'svg',
    {
      class: 'icon',
      viewBox: '0 0 24 24',
      width: 40,
      height: 40,
      fill: 'none',
      stroke: 'currentColor',
      'stroke-width': 1.6,
      'stroke-linecap': 'round',
      'stroke-linejoin': 'round',
      'aria-hidden': 'true',
    },
    s('path', { d: ICONS[name] || ICONS.grid }),
  );
}
export function emptyState(iconName, title, text, action) {
  return h(
    'div',
    { class: 'state empty' },
    icon(iconName),
    h('h3', null, title),
    text ? h('p', null, text) : null,
    action || null,
  );
}
export function errorState(err, retry) {
  return h(
    'div',
    { class: 'state error', role: 'alert' },
    icon('alert'),
    h('h3', null, err && err.status === 403 ? 'Not allowed' : 'Something went wrong'),
    h('p', null, (err && err.message) || String(err)),
    retry ? h('button', { class: 'secondary', onclick: retry }, 'Try again') : null,
  );
}
export function pageHead(title, sub, right) {
  return h(
    'div',
    { class: 'page-head' },
    h('div', null, h('h1', null, title), sub ? h('p', null, sub) : null),
    right || null,
  );
}
/**
 * A table in its scrolling wrapper. `headers`: each [label, class of its column (optional)]. `tbody` comes from the
 * caller, which may add rows to it later.
 */
export function tableOf(attrs, headers, tbody, foot) {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      attrs,
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          headers.map((c) => h('th', { class: c[1] || null }, c[0])),
        ),
      ),
      tbody,
      foot ? h('tfoot', null, foot) : null,
    ),
  );
}
export function table(headers, rows, foot) {
  return tableOf(null, headers, h('tbody', null, rows), foot);
}
/** A list's view: `empty` when it has no items, else what render(items) makes of them. */
export function listOr(items, empty, render) {
  return items.length ? render(items) : empty;
}
/** Loads a list (the `data` of what fetcher() returns) into `el`; render(items, view) draws a non-empty one. */
export function loadList(el, scope, fetcher, empty, render) {
  return load(el, scope, fetcher, (view) =>
    replace(
      el,
      listOr(view.data, empty, (items) => render(items, view)),
    ),
  );
}
/**
 * Loads the list at GET `path` into `el` (the loading state only the first time), then again every 2 s while
 * any item isOpen, with `liveText` in `live` meanwhile.
 */
export function pollList(el, live, scope, path, isOpen, liveText, empty, render) {
  let first = true;
  const refresh = async () => {
    if (first) replace(el, loading());
    try {
      const { data } = await api('GET', path);
      if (!scope.alive()) return;
      first = false;
      replace(el, listOr(data, empty, render));
      const any = data.some(isOpen);
      replace(live, any ? h('span', { class: 'live', id: 'live-refresh' }, liveText) : null);
      if (any) scope.later(2000, refresh);
    } catch (e) {
      if (!scope.alive() || e.status === 401) return;
      replace(
        el,
        errorState(e, () => {
          first = true;
          refresh();
        }),
      );
    }
  };
  refresh();
  return refresh;
}
/** Labelled values: each [term, value, attributes of the value's element (optional)]; null entries are left out. */
export function props(entries) {
  return h(
    'dl',
    { class: 'props' },
    entries.filter(Boolean).map(([term, value, attrs]) => [h('dt', null, term), h('dd', attrs || null, value)]),
  );
}
/** A row of figures, the first one stressed; each is [label, value, id of the value's element (optional)]. */
export function cards(figures) {
  return h(
    'div',
    { class: 'cards' },
    figures.map(([label, value, id], i) =>
      h(
        'div',
        { class: i ? 'card' : 'card primary' },
        h('div', { class: 'label' }, label),
        h('div', { class: 'value', id }, value),
      ),
    ),
  );
}
/** Chips that filter a list by status: links to basePath?status=…, the current one marked. */
export function statusChips(basePath, current, statuses, labelOf, chipAttrs) {
  const chip = (st, text) =>
    h(
      'a',
      Object.assign(
        { href: BASE + basePath + (st ? '?status=' + st : ''), class: current === st ? 'active' : null },
        chipAttrs ? chipAttrs(st) : null,
      ),
      text,
    );
  return h(
    'div',
    { class: 'chips', role: 'navigation', 'aria-label': 'Filter by status' },
    chip('', 'All'),
    statuses.map((st) => chip(st, labelOf(st))),
  );
}
/** Loads data into `el`: a loading state first, then render(data), or an error state with a retry. */
export async function load(el, scope, fetcher, renderData) {
  replace(el, loading());
  const run = async () => {
    replace(el, loading());
    try {
      const data = await fetcher();
      if (scope.alive()) renderData(data);
    } catch (e) {
      if (scope.alive() && e.status !== 401) replace(el, errorState(e, run));
    }
  };
  await run();
}
export function confirmDialog(title, text, confirmLabel) {
  return new Promise((resolve) => {
    const close = (v) => {
      document.removeEventListener('keydown', onKey);
      back.remove();
      resolve(v);
    };
    const onKey = (e) => {
      if (e.key === 'Escape') close(false);
    };
    const ok = h('button', { class: 'danger', id: 'confirm-ok', onclick: () => close(true) }, confirmLabel);
    const back = h(
      'div',
      {
        class: 'modal-backdrop',
        onclick: (e) => {
          if (e.target === back) close(false);
        },
      },
      h(
        'div',
        { class: 'modal', role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'modal-title' },
        h('h2', { id: 'modal-title' }, title),
        h('p', null, text),
        h(
          'div',
          { class: 'actions' },
          h('button', { class: 'secondary', id: 'confirm-cancel', onclick: () => close(false) }, 'Cancel'),
          ok,
        ),
      ),
    );
    document.addEventListener('keydown', onKey);
    document.body.appendChild(back);
    ok.focus();
  });
}
export function formError(el, err) {
  replace(el, err ? h('div', { class: 'form-error', role: 'alert' }, err.message || String(err)) : null);
}
/** A form field: the control under its label (which names the control by its id). */
export function field(label, control) {
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control);
}
/**
 * Submitting a form: its last error cleared, then prepare() returns what to send, or an Error to show instead.
 * The button is off while send(what) runs; an error it throws is shown in `err`.
 */
export function onSubmit(form, err, btn, prepare, send) {
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    formError(err, null);
    const what = prepare();
    if (what instanceof Error) return formError(err, what);
    btn.disabled = true;
    try {
      await send(what);
    } catch (ex) {
      formError(err, ex);
    } finally {
      btn.disabled = false;
    }
  });
}
/**
 * A secret the server shows only once (a new API key, a webhook signing secret), in `el` with a Copy button,
 * until the user says it is saved. `o`: title, text, value, inputId, label (of the input), copyId, noun.
 */
export function showOnce(el, o) {
  const input = h('input', {
    id: o.inputId,
    readonly: true,
    value: o.value,
    'aria-label': o.label,
    onfocus: (e) => e.target.select(),
  });
  const copied = h('span', { class: 'hint', role: 'status' });
  replace(
    el,
    h(
      'div',
      { class: 'newkey' },
      h('strong', null, o.title),
      h('p', null, o.text),
      h(
        'div',
        { class: 'row' },
        input,
        h(
          'button',
          {
            type: 'button',
            id: o.copyId,
            onclick: async () => {
              copied.textContent = (await copyText(o.value, input))
                ? 'Copied to the clipboard.'
                : 'Copy failed: select the ' + o.noun + ' and copy it by hand.';
            },
          },
          'Copy',
        ),
      ),
      copied,
      h(
        'div',
        { class: 'media-actions' },
        h('button', { type: 'button', class: 'secondary small', onclick: () => replace(el) }, 'I have saved it'),
      ),
    ),
  );
}
export async function copyText(text, input) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (e) {
    // Clipboard API needs a secure context; fall back to selecting the text and the legacy copy command.
    input.select();
    try {
      return document.execCommand('copy');
    } catch (e2) {
      return false;
    }
  }
}
export const STATUS_BADGE = {
  submitted: 'info',
  processing: 'warn',
  completed: 'ok',
  failed: 'bad',
  expired: 'muted',
  validating: 'info',
  in_progress: 'warn',
  finalizing: 'warn',
  cancelling: 'warn',
  cancelled: 'muted',
  queued: 'info',
  incomplete: 'warn',
};
export const statusBadge = (st) => h('span', { class: 'badge ' + (STATUS_BADGE[st] || '') }, st);
