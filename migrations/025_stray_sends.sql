-- Messages a daemon instance sent and could not record: the send was on
-- its way when the instance lost its account's lease (paused, cut off
-- from the database), so the new owner may have found no copy, sent the
-- part again and recorded its own message. The fenced record of the late
-- one is refused; the instance notes it here instead (this table is not
-- fenced), as it does a second copy whose deletion failed for a reason
-- that may pass (the lease gate, a 500, a stop). The account's owner
-- settles each note: a message of a delivery recorded with another
-- message is a second copy, deleted from the destination; one whose
-- delivery is still an intent is its record.
CREATE TABLE stray_sends (
    destination_chat_id bigint NOT NULL,
    dest_message_id     bigint NOT NULL,
    token               text NOT NULL,
    account             text NOT NULL,
    noted_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (destination_chat_id, dest_message_id)
);
CREATE INDEX stray_sends_account ON stray_sends (account);

---- create above / drop below ----

DROP TABLE stray_sends;
