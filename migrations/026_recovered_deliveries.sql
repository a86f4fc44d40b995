-- When a delivery's sent record was rebuilt from a copy found in its
-- destination by a reconciliation after the catalogue rewound, rather than
-- written after its send. Of the copies of such a part the oldest is its
-- delivery, and a later reconciliation that finds an older copy than the
-- one recorded moves the record to it; a record written after its send
-- keeps its message (its other copies are second copies).
ALTER TABLE deliveries ADD COLUMN recovered_at timestamptz;

---- create above / drop below ----

ALTER TABLE deliveries DROP COLUMN recovered_at;
