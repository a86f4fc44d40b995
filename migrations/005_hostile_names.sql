-- Names PostgreSQL cannot store (invalid UTF-8, NUL) are stored cleaned,
-- with the raw bytes in hex beside them; archive entries carry the flags
-- the listing raised; packages record encryption and the format their
-- bytes showed when the name said another.
ALTER TABLE source_messages
    -- Hex of the file name's bytes when file_name had to be cleaned, else ''.
    ADD COLUMN file_name_raw     text NOT NULL DEFAULT '',
    ADD COLUMN file_name_cleaned boolean NOT NULL DEFAULT false;

ALTER TABLE packages
    ADD COLUMN name_raw          text NOT NULL DEFAULT '',
    -- Some entry's data is encrypted.
    ADD COLUMN encrypted         boolean NOT NULL DEFAULT false,
    -- The names themselves are encrypted: file_count 0 says nothing.
    ADD COLUMN headers_encrypted boolean NOT NULL DEFAULT false,
    -- The format the bytes' magic showed, when the name said another; else ''.
    ADD COLUMN detected_format   text NOT NULL DEFAULT '';

ALTER TABLE package_parts
    ADD COLUMN file_name_raw text NOT NULL DEFAULT '';

ALTER TABLE package_files
    -- Hex of the name as the archive stores it, when path was cleaned or cut.
    ADD COLUMN path_raw text NOT NULL DEFAULT '',
    -- Any of: cleaned, cut, bidi, link_escape, encrypted.
    ADD COLUMN flags    text[] NOT NULL DEFAULT '{}';

---- create above / drop below ----

ALTER TABLE package_files DROP COLUMN path_raw, DROP COLUMN flags;
ALTER TABLE package_parts DROP COLUMN file_name_raw;
ALTER TABLE packages DROP COLUMN name_raw, DROP COLUMN encrypted, DROP COLUMN headers_encrypted,
    DROP COLUMN detected_format;
ALTER TABLE source_messages DROP COLUMN file_name_raw, DROP COLUMN file_name_cleaned;
