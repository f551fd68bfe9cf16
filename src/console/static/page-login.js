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
  const sso = ssoButton(err, () => form.email.value.trim());
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
    sso,
  );
  const refused = query.get('sso_error');
  if (refused) formError(err, new Error(SSO_ERRORS[refused] || 'Single sign-on failed (' + refused + ').'));
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

// Why a single sign-on came back refused (the callback's ?sso_error=), in the user's terms.
const SSO_ERRORS = {
  sso_email_untrusted: 'Your organization does not let this email domain join through single sign-on.',
  sso_email_unverified: 'Your identity provider has not verified your email address.',
  sso_email_missing: 'Your identity provider did not share your email address.',
  sso_email_taken: 'This email already signs in to another organization.',
  sso_login_disabled: 'This console login is disabled or was removed from the organization.',
  sso_expired: 'The sign-in took too long or was used already. Try again.',
  sso_failed: "Your identity provider's answer could not be verified. Try again.",
};

/** Single sign-on: the email's domain names the organization, whose provider the browser goes to. */
function ssoButton(err, emailOf) {
  const b = h('button', { type: 'button', class: 'secondary', id: 'login-sso' }, 'Sign in with single sign-on');
  b.addEventListener('click', async () => {
    formError(err, null);
    const email = emailOf();
    if (!email) return formError(err, new Error('Enter your email first.'));
    b.disabled = true;
    try {
      location.href = (await api('POST', '/sso/start', { email })).url;
    } catch (ex) {
      formError(err, ex);
      b.disabled = false;
    }
  });
  return b;
}
