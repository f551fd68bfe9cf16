/* Console: aPI keys: list, create (secret shown once), revoke, limits. */
import { api } from './api.js';
import { h, replace, when } from './core.js';
import { KEY_HEAD, LIMIT_FIELDS, keyControlRows } from './key-controls.js';
import { confirmDialog, emptyState, field, formError, loadList, onSubmit, pageHead, showOnce, table } from './views.js';

// ---------------------------------------------------------------- API keys
export function pageKeys(main, _p, _q, scope) {
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
