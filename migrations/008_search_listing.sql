-- Broad searches: one row per package holding its whole listing as text,
-- so that a query matching tens of thousands of listed files reads one row
-- per package, newest first, and stops when the page is full, instead of
-- fetching and ranking every matching file row before paging. Rare texts
-- are still looked up per file (package_files_path_trgm and the base-name
-- index below): the trigrams of a whole listing would make nearly every
-- package a candidate.
--
-- paths holds every listed file's path (directories are not matched),
-- lower-cased, one per line; names holds their base names the same way,
-- with a line break before the first and after the last, so that
-- '%\nname\n%' is a file named exactly so and '%\nname%' a file name
-- starting with it. A line break inside a stored path is written as U+FFFD:
-- the search sends texts containing either character to the file rows
-- instead, so a match here is always a match within one path.
CREATE TABLE package_search (
    package_id bigint PRIMARY KEY REFERENCES packages (id) ON DELETE CASCADE,
    paths      text NOT NULL,
    names      text NOT NULL
) WITH (
    -- A search reads these columns row after row: keep a listing of up to
    -- 8 kB in the row, uncompressed (PostgreSQL compresses rows over 2 kB
    -- by default, which triples the cost of reading them).
    toast_tuple_target = 8160
);

INSERT INTO package_search (package_id, paths, names)
SELECT package_id,
    string_agg(lower(replace(path, E'\n', U&'\FFFD')), E'\n' ORDER BY ord),
    E'\n' || string_agg(lower(replace(regexp_replace(path, '^.*/', ''), E'\n', U&'\FFFD')), E'\n' ORDER BY ord) || E'\n'
FROM package_files WHERE NOT is_dir GROUP BY package_id;

-- Ranks: a file named exactly the text, or starting with it, looked up by
-- base name when too few packages have one for a walk to find them. Only
-- the first 256 characters: a B-tree entry must fit in a third of a page,
-- and an archive may name a file in 64 kB.
CREATE INDEX package_files_base_name ON package_files
    (left(lower(regexp_replace(path, '^.*/', '')), 256) text_pattern_ops);

---- create above / drop below ----

DROP INDEX package_files_base_name;
DROP TABLE package_search;
