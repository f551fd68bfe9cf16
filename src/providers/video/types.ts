import type { Readable } from 'node:stream';
import type { VideoImages, VideoParams } from '../../video/params';
import type { ProviderKind } from '../../catalog';

/**
 * The video provider adapter interface: one adapter per catalog provider of kind `veo` or `seedance`, speaking
 * that provider's long-running task protocol (docs/providers.md). Adapters are used by the
 * worker's activities only; the API never calls a video provider.
 */

/** An input image, already validated (PNG/JPEG/WebP by magic bytes, <= 10 MB). */
export interface VideoImage {
  base64: string;
  mimeType: string;
}

/**
 * What the gateway asks a provider to generate: the request's own parameters (fields a provider cannot honour
 * were refused by validation) with its images read back from our storage.
 */
export interface VideoSubmission extends Omit<VideoParams, 'returnLastFrame'> {
  upstreamModel: string;
  /** Absent means false. */
  returnLastFrame?: boolean;
  images?: VideoImages<VideoImage>;
}

/** Provider task states, normalised. */
export type VideoTaskState = 'queued' | 'running' | 'succeeded' | 'failed' | 'expired' | 'cancelled';

export interface VideoTaskStatus {
  state: VideoTaskState;
  /** Where the result can be downloaded (via `download`), on success. */
  videoUrl?: string;
  /** Some providers answer with the bytes inline instead of a URL (Veo `encodedVideo`). */
  inlineVideo?: { base64: string; mimeType: string };
  lastFrameUrl?: string;
  /** Duration of the produced video as the provider reports it. */
  durationSeconds?: number;
  /** What the provider reports it delivered, where it does (the job is charged on these): `720p`, ... */
  resolution?: string;
  generateAudio?: boolean;
  /** The provider's service tier the task ran on (Seedance `service_tier`). */
  tier?: string;
  /** On failed/expired/cancelled: what the provider said. */
  error?: { code?: string; message: string };
  /** The provider refused to return the result (safety/content filter). */
  contentFiltered?: boolean;
}

export interface Download {
  body: Readable;
  contentLength: number | null;
  contentType: string | null;
}

export interface VideoProviderAdapter {
  readonly id: string;
  readonly kind: ProviderKind;
  /** Creates the provider task; returns the provider's task id (Veo operation name, Seedance task id). */
  submit(s: VideoSubmission, opts?: { signal?: AbortSignal }): Promise<{ taskId: string }>;
  poll(taskId: string, opts?: { signal?: AbortSignal }): Promise<VideoTaskStatus>;
  /** Cancels the task where the provider can (Seedance: queued tasks). Returns whether it was cancelled. */
  cancel(taskId: string): Promise<boolean>;
  /** Opens a result URL (video or last frame) as a stream, with the provider's auth where it needs it. */
  download(url: string, opts?: { signal?: AbortSignal }): Promise<Download>;
  close(): Promise<void>;
}

/**
 * A failed provider call. `retryable` separates transient failures (5xx, 408, 429, timeouts, connection errors)
 * from rejections (other 4xx), which fail the job at once.
 */
export class VideoProviderError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    readonly retryable: boolean,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

export function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 429 || status === 425;
}
