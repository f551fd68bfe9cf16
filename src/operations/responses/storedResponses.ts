import { type Db, jsonForPostgres } from '../../db';
import type { ResponseObject, ResponsesItem } from '../../translate';

/** Stored responses (migration 030): save one turn, load one response, rebuild a conversation's items. */

/** Longest chain a continuation may walk (a guard, far beyond real conversations). */
const MAX_CHAIN = 10_000;

/** Response ids we issue or receive (resp_..., upstream ids): anything else cannot be stored, so it is not found. */
const ID = /^[A-Za-z0-9_.:-]{1,256}$/;
export const isResponseId = (id: string): boolean => ID.test(id);

export async function saveResponse(
  db: Db,
  accountId: string,
  r: {
    id: string;
    previousResponseId: string | null;
    model: string;
    input: ResponsesItem[];
    response: ResponseObject | Record<string, unknown>;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO stored_responses (account_id, id, previous_response_id, model, input, response)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (account_id, id) DO NOTHING`,
    [accountId, r.id, r.previousResponseId, r.model, jsonForPostgres(r.input), jsonForPostgres(r.response)],
  );
}

export async function loadResponse(db: Db, accountId: string, id: string): Promise<Record<string, unknown> | null> {
  if (!isResponseId(id)) return null;
  const { rows } = await db.query('SELECT response FROM stored_responses WHERE account_id = $1 AND id = $2', [
    accountId,
    id,
  ]);
  return rows.length ? (rows[0].response as Record<string, unknown>) : null;
}

/** DELETE /v1/responses/{id}: true when the account had it. */
export async function deleteResponse(db: Db, accountId: string, id: string): Promise<boolean> {
  if (!isResponseId(id)) return false;
  const r = await db.query('DELETE FROM stored_responses WHERE account_id = $1 AND id = $2', [accountId, id]);
  return (r.rowCount ?? 0) > 0;
}

/**
 * The items of the conversation ending with response `id`, oldest first: each turn's input items followed by
 * its output items. Null when the id is unknown to this account.
 */
export async function conversationItems(db: Db, accountId: string, id: string): Promise<ResponsesItem[] | null> {
  if (!isResponseId(id)) return null;
  const { rows } = await db.query(
    `WITH RECURSIVE chain AS (
       SELECT id, previous_response_id, input, response->'output' AS output, 0 AS depth
         FROM stored_responses WHERE account_id = $1 AND id = $2
       UNION ALL
       SELECT s.id, s.previous_response_id, s.input, s.response->'output', c.depth + 1
         FROM stored_responses s JOIN chain c ON s.account_id = $1 AND s.id = c.previous_response_id
        WHERE c.depth < $3
     )
     SELECT input, output FROM chain ORDER BY depth DESC`,
    [accountId, id, MAX_CHAIN],
  );
  if (!rows.length) return null;
  const items: ResponsesItem[] = [];
  for (const r of rows) {
    if (Array.isArray(r.input)) items.push(...(r.input as ResponsesItem[]));
    if (Array.isArray(r.output)) items.push(...(r.output as ResponsesItem[]));
  }
  return items;
}
