/* Console: the sign-in page. */
import { api } from './api.js';
import { go, setMe } from './app.js';
import { BASE, h, replace, state } from './core.js';
import { field, formError } from './views.js';

// ---------------------------------------------------------------- sign-in
export function pageLogin(app, _params, query) {
  const next = query.get('next');
  const target = next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/login') ? next : '/keys';
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
