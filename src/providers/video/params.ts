/**
 * A video request's parameters: one type shared by validation (src/jobs/video/validate.ts), the job row
 * (src/jobs/video/repo.ts), the workflow's activities and the provider adapters (src/providers/video/types.ts).
 * Only the images change form along the way, hence the type parameter: as given by the caller, as stored by us,
 * as sent to the provider.
 */
export interface VideoParams {
  prompt: string;
  seconds: number;
  /** As the caller gave it (`1280x720`, `16:9`); aspectRatio and resolution are what it means. */
  size?: string;
  /** `16:9`, `9:16`, ... (from `size`), or undefined for the provider's default. */
  aspectRatio?: string;
  /** `480p` | `720p` | `1080p` | `4k`. */
  resolution?: string;
  seed?: number;
  generateAudio?: boolean;
  watermark?: boolean;
  returnLastFrame: boolean;
  /** Caller's pass-through parameters (reserved keys were refused by validation). */
  parameters?: Record<string, unknown>;
}

export interface VideoImages<Image> {
  /** The first frame. */
  inputReference?: Image;
  lastFrame?: Image;
  referenceImages?: Image[];
}

export type VideoRequest<Image> = VideoParams & { images: VideoImages<Image> };
