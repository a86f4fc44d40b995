-- What the bytes say, beside what the names say: a package's archive is
-- verified to its end before it is delivered whole; the format its magic
-- showed and whether the name lied; what its structure lies about; the
-- flags of a posted file's name; each entry's CRC-32 where the format
-- records one (repacks are matched on path, size and CRC); and the copies
-- of a part left out of their set, with why.
ALTER TABLE packages
    -- The archive listed to its end without error.
    ADD COLUMN verified   boolean NOT NULL DEFAULT false,
    -- Why verification failed, for a package mirrored anyway
    -- (deliver_broken); '' otherwise.
    ADD COLUMN broken     text NOT NULL DEFAULT '',
    -- The bytes are another format than the name says.
    ADD COLUMN name_lied  boolean NOT NULL DEFAULT false,
    -- What the structure lies about (a hidden end record, local headers
    -- that disagree with the directory).
    ADD COLUMN suspicious text[] NOT NULL DEFAULT '{}';

ALTER TABLE source_messages
    -- Any of: control, bidi, zero-width (the posted file name).
    ADD COLUMN name_flags text[] NOT NULL DEFAULT '{}';

ALTER TABLE package_files
    -- CRC-32 of the entry's content as the archive records it; NULL unknown.
    ADD COLUMN crc bigint;

-- The flags follow archive.FlagName: control characters (or a name that
-- had to be cleaned), bidirectional formatting characters, zero-width
-- characters. Computed here so that every path recording a message sets them.
CREATE FUNCTION stashd_name_flags(name text, cleaned boolean) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_remove(ARRAY[
        CASE WHEN cleaned OR name ~ '[\x01-\x1f\x7f-\x9f]' THEN 'control' END,
        CASE WHEN name ~ '[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]' THEN 'bidi' END,
        CASE WHEN name ~ '[\u200b-\u200d\u2060-\u2064\ufeff\u180e\u00ad\u034f]' THEN 'zero-width' END
    ], NULL)
$$;

CREATE FUNCTION stashd_source_name_flags() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.name_flags := stashd_name_flags(NEW.file_name, NEW.file_name_cleaned);
    RETURN NEW;
END
$$;

CREATE TRIGGER source_messages_name_flags BEFORE INSERT OR UPDATE OF file_name, file_name_cleaned ON source_messages
    FOR EACH ROW EXECUTE FUNCTION stashd_source_name_flags();

CREATE TABLE rejected_parts (
    chat_id     bigint NOT NULL,
    message_id  bigint NOT NULL,
    -- The package the set became, NULL when it did not.
    package_id  bigint REFERENCES packages (id) ON DELETE SET NULL,
    file_name   text NOT NULL,
    reason      text NOT NULL,
    rejected_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, message_id)
);

---- create above / drop below ----

DROP TABLE rejected_parts;
DROP TRIGGER source_messages_name_flags ON source_messages;
DROP FUNCTION stashd_source_name_flags();
DROP FUNCTION stashd_name_flags(text, boolean);
ALTER TABLE package_files DROP COLUMN crc;
ALTER TABLE source_messages DROP COLUMN name_flags;
ALTER TABLE packages DROP COLUMN verified, DROP COLUMN broken, DROP COLUMN name_lied, DROP COLUMN suspicious;
