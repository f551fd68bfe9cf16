-- Top-ups (src/jobs/topups/): customers fund their own balance by VietQR bank transfer (a bank feed, SePay or
-- Casso, posts each incoming transfer) or VNPay. An order says what the customer means to pay and the memo that
-- identifies it; a transfer is money the bank or VNPay reports received, recorded once per provider transaction id,
-- in the same transaction as its ledger credit. A transfer that matches no order waits for an operator.

CREATE TABLE topup_orders (
  -- topup_<hex>
  id           text PRIMARY KEY,
  account_id   uuid NOT NULL REFERENCES accounts(id),
  method       text NOT NULL CHECK (method IN ('vietqr', 'vnpay')),
  amount       bigint NOT NULL CHECK (amount > 0),
  -- What the transfer's content must carry (unguessable, unique).
  memo         text NOT NULL UNIQUE,
  status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid', 'expired')),
  -- VND received against the order, over all its transfers; how it compares with `amount` once paid.
  paid_amount  bigint NOT NULL DEFAULT 0,
  payment      text CHECK (payment IN ('exact', 'short', 'over')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  paid_at      timestamptz,
  -- VNPay: the signed payment URL given out at creation.
  payment_url  text,
  updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX topup_orders_account ON topup_orders(account_id, created_at DESC, id DESC);
CREATE INDEX topup_orders_open ON topup_orders(updated_at) WHERE status = 'open';

CREATE TABLE topup_transfers (
  id             bigserial PRIMARY KEY,
  provider       text NOT NULL CHECK (provider IN ('sepay', 'casso', 'vnpay')),
  provider_txn_id text NOT NULL,
  amount         bigint NOT NULL CHECK (amount > 0),
  content        text NOT NULL DEFAULT '',
  reference      text,
  bank_account   text,
  transacted_at  timestamptz,
  -- credited: in the ledger (matched to an order, or assigned by an operator); unmatched: waits for an operator;
  -- returned: an operator sent it back.
  status         text NOT NULL CHECK (status IN ('credited', 'unmatched', 'returned')),
  order_id       text REFERENCES topup_orders(id),
  account_id     uuid REFERENCES accounts(id),
  -- How it came: webhook, statement (the daily pull found it), ipn (VNPay).
  via            text NOT NULL CHECK (via IN ('webhook', 'statement', 'ipn')),
  -- An operator's decision on an unmatched transfer: who, why, when.
  resolved_by    text,
  resolution     text,
  resolved_at    timestamptz,
  received_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT topup_transfers_once UNIQUE (provider, provider_txn_id),
  CHECK (status <> 'credited' OR account_id IS NOT NULL)
);
-- One bank transaction reported by two feeds watching the same account (SePay's webhook and Casso's, or a webhook
-- and the statement of the other feed) carries the bank's own reference: recorded, and credited, once.
CREATE UNIQUE INDEX topup_transfers_bank_ref ON topup_transfers(bank_account, reference)
  WHERE bank_account IS NOT NULL AND reference IS NOT NULL;
CREATE INDEX topup_transfers_order ON topup_transfers(order_id) WHERE order_id IS NOT NULL;
CREATE INDEX topup_transfers_unmatched ON topup_transfers(received_at) WHERE status = 'unmatched';
CREATE INDEX topup_transfers_day ON topup_transfers(transacted_at);

-- The daily statement's report, one row per feed and day (Asia/Ho_Chi_Minh), rewritten by each run of that day.
CREATE TABLE topup_statements (
  provider     text NOT NULL,
  day          date NOT NULL,
  transfers    integer NOT NULL,
  amount       bigint NOT NULL,
  credited     integer NOT NULL,
  unmatched    integer NOT NULL,
  returned     integer NOT NULL,
  -- Transfers the statement found that no webhook had brought.
  recovered    integer NOT NULL,
  run_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (provider, day)
);

-- Low-balance alerts: the threshold an account set, and whether the current crossing was announced.
ALTER TABLE accounts ADD COLUMN low_balance_threshold bigint CHECK (low_balance_threshold >= 0);
ALTER TABLE accounts ADD COLUMN low_balance_crossings integer NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN low_balance_alerted boolean NOT NULL DEFAULT false;
