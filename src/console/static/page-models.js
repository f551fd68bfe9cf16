/* Console: models and prices. */
import { ApiError } from './api.js';
import { h, num, replace, vnd } from './core.js';
import { emptyState, loadList, pageHead, table } from './views.js';

// ---------------------------------------------------------------- models
export const PRICE_LABELS = {
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
export function pageModels(main, _p, _q, scope) {
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
