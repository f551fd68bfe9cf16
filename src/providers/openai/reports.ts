import { getJson, type ReportField, type UsageReports } from '../usageReports';

/** OpenAI's organization usage and costs APIs (an admin key). */
export const openaiReports: UsageReports = {
  async usage(baseUrl, key, { start, end }, add) {
    const q = `start_time=${start / 1000}&end_time=${end / 1000}&bucket_width=1d&group_by=model&limit=31`;
    const r = await getJson(`${baseUrl}/organization/usage/completions?${q}`, { authorization: `Bearer ${key}` });
    for (const b of r.data ?? [])
      for (const x of b.results ?? [])
        add(String(x.model), {
          input: (x.input_tokens ?? 0) - (x.input_cached_tokens ?? 0),
          cache_read: x.input_cached_tokens ?? 0,
          output: x.output_tokens ?? 0,
        });
  },

  async costs(baseUrl, key, { start, end }, add) {
    const q = `start_time=${start / 1000}&end_time=${end / 1000}&bucket_width=1d&group_by=line_item`;
    const r = await getJson(`${baseUrl}/organization/costs?${q}`, { authorization: `Bearer ${key}` });
    const kinds: Record<string, ReportField> = { input: 'input', 'cached input': 'cache_read', output: 'output' };
    for (const b of r.data ?? [])
      for (const x of b.results ?? []) {
        const m = /^(.*), ([a-z ]+)$/.exec(String(x.line_item ?? ''));
        if (m) add(m[1], kinds[m[2]], Number(x.amount?.value));
      }
  },
};
