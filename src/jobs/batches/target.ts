import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../../db';
import type { Catalog } from '../../catalog';
import { nativeBatchesFor } from '../../providers';
import * as batches from './repo';
import { upstreamOf } from './upstream';

/**
 * Where a batch runs, the workflow's first question (src/jobs/batches/workflow.ts): on its model's provider's own
 * batch API (the native branch, ./nativeActivities.ts), or line by line through the gateway's own operations (the
 * routed branch, ./activities.ts runChunk). A provider's batch already recorded for it (./upstream.ts) is followed
 * again: a continued or repaired run resumes what its predecessor submitted.
 */

export interface NativeTarget {
  providerId: string;
  /** The provider's batch, when one was recorded for this batch (a continued or repaired run resumes it). */
  nativeId?: string;
}

export function createBatchTargetActivities(deps: { db: Db; catalog: Catalog }) {
  const { db, catalog } = deps;
  return {
    /** Where the batch runs: on its model's provider's batch API (its target), or null for the routed path. */
    async nativeTarget(a: { batchId: string }): Promise<NativeTarget | null> {
      const b = await batches.getBatch(db, a.batchId);
      if (!b) throw ApplicationFailure.nonRetryable(`batch ${a.batchId} not found`, 'BatchNotFound');
      const model = catalog.get(b.model);
      if (!model) return null;
      const had = await upstreamOf(db, a.batchId);
      if (had) return had;
      const p = catalog.provider(model);
      return nativeBatchesFor(p, b.endpoint) ? { providerId: p.id } : null;
    },
  };
}
