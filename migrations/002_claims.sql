-- Claims let several daemon instances share catch-up work: a source is
-- claimed with FOR UPDATE SKIP LOCKED and held until claim_until.
ALTER TABLE sources
    ADD COLUMN claim_owner text,
    ADD COLUMN claim_until timestamptz,
    ADD COLUMN scans integer NOT NULL DEFAULT 0;

---- create above / drop below ----

ALTER TABLE sources DROP COLUMN claim_owner, DROP COLUMN claim_until, DROP COLUMN scans;
