/* Console: the organization's single sign-on (OpenID Connect) settings, for its owners. */
import { api } from './api.js';
import { h, replace } from './core.js';
import { confirmDialog, field, load, onSubmit, pageHead, props } from './views.js';

function settingsForm(v, reload) {
  const sso = v.sso || {};
  const issuer = h('input', { id: 'sso-issuer', type: 'url', value: sso.issuer || '', placeholder: 'https://' });
  const clientId = h('input', { id: 'sso-client-id', value: sso.client_id || '' });
  const secret = h('input', {
    id: 'sso-client-secret',
    type: 'password',
    autocomplete: 'off',
    placeholder: sso.client_secret_set ? 'Set (leave empty to keep it)' : '',
  });
  const domains = h('input', {
    id: 'sso-domains',
    value: (sso.trusted_domains || []).join(', '),
    placeholder: 'example.com, example.org',
  });
  const role = h(
    'select',
    { id: 'sso-default-role' },
    h('option', { value: 'reader', selected: sso.default_role !== 'owner' || null }, 'Reader'),
    h('option', { value: 'owner', selected: sso.default_role === 'owner' || null }, 'Owner'),
  );
  const err = h('div');
  const btn = h('button', { type: 'submit', id: 'sso-save' }, 'Save');
  const form = h(
    'form',
    { class: 'form', id: 'sso-settings' },
    field('Issuer URL', issuer),
    field('Client ID', clientId),
    field('Client secret', secret),
    field('Trusted email domains (comma-separated)', domains),
    field('Role of a member who signs in for the first time', role),
    err,
    btn,
  );
  onSubmit(
    form,
    err,
    btn,
    () => {
      const what = {
        issuer: issuer.value.trim(),
        client_id: clientId.value.trim(),
        trusted_domains: domains.value
          .split(/[\s,]+/)
          .map((d) => d.trim())
          .filter(Boolean),
        default_role: role.value,
      };
      if (secret.value) what.client_secret = secret.value;
      return what;
    },
    async (what) => {
      await api('PUT', '/sso/settings', what);
      reload();
    },
  );
  return form;
}

export function pageSso(main, _p, _q, scope) {
  const body = h('div');
  replace(
    main,
    pageHead(
      'Single sign-on',
      "Members sign in through your organization's OpenID Connect provider. A first sign-in with a verified email " +
        'of a trusted domain joins with the role below; readers of those domains can then no longer use a password.',
    ),
    body,
  );
  const reload = () => pageSso(main, _p, _q, scope);
  load(
    body,
    scope,
    () => api('GET', '/sso/settings'),
    (v) => {
      const off = v.sso
        ? h(
            'button',
            {
              class: 'secondary',
              id: 'sso-off',
              type: 'button',
              onclick: async () => {
                const ok = await confirmDialog(
                  'Turn single sign-on off?',
                  'Members then sign in with passwords only; those made by single sign-on have none.',
                  'Turn off',
                );
                if (!ok) return;
                await api('DELETE', '/sso/settings');
                reload();
              },
            },
            'Turn off',
          )
        : null;
      replace(
        body,
        h(
          'section',
          { class: 'panel' },
          props([
            [
              'Redirect URI to register at the provider',
              h('span', { class: 'mono', id: 'sso-redirect' }, v.redirect_uri),
            ],
            ['Status', v.sso ? 'On since ' + new Date(v.sso.updated_at).toLocaleString() : 'Off'],
          ]),
          settingsForm(v, reload),
          off,
        ),
      );
    },
  );
}
