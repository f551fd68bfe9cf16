/**
 * Deployments: the upstreams that can serve one catalog model (other keys, regions or providers of the same
 * model). The single-upstream form (`provider` + `upstreamModel` on the model) is one deployment.
 */

/** A deployment as written in the catalog, in a model's `deployments` list. */
export interface DeploymentConfig {
  /** Name in metrics and usage records; default `<model id>#<position from 1>`. */
  id?: string;
  provider: string;
  /** Default: the model's `upstreamModel`, else its id. */
  upstreamModel?: string;
  /** Share of traffic among the model's healthy deployments (default 1). */
  weight?: number;
  /** Env var holding this deployment's own upstream key (default: its provider's `apiKeyEnv`). */
  apiKeyEnv?: string;
}

/** A resolved deployment of a model, built once at load. */
export interface Deployment {
  id: string;
  modelId: string;
  provider: string;
  upstreamModel: string;
  weight: number;
  /** Set when the deployment has its own key (it then gets its own adapter and connection pool). */
  apiKeyEnv?: string;
  /** Resolved at load from apiKeyEnv. */
  apiKey?: string;
}

export const deploymentsSchema = {
  type: 'array',
  minItems: 1,
  items: {
    type: 'object',
    required: ['provider'],
    properties: {
      id: { type: 'string', minLength: 1 },
      provider: { type: 'string', minLength: 1 },
      upstreamModel: { type: 'string', minLength: 1 },
      weight: { type: 'number', exclusiveMinimum: 0 },
      apiKeyEnv: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$' },
    },
    additionalProperties: false,
  },
};

interface ModelLike {
  id: string;
  provider?: string;
  upstreamModel?: string;
  deployments?: DeploymentConfig[];
}

/** The model's deployments: its `deployments` list, or the one named by `provider` + `upstreamModel`. */
export function resolveDeployments(m: ModelLike, env: NodeJS.ProcessEnv): Deployment[] {
  if (!m.deployments)
    return [{ id: m.id, modelId: m.id, provider: m.provider!, upstreamModel: m.upstreamModel ?? m.id, weight: 1 }];
  return m.deployments.map((d, i) => ({
    id: d.id ?? `${m.id}#${i + 1}`,
    modelId: m.id,
    provider: d.provider,
    upstreamModel: d.upstreamModel ?? m.upstreamModel ?? m.id,
    weight: d.weight ?? 1,
    ...(d.apiKeyEnv ? { apiKeyEnv: d.apiKeyEnv, apiKey: env[d.apiKeyEnv] } : {}),
  }));
}

/** The registry key of the adapter serving a deployment: its provider's, unless it has a key of its own. */
export function adapterKey(d: Pick<Deployment, 'provider' | 'apiKeyEnv'>): string {
  return d.apiKeyEnv ? `${d.provider}|${d.apiKeyEnv}` : d.provider;
}
