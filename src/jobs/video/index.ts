/**
 * Video jobs, a job kind (docs/video-jobs.md). The room's one entrance for the rest of src/: code outside
 * src/jobs/video/ imports only this file, but workflows/index.ts (the workflow, ./workflow.ts) and
 * activities/index.ts (./activities.ts), the worker's entry points. Nothing here loads a Temporal package.
 */
export * as videoRepo from './repo';
export type { VideoJob, VideoBilled } from './repo';
export type { VideoImages, VideoParams } from '../../providers';
export { loadVideoSettings, type VideoSettings } from './settings';
export { WORKFLOW_TYPE as VIDEO_WORKFLOW_TYPE } from './workflowContract';
export { formToBody } from './validate';
export { createImageLoader, imageExtension } from './images';
export { submitVideoJob } from './submit';
export { cancelVideoJob } from './cancel';
export { reconcileVideoJobs } from './reconciler';
export { followTwins } from './twins';
