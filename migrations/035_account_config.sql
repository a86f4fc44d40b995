-- What an account does, as configured on the instance holding its lease:
-- instances sharing a database must run each account the same way, since
-- any of them may take it over. The holder writes config_fingerprint (the
-- SHA-256 of config_summary, a canonical "key: value" line per item: the
-- account's sources, topics and history, the routes or destinations, the
-- handling of broken archives and repacks; no secrets, no paths) and
-- config_owner (itself) with every acquisition. NULL: written by a stashd
-- that did not record it.
--
-- config_mismatches holds what every other instance found when it looked
-- at the lease: its own fingerprint differing from the holder's
-- (holder_fingerprint), with differs saying how, item by item. The row is
-- deleted once the instance finds them equal; a row against a fingerprint
-- the account no longer carries is stale and is deleted by the next
-- acquisition. A row is an instance's report, renewed while the
-- difference lasts: an instance is named host:pid by default, so one
-- restarted (its configuration put right) or taken out of service never
-- deletes what it recorded under its old name. until, by the database's
-- clock, is three lease TTLs of the recording instance after it last
-- renewed the row; stashd status shows only rows not past it, and the
-- next acquisition of the account deletes those past it.
ALTER TABLE accounts
    ADD COLUMN config_fingerprint text,
    ADD COLUMN config_summary     text,
    ADD COLUMN config_owner       text;

CREATE TABLE config_mismatches (
    account            text NOT NULL,
    instance           text NOT NULL,
    holder             text NOT NULL,
    holder_fingerprint text NOT NULL,
    fingerprint        text NOT NULL,
    differs            text NOT NULL,
    since              timestamptz NOT NULL DEFAULT now(),
    until              timestamptz NOT NULL,
    PRIMARY KEY (account, instance)
);

---- create above / drop below ----

DROP TABLE config_mismatches;
ALTER TABLE accounts DROP COLUMN config_fingerprint, DROP COLUMN config_summary, DROP COLUMN config_owner;
