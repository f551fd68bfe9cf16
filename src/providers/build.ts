import type { Catalog } from '../catalog';
import { ProviderRegistry } from './registry';

/**
 * The synchronous provider adapters of every process (the API's routes and the worker's batch items): one per
 * catalog provider whose kind has an adapter in the kinds table (src/providers/kinds.ts), so a kind served on one
 * path is served on the other. Video kinds have their own clients (src/providers/videoProviders.ts).
 */
export function buildProviderRegistry(
  catalog: Catalog,
  opts: {
    onError?: (provider: string, status: number) => void;
    /** Max sockets to each upstream origin (default 256): the background runs' worker holds one per open stream. */
    connections?: number;
  } = {},
): ProviderRegistry {
  return new ProviderRegistry(catalog, {
    onError: opts.onError,
    ...(opts.connections ? { connections: opts.connections } : {}),
  });
}
