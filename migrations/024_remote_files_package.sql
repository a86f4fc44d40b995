-- remote_files by package: the intent of a delivery looks up its part's
-- files to find a copy a reconciliation recorded in the destination
-- (destination_copies), and a deleted package cascades to its files.
-- Without this index both read the whole table, so every delivery grew
-- slower with the catalogue.
CREATE INDEX remote_files_package ON remote_files (package_id, idx);

---- create above / drop below ----

DROP INDEX remote_files_package;
