-- Whether the account can still read a source, and whether the source
-- protects its content (documents cannot be re-sent), for `stashd status`
-- and the audit. access is 'ok' or 'inaccessible' (server calls answer
-- "Can't access the chat" while getChat still succeeds locally).
ALTER TABLE sources
    ADD COLUMN access        text NOT NULL DEFAULT 'ok' CHECK (access IN ('ok', 'inaccessible')),
    ADD COLUMN access_reason text NOT NULL DEFAULT '',
    ADD COLUMN access_since  timestamptz,
    ADD COLUMN protected     boolean NOT NULL DEFAULT false;

---- create above / drop below ----

ALTER TABLE sources DROP COLUMN access, DROP COLUMN access_reason, DROP COLUMN access_since, DROP COLUMN protected;
