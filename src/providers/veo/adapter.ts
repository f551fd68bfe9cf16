import type { ProviderConfig } from '../../catalog';
import { ProviderHttp } from '../video/http';
import {
  VideoProviderError,
  type Download,
  type VideoImage,
  type VideoProviderAdapter,
  type VideoSubmission,
  type VideoTaskStatus,
} from '../video/types';

/**
 * Google Veo through the Gemini API's long-running operations (reference §2a):
 *   POST {base}/models/{model}:predictLongRunning  -> {"name": "models/.../operations/..."}
 *   GET  {base}/{name}                              -> Operation {done, response | error}
 *   GET  sample video uri (same x-goog-api-key; redirects followed)
 * Images travel inline as base64. The Gemini API has no seed and no audio switch; validation refuses those.
 */

interface Operation {
  name?: string;
  done?: boolean;
  error?: { code?: number; message?: string; status?: string };
  /** Where present (the emulator reports them): what the finished operation delivered. */
  metadata?: { durationSeconds?: unknown; resolution?: unknown; generateAudio?: unknown };
  response?: {
    generateVideoResponse?: {
      generatedSamples?: { video?: { uri?: string; encodedVideo?: string; mimeType?: string; encoding?: string } }[];
      raiMediaFilteredCount?: number;
      raiMediaFilteredReasons?: string[];
    };
  };
}

const image = (i: VideoImage) => ({ bytesBase64Encoded: i.base64, mimeType: i.mimeType });

export class VeoAdapter implements VideoProviderAdapter {
  readonly kind = 'veo' as const;
  readonly id: string;
  private readonly http: ProviderHttp;
  private readonly auth: Record<string, string>;

  constructor(cfg: ProviderConfig) {
    this.id = cfg.id;
    this.http = new ProviderHttp(cfg.baseUrl, cfg.timeoutMs ?? 60_000, 'Veo');
    this.auth = cfg.apiKey ? { 'x-goog-api-key': cfg.apiKey } : {};
  }

  /** The request body of predictLongRunning (exported for tests and docs). */
  static body(s: VideoSubmission): Record<string, unknown> {
    const images = s.images ?? {};
    const instance: Record<string, unknown> = { prompt: s.prompt };
    if (images.inputReference) instance.image = image(images.inputReference);
    if (images.lastFrame) instance.lastFrame = image(images.lastFrame);
    if (images.referenceImages?.length)
      instance.referenceImages = images.referenceImages.map((r) => ({ image: image(r), referenceType: 'asset' }));
    const parameters: Record<string, unknown> = { ...(s.parameters ?? {}), durationSeconds: s.seconds, sampleCount: 1 };
    if (s.aspectRatio) parameters.aspectRatio = s.aspectRatio;
    if (s.resolution) parameters.resolution = s.resolution;
    return { instances: [instance], parameters };
  }

  async submit(s: VideoSubmission, opts: { signal?: AbortSignal } = {}): Promise<{ taskId: string }> {
    const op = await this.http.json<Operation>(
      'POST',
      `/models/${encodeURIComponent(s.upstreamModel)}:predictLongRunning`,
      this.auth,
      VeoAdapter.body(s),
      opts.signal,
    );
    return VeoAdapter.task(op, 'Veo');
  }

  /** The task of an accepted predictLongRunning: its operation's name (a retryable failure without one). */
  static task(op: { name?: string }, label: string): { taskId: string } {
    if (typeof op.name !== 'string' || !op.name)
      throw new VideoProviderError(
        `${label} accepted the request but returned no operation name`,
        200,
        true,
        'invalid_response',
      );
    return { taskId: op.name };
  }

  async poll(taskId: string, opts: { signal?: AbortSignal } = {}): Promise<VideoTaskStatus> {
    // The operation name is a path ("models/x/operations/y"); keep its slashes, encode each segment.
    const path = '/' + taskId.split('/').map(encodeURIComponent).join('/');
    const op = await this.http.json<Operation>('GET', path, this.auth, undefined, opts.signal);
    return VeoAdapter.status(op);
  }

  /** Maps an Operation to a task status (reference §2a status mapping). */
  static status(op: Operation): VideoTaskStatus {
    const unfinished = VeoAdapter.unfinished(op);
    if (unfinished) return unfinished;
    const r = op.response?.generateVideoResponse;
    const sample = r?.generatedSamples?.find((x) => x.video?.uri || x.video?.encodedVideo);
    const m = op.metadata ?? {};
    // What was delivered, where the operation says (the job is charged on it; else on what was asked).
    const delivered: Partial<VideoTaskStatus> = {
      ...(typeof m.durationSeconds === 'number' && m.durationSeconds > 0 ? { durationSeconds: m.durationSeconds } : {}),
      ...(typeof m.resolution === 'string' && m.resolution ? { resolution: m.resolution } : {}),
      ...(typeof m.generateAudio === 'boolean' ? { generateAudio: m.generateAudio } : {}),
    };
    if (sample?.video?.uri) return { state: 'succeeded', videoUrl: sample.video.uri, ...delivered };
    if (sample?.video?.encodedVideo) {
      return {
        ...delivered,
        state: 'succeeded',
        inlineVideo: {
          base64: sample.video.encodedVideo,
          mimeType: sample.video.mimeType ?? sample.video.encoding ?? 'video/mp4',
        },
      };
    }
    return VeoAdapter.noVideo(r);
  }

  /** A long-running operation still running, or ended in an error (its message through `say`); else null. */
  static unfinished(
    op: { done?: boolean; error?: { code?: number; message?: string; status?: string } },
    say: (message: string) => string = (m) => m,
  ): VideoTaskStatus | null {
    if (!op.done) return { state: 'running' };
    if (!op.error) return null;
    return {
      state: 'failed',
      error: {
        code: op.error.status ?? (op.error.code !== undefined ? String(op.error.code) : undefined),
        message: say(op.error.message || 'Veo reported an error'),
      },
    };
  }

  /** A finished operation without a video: blocked by the safety filter (with its reasons), else no result. */
  static noVideo(
    r: { raiMediaFilteredCount?: number; raiMediaFilteredReasons?: unknown[] } | undefined,
  ): VideoTaskStatus {
    if ((r?.raiMediaFilteredCount ?? 0) > 0) {
      const reasons = r?.raiMediaFilteredReasons?.filter((x) => typeof x === 'string') ?? [];
      const why = reasons.length ? `: ${reasons.join('; ')}` : '.';
      return {
        state: 'failed',
        contentFiltered: true,
        error: { code: 'content_filter', message: `The video was blocked by the provider's safety filter${why}` },
      };
    }
    return { state: 'failed', error: { code: 'no_result', message: 'Veo finished without returning a video' } };
  }

  async cancel(_taskId: string): Promise<boolean> {
    // The Gemini API documents no cancel for video operations: the job is released on our side only.
    return false;
  }

  download(url: string, opts: { signal?: AbortSignal } = {}): Promise<Download> {
    return this.http.download(url, this.auth, opts.signal);
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
