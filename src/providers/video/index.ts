/**
 * What the video kinds share (src/providers/veo/, seedance/, vertex/): the providers' HTTP client and the video
 * adapter's interface. The adapters per provider are src/providers/videoProviders.ts's, above the kinds.
 */

export { ProviderHttp } from './http';
export { VideoProviderError } from './types';
export type {
  Download,
  VideoImage,
  VideoProviderAdapter,
  VideoSubmission,
  VideoTaskState,
  VideoTaskStatus,
} from './types';
