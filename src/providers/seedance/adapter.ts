import type { ProviderConfig } from '../../catalog';
import { ProviderHttp } from '../video/http';
import {
  VideoProviderError,
  type Download,
  type VideoImage,
  type VideoProviderAdapter,
  type VideoSubmission,
  type VideoTaskState,
  type VideoTaskStatus,
} from '../video/types';

/**
 * BytePlus Seedance (ModelArk content generation tasks, reference §3):
 *   POST   {base}/contents/generations/tasks        -> {"id": "cgt-..."}
 *   GET    {base}/contents/generations/tasks/{id}   -> {status, content: {video_url, last_frame_url}, duration, error}
 *   DELETE {base}/contents/generations/tasks/{id}   cancels a queued task
 * Images are sent as data URIs with roles first_frame / last_frame / reference_image. The result URLs are
 * signed object-storage URLs (no auth) that live 24 h.
 */

interface Task {
  id?: string;
  status?: string;
  content?: { video_url?: string; last_frame_url?: string };
  error?: { code?: string; message?: string } | null;
  duration?: number;
  resolution?: string;
  generate_audio?: boolean;
  service_tier?: string;
}

const STATES: Record<string, VideoTaskState> = {
  queued: 'queued',
  running: 'running',
  succeeded: 'succeeded',
  failed: 'failed',
  expired: 'expired',
  cancelled: 'cancelled',
};

const dataUri = (i: VideoImage) => `data:${i.mimeType};base64,${i.base64}`;

export class SeedanceAdapter implements VideoProviderAdapter {
  readonly kind = 'seedance' as const;
  readonly id: string;
  private readonly http: ProviderHttp;
  private readonly auth: Record<string, string>;

  constructor(cfg: ProviderConfig) {
    this.id = cfg.id;
    this.http = new ProviderHttp(cfg.baseUrl, cfg.timeoutMs ?? 60_000, 'Seedance');
    this.auth = cfg.apiKey ? { authorization: `Bearer ${cfg.apiKey}` } : {};
  }

  /** The create-task body (exported for tests and docs). Pass-through parameters go at the top level. */
  static body(s: VideoSubmission): Record<string, unknown> {
    const images = s.images ?? {};
    const content: Record<string, unknown>[] = [{ type: 'text', text: s.prompt }];
    if (images.inputReference)
      content.push({ type: 'image_url', image_url: { url: dataUri(images.inputReference) }, role: 'first_frame' });
    if (images.lastFrame)
      content.push({ type: 'image_url', image_url: { url: dataUri(images.lastFrame) }, role: 'last_frame' });
    for (const r of images.referenceImages ?? [])
      content.push({ type: 'image_url', image_url: { url: dataUri(r) }, role: 'reference_image' });
    const body: Record<string, unknown> = {
      ...(s.parameters ?? {}),
      model: s.upstreamModel,
      content,
      duration: s.seconds,
    };
    if (s.resolution) body.resolution = s.resolution;
    if (s.aspectRatio) body.ratio = s.aspectRatio;
    if (s.seed !== undefined) body.seed = s.seed;
    if (s.generateAudio !== undefined) body.generate_audio = s.generateAudio;
    if (s.watermark !== undefined) body.watermark = s.watermark;
    if (s.returnLastFrame) body.return_last_frame = true; // only ever sent to ask for it
    return body;
  }

  async submit(s: VideoSubmission, opts: { signal?: AbortSignal } = {}): Promise<{ taskId: string }> {
    const t = await this.http.json<Task>(
      'POST',
      '/contents/generations/tasks',
      this.auth,
      SeedanceAdapter.body(s),
      opts.signal,
    );
    if (typeof t.id !== 'string' || !t.id)
      throw new VideoProviderError(
        'Seedance accepted the request but returned no task id',
        200,
        true,
        'invalid_response',
      );
    return { taskId: t.id };
  }

  async poll(taskId: string, opts: { signal?: AbortSignal } = {}): Promise<VideoTaskStatus> {
    const t = await this.http.json<Task>(
      'GET',
      `/contents/generations/tasks/${encodeURIComponent(taskId)}`,
      this.auth,
      undefined,
      opts.signal,
    );
    return SeedanceAdapter.status(t);
  }

  /** Maps a task to a status (reference §3 status table). */
  static status(t: Task): VideoTaskStatus {
    const state = STATES[t.status ?? ''];
    if (!state)
      throw new VideoProviderError(
        `Seedance returned an unknown task status ${JSON.stringify(t.status)}`,
        200,
        true,
        'invalid_response',
      );
    const out: VideoTaskStatus = { state };
    if (typeof t.duration === 'number' && Number.isFinite(t.duration)) out.durationSeconds = t.duration;
    // What was delivered, as the task reports it: the job is charged on it.
    if (typeof t.resolution === 'string' && t.resolution) out.resolution = t.resolution;
    if (typeof t.generate_audio === 'boolean') out.generateAudio = t.generate_audio;
    if (typeof t.service_tier === 'string' && t.service_tier) out.tier = t.service_tier;
    if (state === 'succeeded') {
      if (!t.content?.video_url)
        throw new VideoProviderError('Seedance reported success without a video_url', 200, true, 'invalid_response');
      out.videoUrl = t.content.video_url;
      if (t.content.last_frame_url) out.lastFrameUrl = t.content.last_frame_url;
    }
    if (state === 'failed' || state === 'expired' || state === 'cancelled') {
      const code = t.error?.code;
      const filtered = typeof code === 'string' && /sensitive|risk|safety|filter|moderation/i.test(code);
      out.error = { code, message: t.error?.message || defaultMessage(state) };
      if (filtered) out.contentFiltered = true;
    }
    return out;
  }

  async cancel(taskId: string): Promise<boolean> {
    try {
      await this.http.json('DELETE', `/contents/generations/tasks/${encodeURIComponent(taskId)}`, this.auth);
      return true;
    } catch (e) {
      // Running tasks cannot be cancelled (the provider answers 4xx); transient failures are for the caller.
      if (e instanceof VideoProviderError && !e.retryable) return false;
      throw e;
    }
  }

  download(url: string, opts: { signal?: AbortSignal } = {}): Promise<Download> {
    return this.http.download(url, this.auth, opts.signal);
  }

  close(): Promise<void> {
    return this.http.close();
  }
}

function defaultMessage(state: VideoTaskState): string {
  if (state === 'expired') return 'The provider task expired before it finished';
  if (state === 'cancelled') return 'The provider task was cancelled';
  return 'The provider reported a failure';
}
