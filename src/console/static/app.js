/*
 * Model Gateway console: a small single-page app with no framework and no build step.
 * Pages render from the JSON API at /console/api (session cookie + X-CSRF-Token on every change).
 * All text from the server is inserted as text nodes (never as HTML), so nothing it returns can inject markup.
 */
/* global document, window, fetch, navigator, history, location, setTimeout, clearTimeout, crypto,
   URLSearchParams, Node */
'use strict';
(function () {
  const BASE = '/console';
  const UUID = '([0-9a-fA-F-]{36})';
  const state = { me: null, csrf: '', timers: [], seq: 0 };

  // ---------------------------------------------------------------- DOM helpers
  function h(tag, attrs) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    appendKids(el, Array.prototype.slice.call(arguments, 2));
    return el;
  }
  const SVGNS = 'http://www.w3.org/2000/svg';
  function s(tag, attrs) {
    const el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    appendKids(el, Array.prototype.slice.call(arguments, 2));
    return el;
  }
  function setAttrs(el, attrs) {
    for (const k in attrs || {}) {
      const v = attrs[k];
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'value' || k === 'checked' || k === 'disabled') el[k] = v;
      else if (k === 'style') {
        // Through CSSOM: the Content-Security-Policy forbids style attributes.
        for (const decl of String(v).split(';')) {
          const i = decl.indexOf(':');
          if (i > 0) el.style.setProperty(decl.slice(0, i).trim(), decl.slice(i + 1).trim());
        }
      } else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  function appendKids(el, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    }
  }
  function replace(el) {
    el.replaceChildren();
    appendKids(el, Array.prototype.slice.call(arguments, 1));
    return el;
  }

  // ---------------------------------------------------------------- formatting
  // Vietnamese money format: 1.250.000 ₫ (dot thousands separator, dong sign after the amount).
  const vndFmt = new Intl.NumberFormat('vi-VN', { style: 'currency', currency: 'VND', maximumFractionDigits: 0 });
  const numFmt = new Intl.NumberFormat('vi-VN', { maximumFractionDigits: 2 });
  const vnd = (n) => vndFmt.format(n);
  const num = (n) => numFmt.format(n);
  const pad = (n) => String(n).padStart(2, '0');
  function ymd(d) {
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate());
  }
  function when(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    return ymd(d) + ' ' + pad(d.getHours()) + ':' + pad(d.getMinutes());
  }
  function ago(iso) {
    if (!iso) return 'never';
    const sec = Math.round((Date.now() - Date.parse(iso)) / 1000);
    if (sec < 60) return 'just now';
    if (sec < 3600) return Math.floor(sec / 60) + ' min ago';
    if (sec < 86400) return Math.floor(sec / 3600) + ' h ago';
    return when(iso);
  }
  const short = (id) => String(id).slice(0, 8);
  const UNIT_LABELS = {
    input_tokens: 'input tokens',
    output_tokens: 'output tokens',
    prompt_tokens: 'prompt tokens',
    completion_tokens: 'completion tokens',
    total_tokens: 'tokens',
    characters: 'characters',
    chars: 'characters',
    seconds: 'seconds',
    audio_seconds: 'audio seconds',
    minutes: 'minutes',
    images: 'images',
    duration_seconds: 'seconds',
    input_uncached_tokens: 'uncached input tokens',
    cache_read_tokens: 'cache-read tokens',
    cache_write_5m_tokens: 'cache-write (5 min) tokens',
    cache_write_1h_tokens: 'cache-write (1 h) tokens',
    reasoning_tokens: 'reasoning tokens',
  };
  function unitsText(units) {
    const keys = Object.keys(units || {}).filter((k) => k !== 'total_tokens' || Object.keys(units).length === 1);
    if (!keys.length) return '—';
    return keys.map((k) => num(units[k]) + ' ' + (UNIT_LABELS[k] || k.replace(/_/g, ' '))).join(' · ');
  }

  // ---------------------------------------------------------------- API
  class ApiError extends Error {
    constructor(message, status, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }
  async function api(method, path, body) {
    const headers = { accept: 'application/json' };
    if (method !== 'GET') headers['x-csrf-token'] = state.csrf;
    const opts = { method, headers, credentials: 'same-origin' };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(BASE + '/api' + path, opts);
    } catch (e) {
      throw new ApiError('Cannot reach the server. Check your connection and try again.', 0, null);
    }
    if (res.status === 204) return null;
    let data = null;
    try {
      data = await res.json();
    } catch (e) {
      data = null;
    }
    if (!res.ok) {
      const err = data && data.error ? data.error : null;
      const msg = err && err.message ? err.message : 'The server answered HTTP ' + res.status + '.';
      if (res.status === 401 && path !== '/session') {
        // The session ended (expired, signed out elsewhere): back to sign-in, then here again.
        state.me = null;
        go('/login?next=' + encodeURIComponent(currentPath()), true);
      }
      throw new ApiError(msg, res.status, err);
    }
    return data;
  }

  // ---------------------------------------------------------------- routing
  const routes = [
    { re: /^\/login$/, page: pageLogin, public: true },
    { re: /^\/?$/, page: () => go('/keys', true) },
    { re: /^\/keys$/, page: pageKeys, nav: 'keys' },
    { re: /^\/balance$/, page: pageBalance, nav: 'balance' },
    { re: new RegExp('^/requests/' + UUID + '$'), page: pageRequest, nav: 'balance' },
    { re: /^\/usage$/, page: pageUsage, nav: 'usage' },
    { re: /^\/jobs$/, page: pageJobs, nav: 'jobs' },
    { re: new RegExp('^/jobs/' + UUID + '$'), page: pageJob, nav: 'jobs' },
    { re: /^\/models$/, page: pageModels, nav: 'models' },
    { re: /^\/batches$/, page: pageBatches, nav: 'batches' },
    { re: /^\/webhooks$/, page: pageWebhooks, nav: 'webhooks' },
    { re: /^\/admin\/accounts$/, page: pageAccounts, nav: 'accounts', operator: true },
    { re: new RegExp('^/admin/accounts/' + UUID + '$'), page: pageAccount, nav: 'accounts', operator: true },
  ];
  function currentPath() {
    return location.pathname.slice(BASE.length) + location.search;
  }
  function go(path, replaceEntry) {
    history[replaceEntry ? 'replaceState' : 'pushState'](null, '', BASE + path);
    render();
  }
  window.addEventListener('popstate', render);
  document.addEventListener('click', (e) => {
    const a = e.target.closest && e.target.closest('a');
    if (
      !a ||
      a.target ||
      a.hasAttribute('download') ||
      e.defaultPrevented ||
      e.button !== 0 ||
      e.metaKey ||
      e.ctrlKey ||
      e.shiftKey ||
      e.altKey
    )
      return;
    if (a.origin !== location.origin || !a.pathname.startsWith(BASE + '/') || a.pathname.startsWith(BASE + '/media/'))
      return;
    e.preventDefault();
    go(a.pathname.slice(BASE.length) + a.search);
  });
  const link = (path, text, attrs) => h('a', Object.assign({ href: BASE + path }, attrs || {}), text);

  /** A page's lifetime: timers it started stop, and late answers are ignored, once the user navigates away. */
  function pageScope() {
    for (const t of state.timers) clearTimeout(t);
    state.timers = [];
    const seq = ++state.seq;
    return {
      alive: () => seq === state.seq,
      later(ms, fn) {
        if (seq !== state.seq) return;
        state.timers.push(
          setTimeout(() => {
            if (seq === state.seq) fn();
          }, ms),
        );
      },
    };
  }

  async function render() {
    const scope = pageScope();
    const app = document.getElementById('app');
    const path = location.pathname.slice(BASE.length) || '/';
    const route = routes.find((r) => r.re.test(path));
    const params = route ? path.match(route.re).slice(1) : [];
    const query = new URLSearchParams(location.search);
    if (!state.me && !(route && route.public)) {
      try {
        const me = await api('GET', '/session');
        setMe(me);
      } catch (e) {
        if (e.status === 401) return go('/login?next=' + encodeURIComponent(currentPath()), true);
        return replace(app, h('div', { class: 'login-wrap' }, errorState(e, render)));
      }
      if (!scope.alive()) return;
    }
    if (!route) {
      return layout(app, null, (main) =>
        replace(
          main,
          emptyState(
            'search',
            'Page not found',
            'There is no console page at this address.',
            link('/keys', 'Go to API keys', { class: 'button' }),
          ),
        ),
      );
    }
    if (route.public) return route.page(app, params, query, scope);
    if (route.operator && state.me.user.role !== 'operator') {
      return layout(app, route.nav, (main) =>
        replace(main, errorState(new ApiError('This page is for operators only.', 403), null)),
      );
    }
    layout(app, route.nav, (main) => route.page(main, params, query, scope));
  }
  function setMe(me) {
    state.me = me;
    state.csrf = me.csrfToken;
  }

  function layout(app, active, fill) {
    const isOp = state.me && state.me.user.role === 'operator';
    const item = (key, path, text) =>
      h(
        'a',
        { href: BASE + path, class: active === key ? 'active' : null, 'aria-current': active === key ? 'page' : null },
        text,
      );
    const main = h('main', { id: 'main' });
    replace(
      app,
      h(
        'header',
        { class: 'topbar' },
        h(
          'a',
          { class: 'brand', href: BASE + '/keys' },
          h('img', { src: BASE + '/static/favicon.svg', alt: '' }),
          'Model Gateway',
        ),
        h(
          'nav',
          { class: 'nav', 'aria-label': 'Console sections' },
          item('keys', '/keys', 'API Keys'),
          item('balance', '/balance', 'Balance'),
          item('usage', '/usage', 'Usage'),
          item('jobs', '/jobs', 'Video jobs'),
          item('batches', '/batches', 'Batches'),
          item('webhooks', '/webhooks', 'Webhooks'),
          item('models', '/models', 'Models'),
          isOp ? [h('span', { class: 'sep' }), item('accounts', '/admin/accounts', 'Accounts')] : null,
        ),
        h(
          'div',
          { class: 'who' },
          h('span', { class: 'email', title: state.me.user.accountName }, state.me.user.email),
          isOp ? h('span', { class: 'badge info' }, 'operator') : null,
          h('button', { class: 'secondary small', id: 'signout', onclick: signOut }, 'Sign out'),
        ),
      ),
      main,
    );
    // On a phone the section strip scrolls sideways: keep the current section in view.
    const current = app.querySelector('.nav a.active');
    if (current && current.scrollIntoView) current.scrollIntoView({ block: 'nearest', inline: 'nearest' });
    fill(main);
  }

  async function signOut() {
    try {
      await api('DELETE', '/session');
    } catch (e) {
      // Signed out either way: the cookie is cleared by the server or already invalid.
    }
    state.me = null;
    state.csrf = '';
    go('/login', true);
  }

  // ---------------------------------------------------------------- shared views
  function loading(text) {
    return h('div', { class: 'state', role: 'status' }, h('span', { class: 'spinner' }), ' ', text || 'Loading…');
  }
  // Line icons drawn as SVG paths (emoji fonts are missing on many systems).
  const ICONS = {
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
  function icon(name) {
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
  function emptyState(iconName, title, text, action) {
    return h(
      'div',
      { class: 'state empty' },
      icon(iconName),
      h('h3', null, title),
      text ? h('p', null, text) : null,
      action || null,
    );
  }
  function errorState(err, retry) {
    return h(
      'div',
      { class: 'state error', role: 'alert' },
      icon('alert'),
      h('h3', null, err && err.status === 403 ? 'Not allowed' : 'Something went wrong'),
      h('p', null, (err && err.message) || String(err)),
      retry ? h('button', { class: 'secondary', onclick: retry }, 'Try again') : null,
    );
  }
  function pageHead(title, sub, right) {
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
  function tableOf(attrs, headers, tbody, foot) {
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
  function table(headers, rows, foot) {
    return tableOf(null, headers, h('tbody', null, rows), foot);
  }
  /** A list's view: `empty` when it has no items, else what render(items) makes of them. */
  function listOr(items, empty, render) {
    return items.length ? render(items) : empty;
  }
  /** Loads a list (the `data` of what fetcher() returns) into `el`; render(items, view) draws a non-empty one. */
  function loadList(el, scope, fetcher, empty, render) {
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
  function pollList(el, live, scope, path, isOpen, liveText, empty, render) {
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
  function props(entries) {
    return h(
      'dl',
      { class: 'props' },
      entries.filter(Boolean).map(([term, value, attrs]) => [h('dt', null, term), h('dd', attrs || null, value)]),
    );
  }
  /** A row of figures, the first one stressed; each is [label, value, id of the value's element (optional)]. */
  function cards(figures) {
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
  function statusChips(basePath, current, statuses, labelOf, chipAttrs) {
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
  async function load(el, scope, fetcher, renderData) {
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
  function confirmDialog(title, text, confirmLabel) {
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
  function formError(el, err) {
    replace(el, err ? h('div', { class: 'form-error', role: 'alert' }, err.message || String(err)) : null);
  }
  /** A form field: the control under its label (which names the control by its id). */
  function field(label, control) {
    return h('div', { class: 'field' }, h('label', { for: control.id }, label), control);
  }
  /**
   * Submitting a form: its last error cleared, then prepare() returns what to send, or an Error to show instead.
   * The button is off while send(what) runs; an error it throws is shown in `err`.
   */
  function onSubmit(form, err, btn, prepare, send) {
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
  function showOnce(el, o) {
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
  async function copyText(text, input) {
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
  const STATUS_BADGE = {
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
  };
  const statusBadge = (st) => h('span', { class: 'badge ' + (STATUS_BADGE[st] || '') }, st);

  // ---------------------------------------------------------------- sign-in
  function pageLogin(app, _params, query) {
    const next = query.get('next');
    const target =
      next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/login') ? next : '/keys';
    if (state.me) return go(target, true);
    const err = h('div');
    const btn = h('button', { type: 'submit', id: 'login-submit' }, 'Sign in');
    const form = h(
      'form',
      { class: 'panel login', id: 'login-form', novalidate: true },
      h('div', { class: 'brand' }, h('img', { src: BASE + '/static/favicon.svg', alt: '' }), 'Model Gateway'),
      h('h1', null, 'Sign in to the console'),
      h('p', { class: 'hint' }, 'Manage API keys, balance, usage and video jobs.'),
      err,
      field(
        'Email',
        h('input', {
          id: 'email',
          name: 'email',
          type: 'email',
          autocomplete: 'username',
          required: true,
          autofocus: true,
        }),
      ),
      field(
        'Password',
        h('input', {
          id: 'password',
          name: 'password',
          type: 'password',
          autocomplete: 'current-password',
          required: true,
        }),
      ),
      btn,
    );
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      formError(err, null);
      const email = form.email.value.trim();
      const password = form.password.value;
      if (!email || !password) return formError(err, new Error('Enter your email and password.'));
      btn.disabled = true;
      btn.textContent = 'Signing in…';
      try {
        setMe(await api('POST', '/session', { email, password }));
        go(target, true);
      } catch (ex) {
        formError(err, ex);
        btn.disabled = false;
        btn.textContent = 'Sign in';
        form.password.select();
      }
    });
    replace(app, h('div', { class: 'login-wrap' }, form));
  }

  // ---------------------------------------------------------------- per-key controls (customer and operator pages)
  const LIMIT_FIELDS = [
    { name: 'rpm', label: 'Requests / min', fmt: (v) => num(v) + ' req/min' },
    { name: 'tpm', label: 'Tokens / min', fmt: (v) => num(v) + ' tokens/min' },
    { name: 'budgetDayVnd', label: 'Budget / day (VND)', fmt: (v) => vnd(v) + '/day' },
    { name: 'budgetMonthVnd', label: 'Budget / month (VND)', fmt: (v) => vnd(v) + '/month' },
  ];
  /**
   * Expiry dates are shown and entered in the budget time zone (the server's BUDGET_TIME_ZONE), the zone of the
   * budget days and months beside them, whatever the browser's own zone.
   */
  function zoneWallClock(iso, zone) {
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
  function zoneInstant(value, zone) {
    const wall = Date.parse(value + ':00Z'); // the wall clock read as if it were UTC
    let t = wall;
    // The zone's offset at the instant, twice: the second pass settles a guess that crossed a DST change.
    for (let i = 0; i < 2; i++) t = wall - (Date.parse(zoneWallClock(new Date(t).toISOString(), zone) + ':00Z') - t);
    return new Date(t).toISOString();
  }
  /** The limits that apply to a key, each marked when it comes from the account default. */
  function limitsCell(k, zone) {
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
  function usageCell(k, view) {
    const of = (used, limit) => num(used) + (limit !== null ? ' / ' + num(limit) : '');
    return [
      h('div', { class: 'nowrap' }, of(k.usage.requests, k.effective.rpm) + ' req'),
      h('div', { class: 'nowrap' }, of(k.usage.tokens, k.effective.tpm) + ' tokens'),
      h('div', { class: 'hint' }, 'last ' + view.windowSeconds + ' s'),
    ];
  }
  function spendCell(k) {
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
  function limitsForm(idPrefix, current, path, expiryZone, onSaved) {
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
  function keyControlRows(view, pathOf, refresh, lastCell) {
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
  const KEY_HEAD = [['Key'], ['Created', 'hide-sm'], ['Limits'], ['This minute'], ['Spent'], [''], ['']];

  // ---------------------------------------------------------------- API keys
  function pageKeys(main, _p, _q, scope) {
    const newKey = h('div', { id: 'new-key' });
    const list = h('div');
    const err = h('div');
    const btn = h('button', { type: 'submit', id: 'create-key' }, 'Create key');
    const form = h(
      'form',
      { class: 'inline', id: 'key-form' },
      field(
        'Key name',
        h('input', {
          id: 'key-name',
          name: 'name',
          maxlength: 100,
          placeholder: 'e.g. production server',
          required: true,
        }),
      ),
      btn,
    );
    const named = () => form.name.value.trim() || new Error('Give the key a name so you can recognise it later.');
    onSubmit(form, err, btn, named, async (name) => {
      const { key } = await api('POST', '/keys', { name });
      form.reset();
      showNewKey(key);
      refresh();
    });
    function showNewKey(key) {
      showOnce(newKey, {
        title: 'Key “' + key.name + '” created.',
        text: 'Copy it now: this is the only time the full key is shown. Store it somewhere safe.',
        value: key.key,
        inputId: 'new-key-value',
        label: 'New API key',
        copyId: 'copy-key',
        noun: 'key',
      });
    }
    const refresh = () =>
      loadList(
        list,
        scope,
        () => api('GET', '/keys'),
        emptyState(
          'key',
          'No API keys yet',
          'Create a key above, then send it as “Authorization: Bearer <key>” to the /v1 API.',
        ),
        (_keys, view) => [
          table(
            KEY_HEAD,
            keyControlRows(
              view,
              (k) => '/keys/' + k.id + '/limits',
              refresh,
              (k) =>
                k.revokedAt
                  ? h('span', { class: 'badge muted', title: 'Revoked ' + when(k.revokedAt) }, 'revoked')
                  : h('button', { class: 'ghost small revoke', onclick: () => revoke(k) }, 'Revoke'),
            ),
          ),
          h(
            'p',
            { class: 'hint' },
            'Budgets count calendar days and months in ' +
              view.budgetTimeZone +
              '. Empty limits use the account defaults' +
              (LIMIT_FIELDS.some((f) => view.defaults[f.name] !== null)
                ? ' (' +
                  LIMIT_FIELDS.filter((f) => view.defaults[f.name] !== null)
                    .map((f) => f.fmt(view.defaults[f.name]))
                    .join(', ') +
                  ')'
                : ', none set') +
              '.',
          ),
        ],
      );
    async function revoke(k) {
      const yes = await confirmDialog(
        'Revoke this key?',
        'Requests using “' +
          (k.name || k.prefix) +
          '” (' +
          k.prefix +
          '…) will be refused within a few seconds. This cannot be undone.',
        'Revoke key',
      );
      if (!yes) return;
      try {
        await api('DELETE', '/keys/' + k.id);
      } catch (ex) {
        formError(err, ex);
      }
      refresh();
    }
    replace(
      main,
      pageHead('API Keys', 'Keys authenticate your requests to the /v1 API. Each key works for this account only.'),
      newKey,
      h('section', { class: 'panel' }, h('h2', null, 'Create a key'), form, err),
      h('section', { class: 'panel' }, h('h2', null, 'Your keys'), list),
    );
    refresh();
  }

  // ---------------------------------------------------------------- balance and ledger
  const KIND = {
    topped_up: { label: 'Top-up', cls: 'ok', sign: '+' },
    hold_placed: { label: 'Hold', cls: 'warn', sign: '' },
    hold_released: { label: 'Release', cls: 'muted', sign: '' },
    charged: { label: 'Charge', cls: 'bad', sign: '−' },
    uncollected: { label: 'Uncollected', cls: 'warn', sign: '' },
  };
  function ledgerRef(e) {
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
  function ledgerRows(entries) {
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
  const LEDGER_HEAD = [['Time'], ['Type'], ['Amount', 'num'], ['For'], ['Note', 'hide-sm']];
  function balanceCards(b) {
    return cards([
      ['Available', vnd(b.available), 'bal-available'],
      ['Held for running work', vnd(b.held), 'bal-held'],
      ['Total balance', vnd(b.balance), 'bal-total'],
    ]);
  }
  function pageBalance(main, _p, _q, scope) {
    const body = h('div');
    replace(
      main,
      pageHead(
        'Balance',
        'Prepaid balance in VND. Holds set funds aside while work runs; charges take the actual cost.',
      ),
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

  function pageRequest(main, params, _q, scope) {
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

  // ---------------------------------------------------------------- usage
  const PALETTE = [
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
  function daysBetween(from, to) {
    const out = [];
    const d = new Date(from + 'T00:00:00Z');
    const end = new Date(to + 'T00:00:00Z');
    while (d <= end && out.length < 400) {
      out.push(d.toISOString().slice(0, 10));
      d.setUTCDate(d.getUTCDate() + 1);
    }
    return out;
  }
  function compact(n) {
    if (n >= 1e9) return num(Math.round(n / 1e8) / 10) + ' tỷ';
    if (n >= 1e6) return num(Math.round(n / 1e5) / 10) + ' tr';
    if (n >= 1e3) return num(Math.round(n / 100) / 10) + 'k';
    return num(n);
  }
  /** The smallest 1, 2 or 5 x 10^k at or above n (a round top for the chart's axis). */
  function niceCeil(n) {
    const p = Math.pow(10, Math.floor(Math.log10(n)));
    for (const m of [1, 2, 5, 10]) if (m * p >= n) return m * p;
    return 10 * p;
  }
  /** Stacked bars per day, one colour per model; hand-written SVG. */
  function usageChart(rows, from, to, metric, colors) {
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
  const USAGE_HEAD = [
    ['Requests', 'num'],
    ['Units', 'hide-sm'],
    ['Cost', 'num'],
  ];
  /** A usage row's requests, units and cost; a total leaves the units (of unlike kinds) out. */
  const usageCells = (r, isTotal) => [
    h('td', { class: 'num' }, num(r.requests)),
    h('td', { class: 'hide-sm' }, isTotal ? null : unitsText(r.units)),
    h('td', { class: 'num' }, vnd(r.costVnd)),
  ];
  function pageUsage(main, _p, query, scope) {
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
            h(
              'div',
              { class: 'page-head' },
              h('h2', null, metric === 'cost' ? 'Cost per day' : 'Requests per day'),
              seg,
            ),
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

  // ---------------------------------------------------------------- video jobs
  const STATUSES = ['submitted', 'processing', 'completed', 'failed', 'expired'];
  const running = (j) => j.status === 'submitted' || j.status === 'processing';
  function jobRows(jobs, opts) {
    return jobs.map((j) =>
      h(
        'tr',
        {
          class: opts.clickable ? 'clickable' : null,
          'data-job-id': j.id,
          'data-status': j.status,
          onclick: opts.clickable
            ? (e) => {
                if (!e.target.closest('a')) go('/jobs/' + j.id);
              }
            : null,
        },
        h('td', { class: 'time' }, opts.clickable ? link('/jobs/' + j.id, when(j.createdAt)) : when(j.createdAt)),
        h('td', null, statusBadge(j.status)),
        h('td', { class: 'hide-sm' }, j.model),
        h('td', { class: 'truncate', title: j.prompt }, j.prompt),
        h('td', { class: 'num hide-sm' }, (j.durationSeconds || j.seconds) + ' s'),
        h(
          'td',
          { class: 'num' },
          j.costVnd !== null
            ? vnd(j.costVnd)
            : h('span', { class: 'hint', title: 'Held until the job ends' }, '≤ ' + vnd(j.maxCostVnd)),
        ),
        opts.temporal
          ? h(
              'td',
              { class: 'nowrap' },
              h('a', { href: j.temporalUrl, target: '_blank', rel: 'noopener', class: 'temporal-link' }, 'Workflow ↗'),
            )
          : null,
      ),
    );
  }
  const JOB_HEAD = [
    ['Created'],
    ['Status'],
    ['Model', 'hide-sm'],
    ['Prompt'],
    ['Length', 'num hide-sm'],
    ['Cost', 'num'],
  ];
  const jobChips = (basePath, current) =>
    statusChips(
      basePath,
      current,
      STATUSES,
      (st) => st[0].toUpperCase() + st.slice(1),
      (st) => ({ 'data-status': st || 'all' }),
    );
  function pageJobs(main, _p, query, scope) {
    const status = STATUSES.includes(query.get('status')) ? query.get('status') : '';
    const body = h('div');
    const live = h('span');
    replace(
      main,
      pageHead(
        'Video jobs',
        'Videos generated through POST /v1/videos. Completed videos can be watched and downloaded here.',
        live,
      ),
      jobChips('/jobs', status),
      h('section', { class: 'panel' }, body),
    );
    pollList(
      body,
      live,
      scope,
      '/jobs?limit=100' + (status ? '&status=' + status : ''),
      running,
      'Updating while jobs run',
      emptyState(
        'film',
        status ? 'No ' + status + ' jobs' : 'No video jobs yet',
        'Submit one with POST /v1/videos using one of your API keys; it appears here at once.',
      ),
      (jobs) => table(JOB_HEAD, jobRows(jobs, { clickable: true })),
    );
  }
  function pageJob(main, params, _q, scope) {
    const id = params[0];
    const body = h('div');
    replace(main, h('div', { class: 'crumbs' }, link('/jobs', 'Video jobs'), ' / ' + short(id)), body);
    let first = true;
    const refresh = async () => {
      if (first) replace(body, loading());
      try {
        const j = await api('GET', '/jobs/' + id);
        if (!scope.alive()) return;
        first = false;
        const media = BASE + '/media/jobs/' + j.id;
        replace(
          body,
          pageHead(
            'Video job ' + short(j.id),
            null,
            h(
              'span',
              { id: 'job-status' },
              statusBadge(j.status),
              running(j) ? h('span', { class: 'live', style: 'margin-left:.5rem' }, 'Updating') : null,
            ),
          ),
          j.hasVideo
            ? h(
                'section',
                { class: 'panel' },
                h('video', {
                  class: 'player',
                  id: 'job-video',
                  controls: true,
                  preload: 'metadata',
                  playsinline: true,
                  src: media + '/video.mp4',
                }),
                h(
                  'div',
                  { class: 'media-actions' },
                  h(
                    'a',
                    {
                      class: 'button',
                      id: 'job-download',
                      href: media + '/video.mp4?download=1',
                      download: 'video-' + j.id + '.mp4',
                    },
                    'Download MP4',
                  ),
                  j.hasLastFrame
                    ? h(
                        'a',
                        {
                          class: 'button secondary',
                          href: media + '/last-frame?download=1',
                          download: 'last-frame-' + j.id,
                        },
                        'Download last frame',
                      )
                    : null,
                ),
              )
            : null,
          j.error
            ? h(
                'div',
                { class: 'form-error', role: 'alert', id: 'job-error' },
                h('strong', null, 'Failed: '),
                j.error.message,
              )
            : null,
          j.status === 'expired'
            ? h(
                'div',
                { class: 'form-error', role: 'alert' },
                'The job expired before the provider produced a result. Nothing was charged.',
              )
            : null,
          h(
            'section',
            { class: 'panel' },
            props([
              ['Job id', h('code', null, j.id)],
              ['Model', j.model],
              ['Prompt', j.prompt, { class: 'prompt', id: 'job-prompt' }],
              ['Duration', j.durationSeconds !== null ? j.durationSeconds + ' s' : j.seconds + ' s requested'],
              j.size ? ['Size', j.size] : null,
              [
                'Cost',
                j.costVnd !== null ? vnd(j.costVnd) : running(j) ? 'up to ' + vnd(j.maxCostVnd) + ' (held)' : vnd(0),
                { id: 'job-cost' },
              ],
              ['Created', when(j.createdAt)],
              ['Completed', when(j.completedAt)],
              j.hasLastFrame
                ? [
                    'Last frame',
                    h('img', { class: 'lastframe', src: media + '/last-frame', alt: 'Last frame of the video' }),
                  ]
                : null,
            ]),
          ),
        );
        if (running(j)) scope.later(2000, refresh);
      } catch (e) {
        if (!scope.alive() || e.status === 401) return;
        replace(
          body,
          e.status === 404
            ? emptyState(
                'search',
                'Job not found',
                'There is no video job with this id on your account.',
                link('/jobs', 'All video jobs', { class: 'button secondary' }),
              )
            : errorState(e, () => {
                first = true;
                refresh();
              }),
        );
      }
    };
    refresh();
  }

  // ---------------------------------------------------------------- batches
  const BATCH_STATUSES = [
    'validating',
    'in_progress',
    'finalizing',
    'cancelling',
    'completed',
    'failed',
    'expired',
    'cancelled',
  ];
  const BATCH_OPEN = ['validating', 'in_progress', 'finalizing', 'cancelling'];
  const batchOpen = (b) => BATCH_OPEN.includes(b.status);
  const batchLabel = (st) => (st[0].toUpperCase() + st.slice(1)).replace('_', ' ');
  function batchFiles(b) {
    const base = BASE + '/media/batches/' + b.id + '/';
    const one = (which, text) =>
      b.files[which]
        ? h(
            'a',
            { href: base + which + '.jsonl', download: b.id + '_' + which + '.jsonl', class: 'file-' + which },
            text,
          )
        : null;
    const links = [one('input', 'Input'), one('output', 'Output'), one('error', 'Errors')].filter(Boolean);
    return links.length ? links.flatMap((l, i) => (i ? [' · ', l] : [l])) : '—';
  }
  const BATCH_HEAD = [
    ['Created'],
    ['Status'],
    ['Model', 'hide-sm'],
    ['Requests', 'num'],
    ['Cost', 'num'],
    ['Files'],
    [''],
  ];
  function batchRow(b, onCancel) {
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
  function pageBatches(main, _p, query, scope) {
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

  // ---------------------------------------------------------------- webhooks
  const EVENT_TYPES = ['video.processing', 'video.completed', 'video.failed', 'video.expired', 'video.cancelled'];
  const DELIVERY_BADGE = { pending: 'warn', succeeded: 'ok', failed: 'bad', cancelled: 'muted' };
  const unix = (t) => (t === null || t === undefined ? null : new Date(t * 1000).toISOString());
  function pageWebhooks(main, _p, _q, scope) {
    const newSecret = h('div', { id: 'new-secret' });
    const list = h('div');
    const err = h('div');
    const btn = h('button', { type: 'submit', id: 'create-webhook' }, 'Add endpoint');
    const boxes = EVENT_TYPES.map((t) =>
      h(
        'label',
        { class: 'nowrap' },
        h('input', { type: 'checkbox', name: 'events', value: t, checked: true }),
        ' ' + t,
      ),
    );
    const form = h(
      'form',
      { class: 'inline', id: 'webhook-form', novalidate: true },
      field(
        'Endpoint URL',
        h('input', {
          id: 'webhook-url',
          name: 'url',
          type: 'url',
          maxlength: 2048,
          required: true,
          placeholder: 'https://example.com/webhooks',
        }),
      ),
      field(
        'Description',
        h('input', { id: 'webhook-description', name: 'description', maxlength: 500, placeholder: 'optional' }),
      ),
      h('div', { class: 'field' }, h('span', { class: 'hint' }, 'Events'), h('div', null, boxes)),
      btn,
    );
    const prepare = () => {
      const events = boxes
        .map((b) => b.firstChild)
        .filter((c) => c.checked)
        .map((c) => c.value);
      if (!form.url.value.trim()) return new Error('Enter the https URL that receives the events.');
      if (!events.length) return new Error('Choose at least one event type.');
      return { url: form.url.value.trim(), description: form.description.value.trim(), events };
    };
    onSubmit(form, err, btn, prepare, async (body) => {
      const ep = await api('POST', '/webhooks', body);
      form.reset();
      boxes.forEach((b) => {
        b.firstChild.checked = true;
      });
      showSecret(ep, 'created');
      refresh();
    });
    function showSecret(ep, what) {
      showOnce(newSecret, {
        title: 'Endpoint ' + ep.url + ' ' + what + '.',
        text:
          'Copy the signing secret now: it is not shown again. ' +
          'Verify each delivery with it (see the README, “Webhooks”).',
        value: ep.secret,
        inputId: 'new-secret-value',
        label: 'Signing secret',
        noun: 'secret',
      });
    }
    function deliveriesTable(ep, el) {
      loadList(
        el,
        scope,
        () => api('GET', '/webhooks/' + ep.id + '/deliveries?limit=20'),
        h('p', { class: 'hint' }, 'No deliveries yet: they appear here as your video jobs change.'),
        (data) => {
          if (data.some((d) => d.status === 'pending')) scope.later(3000, () => deliveriesTable(ep, el));
          return table(
            [['Event'], ['Status'], ['Tries', 'num'], ['Last response'], ['Next try'], ['']],
            data.map((d) =>
              h(
                'tr',
                { 'data-delivery-id': d.id },
                h(
                  'td',
                  null,
                  h('code', null, d.event_type),
                  d.subject_id
                    ? h('div', null, link('/jobs/' + d.subject_id, 'Video job ' + short(d.subject_id)))
                    : null,
                  h('div', { class: 'hint' }, when(unix(d.created_at))),
                ),
                h('td', null, h('span', { class: 'badge ' + (DELIVERY_BADGE[d.status] || '') }, d.status)),
                h('td', { class: 'num' }, String(d.attempts)),
                h(
                  'td',
                  { class: 'truncate', title: d.last_error || '' },
                  d.last_status_code !== null ? 'HTTP ' + d.last_status_code : d.last_error ? d.last_error : '—',
                ),
                h('td', { class: 'nowrap' }, d.next_attempt_at ? when(unix(d.next_attempt_at)) : '—'),
                h(
                  'td',
                  null,
                  h(
                    'button',
                    {
                      class: 'ghost small resend',
                      onclick: async (e) => {
                        e.target.disabled = true;
                        try {
                          await api('POST', '/webhooks/' + ep.id + '/deliveries/' + d.id + '/resend');
                        } catch (ex) {
                          formError(err, ex);
                        }
                        scope.later(1000, () => deliveriesTable(ep, el));
                      },
                    },
                    'Resend',
                  ),
                ),
              ),
            ),
          );
        },
      );
    }
    const refresh = () =>
      loadList(
        list,
        scope,
        () => api('GET', '/webhooks'),
        emptyState(
          'grid',
          'No endpoints yet',
          'Add one above to be told when your video jobs change, instead of polling.',
        ),
        (data) =>
          data.map((ep) => {
            const deliveries = h('div');
            const section = h(
              'div',
              { class: 'panel', 'data-endpoint-id': ep.id },
              h(
                'div',
                { class: 'page-head' },
                h(
                  'div',
                  null,
                  h('h2', null, ep.url),
                  h(
                    'p',
                    { class: 'hint' },
                    (ep.description ? ep.description + ' · ' : '') +
                      ep.events.join(', ') +
                      (ep.previous_secret_expires_at
                        ? ' · previous secret valid until ' + when(unix(ep.previous_secret_expires_at))
                        : ''),
                  ),
                ),
                h(
                  'div',
                  null,
                  h(
                    'button',
                    {
                      class: 'secondary small rotate',
                      onclick: async () => {
                        if (
                          !(await confirmDialog(
                            'Rotate the signing secret?',
                            'A new secret signs every delivery from now on; the current one keeps signing ' +
                              'beside it for a day, so you can switch without missing events.',
                            'Rotate secret',
                          ))
                        )
                          return;
                        try {
                          showSecret(await api('POST', '/webhooks/' + ep.id + '/rotate'), 'has a new secret');
                        } catch (ex) {
                          formError(err, ex);
                        }
                        refresh();
                      },
                    },
                    'Rotate secret',
                  ),
                  ' ',
                  h(
                    'button',
                    {
                      class: 'ghost small delete',
                      onclick: async () => {
                        if (
                          !(await confirmDialog(
                            'Delete this endpoint?',
                            'Nothing more is delivered to ' + ep.url + ', retries included. This cannot be undone.',
                            'Delete endpoint',
                          ))
                        )
                          return;
                        try {
                          await api('DELETE', '/webhooks/' + ep.id);
                        } catch (ex) {
                          formError(err, ex);
                        }
                        refresh();
                      },
                    },
                    'Delete',
                  ),
                ),
              ),
              h('h3', null, 'Recent deliveries'),
              deliveries,
            );
            deliveriesTable(ep, deliveries);
            return section;
          }),
      );
    replace(
      main,
      pageHead(
        'Webhooks',
        'Signed events (Standard Webhooks, the shape of OpenAI\u2019s) sent when your video jobs change. ' +
          'Failed deliveries are retried for a day.',
      ),
      newSecret,
      h('section', { class: 'panel' }, h('h2', null, 'Add an endpoint'), form, err),
      list,
    );
    refresh();
  }

  // ---------------------------------------------------------------- models
  const PRICE_LABELS = {
    inputPer1MTokens: 'input / 1M tokens',
    outputPer1MTokens: 'output / 1M tokens',
    perImage: 'per image',
    cachedInputPer1MTokens: 'cached input / 1M tokens',
    cacheWrite5mPer1MTokens: 'cache write (5 min) / 1M tokens',
    cacheWrite1hPer1MTokens: 'cache write (1 h) / 1M tokens',
    per1KChars: 'per 1K characters',
    perAudioMinute: 'per audio minute',
    perVideoSecond: 'per video second',
  };
  function pageModels(main, _p, _q, scope) {
    const body = h('div');
    replace(main, pageHead('Models', 'The public price list (also at /public/models). Prices in VND.'), body);
    loadList(
      body,
      scope,
      async () => {
        const res = await fetch('/public/models', { headers: { accept: 'application/json' } });
        if (!res.ok) throw new ApiError('Could not load the price list (HTTP ' + res.status + ').', res.status);
        return res.json();
      },
      h('section', { class: 'panel' }, emptyState('grid', 'No models', 'The catalog lists no models yet.')),
      (data) =>
        Array.from(new Set(data.map((m) => m.mode))).map((mode) =>
          h(
            'section',
            { class: 'panel' },
            h('h2', null, mode[0].toUpperCase() + mode.slice(1) + ' models'),
            table(
              [['Model'], ['Price'], ['Details', 'hide-sm']],
              data
                .filter((m) => m.mode === mode)
                .map((m) =>
                  h(
                    'tr',
                    { 'data-model': m.id },
                    h(
                      'td',
                      null,
                      h('code', null, m.id),
                      m.description ? h('div', { class: 'hint' }, m.description) : null,
                    ),
                    h(
                      'td',
                      null,
                      Object.keys(m.pricing).map((k) =>
                        h('div', { class: 'nowrap' }, vnd(m.pricing[k]) + ' ' + (PRICE_LABELS[k] || k)),
                      ),
                    ),
                    h(
                      'td',
                      { class: 'hide-sm hint' },
                      [
                        m.context_window ? 'context ' + num(m.context_window) + ' tokens' : null,
                        m.allowedDurations
                          ? 'durations ' + m.allowedDurations.join(', ') + ' s (default ' + m.defaultDuration + ' s)'
                          : null,
                        m.aliases ? 'aliases: ' + m.aliases.join(', ') : null,
                      ]
                        .filter(Boolean)
                        .join(' · ') || '—',
                    ),
                  ),
                ),
            ),
          ),
        ),
    );
  }

  // ---------------------------------------------------------------- operator: accounts
  const ACCOUNT_HEAD = [
    ['Account'],
    ['Available', 'num'],
    ['Held', 'num hide-sm'],
    ['Total', 'num'],
    ['Logins', 'num hide-sm'],
    ['Keys', 'num hide-sm'],
    ['Created', 'hide-sm'],
  ];
  function pageAccounts(main, _p, _q, scope) {
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
                    h(
                      'td',
                      null,
                      link('/admin/accounts/' + a.id, a.name),
                      h('div', { class: 'hint mono' }, short(a.id)),
                    ),
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

  function newIdempotencyKey() {
    return crypto.randomUUID ? crypto.randomUUID() : Date.now().toString(36) + Math.random().toString(36).slice(2);
  }
  /** Operator: the account's requests whose bill it could not cover in full (charged, shortfall), and the total. */
  function uncollectedView(u) {
    if (!u || !u.requests)
      return emptyState('ledger', 'Nothing uncollected', 'Every request was charged its full cost.');
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
  function pageAccount(main, params, query, scope) {
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

  render();
})();
