-- A content signature is made of the CRCs an archive records. Only where
-- the listing read each file's data and found that CRC does it stand on
-- the bytes; elsewhere (7z and RAR headers, a zip past the check's
-- budget) it is the archive's claim, which a fake can copy from a real
-- release. A package found to repack one whose signature is only claimed
-- is delivered, not skipped: a fake posted first must not suppress the
-- release it imitates. Packages catalogued before the column count as
-- claimed.
ALTER TABLE packages ADD COLUMN sig_checked boolean NOT NULL DEFAULT false;

---- create above / drop below ----

ALTER TABLE packages DROP COLUMN sig_checked;
