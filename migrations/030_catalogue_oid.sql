-- A dump restored into the same cluster keeps the server's identity, so
-- the system identifier and timeline cannot tell it. A logical restore
-- (pg_restore --clean, psql < dump, into any database) recreates every
-- table, and PostgreSQL gives the new tables new OIDs: database_identity
-- records its own table's OID, and a check that finds another one knows
-- the catalogue was restored from a dump. (A migration that recreated this
-- table would be taken for a restore: one reconciliation of every
-- destination.) A role that cannot read the control file still compares
-- the OID, so it records the row without the server's identity.
ALTER TABLE database_identity
    ADD COLUMN catalogue_oid bigint,
    ALTER COLUMN system_identifier DROP NOT NULL,
    ALTER COLUMN timeline DROP NOT NULL;

---- create above / drop below ----

DELETE FROM database_identity WHERE system_identifier IS NULL OR timeline IS NULL;
ALTER TABLE database_identity
    DROP COLUMN catalogue_oid,
    ALTER COLUMN system_identifier SET NOT NULL,
    ALTER COLUMN timeline SET NOT NULL;
