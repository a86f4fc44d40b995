-- Reserved: sequence 005 belongs to a schema change made alongside the
-- catalogue search (006); this empty step keeps tern's sequence whole.
SELECT 1;

---- create above / drop below ----

SELECT 1;
