/* Console: webhook endpoints and their deliveries. */
import { api } from './api.js';
import { link } from './app.js';
import { h, replace, short, when } from './core.js';
import { confirmDialog, emptyState, field, formError, loadList, onSubmit, pageHead, showOnce, table } from './views.js';

// ---------------------------------------------------------------- webhooks
export const EVENT_TYPES = [
  'video.processing',
  'video.completed',
  'video.failed',
  'video.expired',
  'video.cancelled',
  'response.completed',
  'response.failed',
  'response.cancelled',
  'response.incomplete',
  'topup.succeeded',
  'balance.low',
];
export const DELIVERY_BADGE = { pending: 'warn', succeeded: 'ok', failed: 'bad', cancelled: 'muted' };
export const unix = (t) => (t === null || t === undefined ? null : new Date(t * 1000).toISOString());
export function pageWebhooks(main, _p, _q, scope) {
  const newSecret = h('div', { id: 'new-secret' });
  const list = h('div');
  const err = h('div');
  const btn = h('button', { type: 'submit', id: 'create-webhook' }, 'Add endpoint');
  const boxes = EVENT_TYPES.map((t) =>
    h('label', { class: 'nowrap' }, h('input', { type: 'checkbox', name: 'events', value: t, checked: true }), ' ' + t),
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
                d.subject_id ? h('div', null, link('/jobs/' + d.subject_id, 'Video job ' + short(d.subject_id))) : null,
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
