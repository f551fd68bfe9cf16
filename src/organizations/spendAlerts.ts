import { budgetTimeZone } from '../billing';
import { tx, type Db } from '../db';
import { recordEventIn, type DeliveryRef } from '../webhooks/repo';
import type { Mailer } from './mail';

/**
 * Spend alerts (migration 216): when the VND an organization or a project spent this month (its usage records'
 * costs, which are the ledger's charges) reaches an alert's threshold, the sweep records the crossing and its
 * `spend.alert` webhook event in one transaction (keyed on alert and month, so a sweep run twice emits nothing
 * twice), then mails the owners and the alert's recipients. A mail that fails stays pending and is sent by the next
 * sweep: once per crossing.
 */

/** The month's spend of each alert's scope, and whether it crossed (not yet alerted this month). */
const CROSSED_SQL = `
  WITH m AS (SELECT to_char(now() AT TIME ZONE $1, 'YYYY-MM') AS month,
                    date_trunc('month', now() AT TIME ZONE $1) AT TIME ZONE $1 AS since),
  spend AS (
    SELECT s.id, m.month,
      (SELECT COALESCE(sum(u.cost_vnd), 0) FROM usage_records u
         WHERE u.account_id = s.account_id AND u.created_at >= m.since
           AND (s.project_id IS NULL OR u.api_key_id IN (SELECT k.id FROM api_keys k WHERE k.project_id = s.project_id))
      )::bigint AS spent
    FROM spend_alerts s, m
    WHERE s.alerted_month IS DISTINCT FROM m.month AND ($2::uuid IS NULL OR s.account_id = $2))
  UPDATE spend_alerts s SET alerted_month = spend.month, mail_pending = true
  FROM spend WHERE spend.id = s.id AND spend.spent > 0 AND spend.spent >= s.threshold_vnd
  RETURNING s.id, s.account_id, s.project_id, s.threshold_vnd, spend.spent, spend.month`;

/** Limits a sweep to one organization (an operator's check, a test's own account); by default, every one. */
export interface SweepScope {
  accountId?: string;
}

export async function sweepSpendAlerts(db: Db, scope: SweepScope = {}): Promise<DeliveryRef[]> {
  return tx(db, async (c) => {
    const crossed = await c.query(CROSSED_SQL, [budgetTimeZone(), scope.accountId ?? null]);
    const out: DeliveryRef[] = [];
    for (const a of crossed.rows) {
      const { deliveries } = await recordEventIn(c, {
        accountId: a.account_id,
        type: 'spend.alert',
        data: {
          alert_id: a.id,
          scope: a.project_id ? 'project' : 'organization',
          project_id: a.project_id,
          threshold_amount: Number(a.threshold_vnd),
          spent_amount: Number(a.spent),
          currency: 'vnd',
          month: a.month,
        },
        key: `spend.alert:${a.id}:${a.month}`,
      });
      out.push(...deliveries);
    }
    return out;
  });
}

/** Mails the pending crossings (to the organization's owners and the alert's recipients); each cleared once sent. */
export async function mailSpendAlerts(db: Db, mailer: Mailer, scope: SweepScope = {}): Promise<number> {
  const r = await db.query(
    `SELECT s.id, s.project_id, s.threshold_vnd, s.alerted_month, s.recipients, s.subject_prefix, p.name AS project,
       ARRAY(SELECT u.email FROM console_users u
             WHERE u.account_id = s.account_id AND u.org_role = 'owner' AND u.removed_at IS NULL ORDER BY u.email)
         AS owners
     FROM spend_alerts s LEFT JOIN projects p ON p.id = s.project_id
     WHERE s.mail_pending AND ($1::uuid IS NULL OR s.account_id = $1)`,
    [scope.accountId ?? null],
  );
  let sent = 0;
  for (const a of r.rows) {
    const to = [...new Set([...a.owners, ...a.recipients])];
    if (to.length > 0) {
      const scope = a.project_id ? `project ${a.project}` : 'the organization';
      const vnd = Number(a.threshold_vnd).toLocaleString('en-US');
      await mailer.send(
        to.join(', '),
        `${a.subject_prefix ?? 'Spend alert'}: ${scope} spent ${vnd} VND in ${a.alerted_month}`,
        `The spend of ${scope} this month (${a.alerted_month}) reached the alert's threshold of ${vnd} VND.\n`,
      );
      sent++;
    }
    await db.query('UPDATE spend_alerts SET mail_pending = false WHERE id = $1', [a.id]);
  }
  return sent;
}
