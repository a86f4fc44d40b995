-- Placeholder for schema version 4, which another change of stashd's
-- schema defines; tern refuses a gap in the numbering. Replace this file
-- with that change's 004 migration.
SELECT 1;

---- create above / drop below ----

SELECT 1;
