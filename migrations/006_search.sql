-- Catalogue search: substring, case-insensitive matches over package names
-- and every listed path. pg_trgm's GIN operator class answers ILIKE
-- '%needle%' from the index for needles of three characters or more, so a
-- search over millions of listed files reads only the candidate rows.
-- pg_trgm ships with the PostgreSQL server package (contrib); creating it
-- needs a role allowed to (the database owner on PostgreSQL 13 and later,
-- as it is a trusted extension).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE INDEX package_files_path_trgm ON package_files USING gin (path gin_trgm_ops);
CREATE INDEX packages_name_trgm ON packages USING gin (name gin_trgm_ops);
-- Date filters and the newest-first listing of an empty query.
CREATE INDEX packages_created_at ON packages (created_at);

---- create above / drop below ----

DROP INDEX packages_created_at;
DROP INDEX packages_name_trgm;
DROP INDEX package_files_path_trgm;
