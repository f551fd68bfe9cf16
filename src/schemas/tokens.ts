import { MAX_TOKEN_COUNT } from '../billing';

export { MAX_TOKEN_COUNT };

export const tokenCount = { type: 'integer', minimum: 1, maximum: MAX_TOKEN_COUNT } as const;
export const nullableTokenCount = { type: ['integer', 'null'], minimum: 1, maximum: MAX_TOKEN_COUNT } as const;
