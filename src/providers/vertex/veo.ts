import type { ProviderConfig } from '../../catalog';
import { ProviderHttp } from '../video/http';
import {
  VideoProviderError,
  type Download,
  type VideoProviderAdapter,
  type VideoSubmission,
  type VideoTaskStatus,
} from '../video/types';
import { VeoAdapter } from '../veo/adapter';
import { vertexKeyFile, vertexModelPath } from './adapter';
import { VertexAuth } from '../googleCloudAuth';

/**
 * Google Veo on Vertex AI, with the OAuth token of the provider's service account or application-default credentials
 * (src/providers/vertex/auth.ts):
 *   POST {base}/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:predictLongRunning
 *        -> {"name": "projects/.../publishers/google/models/{model}/operations/{id}"}
 *   POST .../models/{model}:fetchPredictOperation {"operationName": name} -> Operation {done, response | error}
 * The request body is the Gemini API's (VeoAdapter.body). Without a storageUri, Vertex answers with the video inline
 * (`response.videos[].bytesBase64Encoded`), which is what the gateway asks for: it stores results itself. Provider
 * messages lose the project's resource path before they are kept.
 */

interface VertexOperation {
  name?: string;
  done?: boolean;
  error?: { code?: number; message?: string; status?: string };
  response?: {
    videos?: { bytesBase64Encoded?: string; gcsUri?: string; mimeType?: string }[];
    raiMediaFilteredCount?: number;
    raiMediaFilteredReasons?: string[];
  };
}

const PROJECT_PATH = /projects\/[^/\s"']+(\/locations\/[^/\s"']+)?/g;
const scrub = (s: string) => s.replace(PROJECT_PATH, 'the project');

export class VertexVeoAdapter implements VideoProviderAdapter {
  readonly kind = 'vertex' as const;
  readonly id: string;
  private readonly http: ProviderHttp;
  private readonly auth: VertexAuth;

  constructor(private readonly cfg: ProviderConfig) {
    this.id = cfg.id;
    this.http = new ProviderHttp(cfg.baseUrl, cfg.timeoutMs ?? 60_000, 'Veo on Vertex');
    this.auth = new VertexAuth(vertexKeyFile(cfg));
  }

  async submit(s: VideoSubmission, opts: { signal?: AbortSignal } = {}): Promise<{ taskId: string }> {
    const op = await this.call<VertexOperation>(s.upstreamModel, 'predictLongRunning', VeoAdapter.body(s), opts.signal);
    return VeoAdapter.task(op, 'Veo on Vertex');
  }

  async poll(taskId: string, opts: { signal?: AbortSignal } = {}): Promise<VideoTaskStatus> {
    const model = /\/models\/([^/]+)\/operations\//.exec(taskId)?.[1];
    if (!model) throw new VideoProviderError('Veo on Vertex: not an operation name', null, false, 'invalid_task');
    const op = await this.call<VertexOperation>(
      decodeURIComponent(model),
      'fetchPredictOperation',
      { operationName: taskId },
      opts.signal,
    );
    return VertexVeoAdapter.status(op);
  }

  /** Maps a Vertex operation to a task status. */
  static status(op: VertexOperation): VideoTaskStatus {
    const unfinished = VeoAdapter.unfinished(op, scrub);
    if (unfinished) return unfinished;
    const video = op.response?.videos?.find((v) => v.bytesBase64Encoded);
    if (video?.bytesBase64Encoded)
      return {
        state: 'succeeded',
        inlineVideo: { base64: video.bytesBase64Encoded, mimeType: video.mimeType ?? 'video/mp4' },
      };
    return VeoAdapter.noVideo(op.response);
  }

  async cancel(_taskId: string): Promise<boolean> {
    // Vertex documents no cancel for Veo operations: the job is released on our side only.
    return false;
  }

  download(_url: string): Promise<Download> {
    // Results come inline (no storageUri is ever sent), so there is nothing to download.
    return Promise.reject(new VideoProviderError('Veo on Vertex returns videos inline', null, false, 'no_download'));
  }

  close(): Promise<void> {
    return this.http.close();
  }

  private async call<T>(model: string, method: string, body: unknown, signal?: AbortSignal): Promise<T> {
    let authorization: string;
    try {
      authorization = await this.auth.authorization();
    } catch {
      throw new VideoProviderError('The gateway could not authenticate to Vertex AI', null, true, 'upstream_auth');
    }
    const path = vertexModelPath(this.cfg, 'google', model, method).slice(this.http.basePath.length);
    try {
      return await this.http.json<T>('POST', path, { authorization }, body, signal);
    } catch (e) {
      if (e instanceof VideoProviderError) e.message = scrub(e.message);
      throw e;
    }
  }
}
