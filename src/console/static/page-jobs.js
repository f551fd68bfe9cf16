/* Console: video jobs: list and one job. */
import { api } from './api.js';
import { go, link } from './app.js';
import { BASE, h, replace, short, vnd, when } from './core.js';
import {
  emptyState,
  errorState,
  loading,
  pageHead,
  pollList,
  props,
  statusBadge,
  statusChips,
  table,
} from './views.js';

// ---------------------------------------------------------------- video jobs
export const STATUSES = ['submitted', 'processing', 'completed', 'failed', 'expired'];
export const running = (j) => j.status === 'submitted' || j.status === 'processing';
export function jobRows(jobs, opts) {
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
export const JOB_HEAD = [
  ['Created'],
  ['Status'],
  ['Model', 'hide-sm'],
  ['Prompt'],
  ['Length', 'num hide-sm'],
  ['Cost', 'num'],
];
export const jobChips = (basePath, current) =>
  statusChips(
    basePath,
    current,
    STATUSES,
    (st) => st[0].toUpperCase() + st.slice(1),
    (st) => ({ 'data-status': st || 'all' }),
  );
export function pageJobs(main, _p, query, scope) {
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
export function pageJob(main, params, _q, scope) {
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
