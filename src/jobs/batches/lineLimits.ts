import type { Catalog } from '../../catalog';
import { checkOutputCap } from '../../catalog';
import { ApiError } from '../../errors';
import {
  jsonBodyProblem,
  MAX_BODY_DEPTH,
  validateChatCompletion,
  validateCompletion,
  validateEmbedding,
  validateMessages,
  validateResponses,
} from '../../schemas';
import { isUnstorableText } from '../../db';
import { isProblem, parseRequestLine, type BatchEndpoint, type BatchRequestLine, type InputProblem } from '../../files';
import type { Line } from '../../files';

/**
 * The limits the synchronous route a batch line names holds its body to, for that line: nesting depth and
 * prototype keys (as jsonBody), the route's schema (types, string and number bounds, token counts up to 10M), the
 * model's output cap, and a custom_id that is real text (no NUL, no unpaired surrogate: it must come back as sent).
 * Checked at upload (POST /v1/files, POST /v1/messages/batches) and again when the line runs, so a line that the
 * route would refuse never reaches the cost bound, structuredClone or an upstream.
 */

export interface LineLimitProblem {
  message: string;
  /** The parameter at fault, inside the line's body (`max_tokens`), or `custom_id`. */
  param: string | null;
  code: string;
}

const SCHEMAS: Record<BatchEndpoint, (body: unknown) => void> = {
  '/v1/chat/completions': validateChatCompletion,
  '/v1/completions': validateCompletion,
  '/v1/embeddings': validateEmbedding,
  '/v1/responses': validateResponses,
  '/v1/messages': validateMessages,
};

const OUTPUT_CAPS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'] as const;

/**
 * What is wrong with one request of a batch, if anything, by its synchronous route's rules. `catalog`: to apply the
 * output cap of the model the body names (a model the catalog does not know is left to batch creation, a 404).
 */
export function lineLimitProblem(
  catalog: Catalog | null,
  endpoint: BatchEndpoint,
  customId: string,
  body: Record<string, unknown>,
): LineLimitProblem | null {
  if (isUnstorableText(customId))
    return {
      message: 'custom_id contains a NUL character or an unpaired UTF-16 surrogate, which is not valid text.',
      param: 'custom_id',
      code: 'invalid_custom_id',
    };
  const shape = jsonBodyProblem(body, MAX_BODY_DEPTH);
  if (shape === 'too_deep')
    return { message: `body is nested more than ${MAX_BODY_DEPTH} levels deep.`, param: 'body', code: 'invalid_json' };
  if (shape === 'prototype_key')
    return {
      message: 'body contains a forbidden key ("__proto__", or "constructor" with a "prototype").',
      param: 'body',
      code: 'invalid_json',
    };
  try {
    SCHEMAS[endpoint](body);
    const model = typeof body.model === 'string' ? catalog?.get(body.model) : undefined;
    if (model)
      for (const p of OUTPUT_CAPS) if (typeof body[p] === 'number') checkOutputCap(model, p, body[p] as number);
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    return { message: e.message, param: e.param, code: e.code ?? 'invalid_request' };
  }
  return null;
}

/** The InputProblem of a line for `lineLimitProblem`'s finding: its message names the line. */
export function lineProblem(no: number, p: LineLimitProblem): InputProblem {
  const where = p.param && p.param !== 'custom_id' && p.param !== 'body' ? ` (body.${p.param})` : '';
  return { line: no, message: `Line ${no}${where}: ${p.message}`, code: p.code };
}

/**
 * One line of a stored input file, parsed and held to its route's limits: what the upload checked, for the run
 * time to check again (src/jobs/batches/activities.ts). A problem names the line; the line fails alone.
 */
export function checkRequestLine(catalog: Catalog | null, l: Line): BatchRequestLine | InputProblem {
  const r = parseRequestLine(l);
  if (isProblem(r)) return r;
  const p = lineLimitProblem(catalog, r.url, r.custom_id, r.body);
  return p ? lineProblem(l.no, p) : r;
}

/** The check BatchInputValidator runs on each parsed line at upload. */
export const uploadLineCheck =
  (catalog: Catalog | null) =>
  (r: BatchRequestLine, no: number): InputProblem | null => {
    const p = lineLimitProblem(catalog, r.url, r.custom_id, r.body);
    return p ? lineProblem(no, p) : null;
  };
