/**
 * The `project` label of the cache's per-project metrics, with its values bounded: project ids are as many as the
 * organizations make, and every value of a label is a series Prometheus keeps. The first `max` projects this
 * process sees get a value of their own (their id); later ones share `other`; a key of no project is `none`. Exact
 * figures for every project are in cache_stats (GET /v1/cache/stats, the console).
 */
export class ProjectLabels {
  private readonly known = new Set<string>();

  constructor(private readonly max: number) {}

  of(projectId: string | null | undefined): string {
    if (!projectId) return 'none';
    if (this.known.has(projectId)) return projectId;
    if (this.known.size >= this.max) return 'other';
    this.known.add(projectId);
    return projectId;
  }
}
