import { getJson, type ReportField, type UsageReports } from '../usageReports';

const window = ({ start, end }: { start: number; end: number }) =>
  `starting_at=${new Date(start).toISOString()}&ending_at=${new Date(end).toISOString()}&bucket_width=1d`;

/** Anthropic's usage and cost reports (an admin key). */
export const anthropicReports: UsageReports = {
  // Anthropic bills tokens only.
  fields: ['input', 'cache_read', 'cache_write_5m', 'cache_write_1h', 'output'],

  async usage({ baseUrl, key }, day, add) {
    const q = `${window(day)}&group_by[]=model&limit=31`;
    const r = await getJson(`${baseUrl}/v1/organizations/usage_report/messages?${q}`, {
      'x-api-key': key,
      'anthropic-version': '2023-06-01',
    });
    for (const b of r.data ?? [])
      for (const x of b.results ?? [])
        add(String(x.model), {
          input: x.uncached_input_tokens ?? 0,
          cache_read: x.cache_read_input_tokens ?? 0,
          cache_write_5m: x.cache_creation?.ephemeral_5m_input_tokens ?? 0,
          cache_write_1h: x.cache_creation?.ephemeral_1h_input_tokens ?? 0,
          output: x.output_tokens ?? 0,
        });
  },

  async costs({ baseUrl, key }, day, add) {
    const q = `${window(day)}&group_by[]=description`;
    const r = await getJson(`${baseUrl}/v1/organizations/cost_report?${q}`, {
      'x-api-key': key,
      'anthropic-version': '2023-06-01',
    });
    const kinds: Record<string, ReportField> = {
      uncached_input_tokens: 'input',
      cache_read_input_tokens: 'cache_read',
      'cache_creation.ephemeral_5m_input_tokens': 'cache_write_5m',
      'cache_creation.ephemeral_1h_input_tokens': 'cache_write_1h',
      output_tokens: 'output',
    };
    // Amounts are cents of USD, as decimal strings.
    for (const b of r.data ?? [])
      for (const x of b.results ?? []) add(String(x.model), kinds[x.token_type], Number(x.amount) / 100);
  },
};
