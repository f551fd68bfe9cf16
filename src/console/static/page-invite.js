/* Console: accepting an organization's invitation (the link of the mail, or the one the inviter passed on). */
import { api } from './api.js';
import { go } from './app.js';
import { BASE, h, replace } from './core.js';
import { field, formError } from './views.js';

// The token travels in the fragment (#...), so it never reaches a server log or a Referer header.
export function pageInvite(app) {
  const token = location.hash.slice(1);
  const err = h('div');
  const btn = h('button', { type: 'submit', id: 'invite-submit' }, 'Join the organization');
  const form = h(
    'form',
    { class: 'panel login', id: 'invite-form', novalidate: true },
    h('div', { class: 'brand' }, h('img', { src: BASE + '/static/favicon.svg', alt: '' }), 'Model Gateway'),
    h('h1', null, 'Accept your invitation'),
    h('p', { class: 'hint' }, 'Choose the password you will sign in with (at least 10 characters).'),
    err,
    field(
      'Password',
      h('input', { id: 'invite-password', name: 'password', type: 'password', autocomplete: 'new-password' }),
    ),
    btn,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    formError(err, null);
    if (!token) return formError(err, new Error('This invitation link is incomplete: open the whole link.'));
    btn.disabled = true;
    try {
      await api('POST', '/invites/accept', { token, password: form.password.value });
      go('/login', true);
    } catch (ex) {
      formError(err, ex);
      btn.disabled = false;
    }
  });
  replace(app, h('div', { class: 'login-wrap' }, form));
}
