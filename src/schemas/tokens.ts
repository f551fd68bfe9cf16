/**
 * The largest token count a request may name (max_tokens, max_completion_tokens, max_output_tokens,
 * budget_tokens). Above every model's context window, so no real request meets it; bounded so the cost bound
 * computed from it stays an exact VND amount (1e7 tokens at 1.000.000 ₫ per 1M is 1e7 ₫). Each model's own
 * output cap is checked by the router (catalog/outputCap.ts) or applied by the translation.
 */
export const MAX_TOKEN_COUNT = 10_000_000;

export const tokenCount = { type: 'integer', minimum: 1, maximum: MAX_TOKEN_COUNT } as const;
export const nullableTokenCount = { type: ['integer', 'null'], minimum: 1, maximum: MAX_TOKEN_COUNT } as const;
