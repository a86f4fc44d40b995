-- Containment ("contained in") is found through the files' CRC-32s: a
-- package's files are looked up by CRC among the catalogued packages'.
CREATE INDEX package_files_crc ON package_files (crc) WHERE crc IS NOT NULL;

---- create above / drop below ----

DROP INDEX package_files_crc;
