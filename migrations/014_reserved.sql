-- Reserved: this number belongs to another change of the schema; this file
-- keeps the sequence whole until that change lands, and is then removed.
SELECT 1;

---- create above / drop below ----

SELECT 1;
