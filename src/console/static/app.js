/*
 * Model Gateway console: a small single-page app with no framework and no build step.
 * Pages render from the JSON API at /console/api (session cookie + X-CSRF-Token on every change).
 * All text from the server is inserted as text nodes (never as HTML), so nothing it returns can inject markup.
 * The entry module: routes, navigation, the page frame; each page lives in its own module (page-*.js).
 */
import { ApiError, api } from './api.js';
import { BASE, UUID, h, replace, state } from './core.js';
import { pageAccount, pageAccounts } from './page-accounts.js';
import { pageBalance, pageRequest } from './page-balance.js';
import { pageBatches } from './page-batches.js';
import { pageJob, pageJobs } from './page-jobs.js';
import { pageKeys } from './page-keys.js';
import { pageInvite } from './page-invite.js';
import { pageLogin } from './page-login.js';
import { pageModels } from './page-models.js';
import { pageResponses } from './page-responses.js';
import { pageReconciliation } from './page-reconciliation.js';
import { pageUsage } from './page-usage.js';
import { pageWebhooks } from './page-webhooks.js';
import { pageTopup, pageTopupsAdmin } from './page-topups.js';
import { pageCache } from './page-cache.js';
import { pageSso } from './page-sso.js';
import { pageOrgAdminKeys, pageOrgAudit, pageOrgMembers, pageOrgProject, pageOrgProjects } from './page-org.js';
import { emptyState, errorState } from './views.js';

// ---------------------------------------------------------------- routing
export const routes = [
  { re: /^\/login$/, page: pageLogin, public: true },
  { re: /^\/invite$/, page: pageInvite, public: true },
  { re: /^\/?$/, page: () => go('/keys', true) },
  { re: /^\/keys$/, page: pageKeys, nav: 'keys' },
  { re: /^\/balance$/, page: pageBalance, nav: 'balance' },
  { re: new RegExp('^/requests/' + UUID + '$'), page: pageRequest, nav: 'balance' },
  { re: /^\/usage$/, page: pageUsage, nav: 'usage' },
  { re: /^\/jobs$/, page: pageJobs, nav: 'jobs' },
  { re: new RegExp('^/jobs/' + UUID + '$'), page: pageJob, nav: 'jobs' },
  { re: /^\/models$/, page: pageModels, nav: 'models' },
  { re: /^\/batches$/, page: pageBatches, nav: 'batches' },
  { re: /^\/responses$/, page: pageResponses, nav: 'responses' },
  { re: /^\/webhooks$/, page: pageWebhooks, nav: 'webhooks' },
  { re: /^\/topup$/, page: pageTopup, nav: 'topup' },
  { re: /^\/admin\/topups$/, page: pageTopupsAdmin, nav: 'topups', operator: true },
  { re: /^\/cache$/, page: pageCache, nav: 'cache' },
  { re: /^\/sso$/, page: pageSso, nav: 'sso' },
  { re: /^\/org$/, page: pageOrgProjects, nav: 'org' },
  { re: /^\/org\/projects\/([\w-]{1,80})$/, page: pageOrgProject, nav: 'org' },
  { re: /^\/org\/members$/, page: pageOrgMembers, nav: 'org' },
  { re: /^\/org\/audit$/, page: pageOrgAudit, nav: 'org' },
  { re: /^\/org\/admin-keys$/, page: pageOrgAdminKeys, nav: 'org' },
  { re: /^\/admin\/accounts$/, page: pageAccounts, nav: 'accounts', operator: true },
  { re: new RegExp('^/admin/accounts/' + UUID + '$'), page: pageAccount, nav: 'accounts', operator: true },
  { re: /^\/admin\/reconciliation$/, page: pageReconciliation, nav: 'reconciliation', operator: true },
];
export function currentPath() {
  return location.pathname.slice(BASE.length) + location.search;
}
export function go(path, replaceEntry) {
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
export const link = (path, text, attrs) => h('a', Object.assign({ href: BASE + path }, attrs || {}), text);

/** A page's lifetime: timers it started stop, and late answers are ignored, once the user navigates away. */
export function pageScope() {
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

export async function render() {
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
export function setMe(me) {
  state.me = me;
  state.csrf = me.csrfToken;
}

export function layout(app, active, fill) {
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
        item('topup', '/topup', 'Top up'),
        item('usage', '/usage', 'Usage'),
        item('jobs', '/jobs', 'Video jobs'),
        item('batches', '/batches', 'Batches'),
        item('responses', '/responses', 'Responses'),
        item('webhooks', '/webhooks', 'Webhooks'),
        item('cache', '/cache', 'Cache'),
        item('models', '/models', 'Models'),
        item('sso', '/sso', 'Single sign-on'),
        item('org', '/org', 'Organization'),
        isOp
          ? [
              h('span', { class: 'sep' }),
              item('accounts', '/admin/accounts', 'Accounts'),
              item('reconciliation', '/admin/reconciliation', 'Reconciliation'),
              item('topups', '/admin/topups', 'Top-ups'),
            ]
          : null,
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

export async function signOut() {
  try {
    await api('DELETE', '/session');
  } catch (e) {
    // Signed out either way: the cookie is cleared by the server or already invalid.
  }
  state.me = null;
  state.csrf = '';
  go('/login', true);
}

render();
