import { getJson, type ReportField, type UsageReports } from '../usageReports';

/** OpenAI's organization usage and costs APIs (an admin key). */
export const openaiReports: UsageReports = {
  fields: ['input', 'cache_read', 'output', 'images', 'characters', 'seconds'],

  async usage({ baseUrl, key }, { start, end }, add) {
    const q = `start_time=${start / 1000}&end_time=${end / 1000}&bucket_width=1d&group_by=model&limit=31`;
    const usage = async (what: string) =>
      (await getJson(`${baseUrl}/organization/usage/${what}?${q}`, { authorization: `Bearer ${key}` })).data ?? [];
    for (const b of await usage('completions'))
      for (const x of b.results ?? [])
        add(String(x.model), {
          input: (x.input_tokens ?? 0) - (x.input_cached_tokens ?? 0),
          cache_read: x.input_cached_tokens ?? 0,
          output: x.output_tokens ?? 0,
        });
    // Embeddings, images, speech and transcription have reports of their own (input; images, characters, seconds).
    for (const b of await usage('embeddings'))
      for (const x of b.results ?? []) add(String(x.model), { input: x.input_tokens ?? 0 });
    for (const b of await usage('images'))
      for (const x of b.results ?? []) add(String(x.model), { images: x.images ?? 0 });
    for (const b of await usage('audio_speeches'))
      for (const x of b.results ?? []) add(String(x.model), { characters: x.characters ?? 0 });
    for (const b of await usage('audio_transcriptions'))
      for (const x of b.results ?? []) add(String(x.model), { seconds: x.seconds ?? 0 });
  },

  async costs({ baseUrl, key }, { start, end }, add) {
    const q = `start_time=${start / 1000}&end_time=${end / 1000}&bucket_width=1d&group_by=line_item`;
    const r = await getJson(`${baseUrl}/organization/costs?${q}`, { authorization: `Bearer ${key}` });
    const kinds: Record<string, ReportField> = {
      input: 'input',
      'cached input': 'cache_read',
      output: 'output',
      images: 'images',
      characters: 'characters',
      seconds: 'seconds',
    };
    for (const b of r.data ?? [])
      for (const x of b.results ?? []) {
        const m = /^(.*), ([a-z ]+)$/.exec(String(x.line_item ?? ''));
        if (m) add(m[1], kinds[m[2]], Number(x.amount?.value));
      }
  },
};
