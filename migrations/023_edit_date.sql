-- source_messages.edit_date: the message's edit date (TDLib's edit_date)
-- as the session that recorded it saw it; NULL when it was never edited,
-- or it was recorded before this column. A session answers getMessage
-- from its own database, which may not have heard of an edit yet: of two
-- views of one message carrying different documents, the later edit date
-- tells which is current, without asking Telegram.
ALTER TABLE source_messages ADD COLUMN edit_date timestamptz;

---- create above / drop below ----

ALTER TABLE source_messages DROP COLUMN edit_date;
