package listener

import (
	"context"

	"stashd/tg"
)

// topicOpenLocked notes a forum topic reported open (updateForumTopicInfo
// with is_closed false): it may be a destination topic reopened, and the
// deliveries its closing put off go with the next flush
// (resumeDeliveries). The update does not say whether the topic was
// closed before, so every open report counts; resuming nothing costs one
// query.
func (l *Listener) topicOpenLocked(t tg.Topic) {
	if !t.IsClosed && len(l.reopened) < 1024 {
		l.reopened = append(l.reopened, t.ChatID)
		l.wakeLocked()
	}
}

// resumeDeliveries makes the deliveries put off because a topic of each
// chat was closed (tg.ErrTopicClosed) due now.
func (l *Listener) resumeDeliveries(ctx context.Context, chats []tg.ChatID) {
	for _, chat := range chats {
		n, err := l.store.ResumeDeliveries(ctx, chat, tg.ErrTopicClosed.Error(), l.cfg.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			l.log.Warn("resume deliveries to a reopened topic", "destination", chat, "err", err)
		case n > 0:
			l.log.Info("destination topic reopened; deliveries resumed", "destination", chat, "deliveries", n)
		}
	}
}
