-- The same content in another container: a package whose entries (path,
-- size, CRC) are a catalogued package's, in other archive bytes, is a
-- repack of it; one whose entries are a strict subset of another's is
-- contained in it.
CREATE TABLE package_links (
    package_id bigint NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    other_id   bigint NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('repack', 'contained_in')),
    linked_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (package_id, other_id),
    CHECK (package_id <> other_id)
);
CREATE INDEX package_links_other ON package_links (other_id);

ALTER TABLE packages
    -- archive.ContentSignature of the entries (paths, sizes, CRCs), NULL
    -- when some entry records no CRC: packages with one signature hold the
    -- same files.
    ADD COLUMN content_sig bytea;
CREATE INDEX packages_content_sig ON packages (content_sig) WHERE content_sig IS NOT NULL;

---- create above / drop below ----

DROP INDEX packages_content_sig;
ALTER TABLE packages DROP COLUMN content_sig;
DROP TABLE package_links;
