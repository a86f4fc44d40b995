package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/route"
	"stashd/tg"
)

// recoverTopic decides what follows a send into forum topic thread of dest
// that failed with err. It returns the thread to send into again and true
// when the part should be sent again at once:
//   - the topic was deleted (400 TOPIC_DELETED): a topic "same" is
//     forgotten (cache and store) and created again, as for a new topic; a
//     fixed topic of a route cannot be, and the error stands;
//   - the topic is closed (400 TOPIC_CLOSED): it is reopened when the
//     account may (toggleForumTopicIsClosed: it manages topics there, or
//     created the topic); otherwise the delivery waits, with
//     tg.ErrTopicClosed as its reason, and the destination is opened so
//     that its reopening (updateForumTopicInfo) resumes it.
//
// Any other error is returned as it is.
func (p *Pipeline) recoverTopic(ctx context.Context, in route.Package, dest tg.ChatID, thread int64, err error) (int64, bool, error) {
	switch {
	case thread == 0:
		return thread, false, err
	case tg.TopicDeleted(err):
		t := p.cfg.Routes.Topic(in, dest)
		if !t.Same || in.Topic == 0 {
			return thread, false, fmt.Errorf("the route's topic %d of %d was deleted: %w", thread, dest, err)
		}
		name, nerr := p.sourceTopicName(ctx, in.Chat, in.Topic)
		if nerr != nil {
			return thread, false, errors.Join(err, nerr)
		}
		p.mu.Lock()
		delete(p.destTopics, destTopicKey{dest, name})
		p.mu.Unlock()
		if ferr := p.store.ForgetDestinationTopic(ctx, dest, name, thread); ferr != nil {
			return thread, false, errors.Join(err, ferr)
		}
		p.log.Warn("destination topic was deleted; creating it again", "destination", dest, "topic", thread, "name", name)
		p.m.topicEvent(topicDeleted)
		fresh, serr := p.sameTopic(ctx, dest, name)
		if serr != nil {
			return thread, false, serr
		}
		return fresh, true, nil
	case tg.TopicClosed(err):
		p.m.topicEvent(topicClosed)
		rerr := p.tg.ToggleForumTopicIsClosed(ctx, dest, thread, false)
		var te *tg.Error
		if rerr == nil || errors.As(rerr, &te) && te.Message == "TOPIC_NOT_MODIFIED" {
			p.log.Info("destination topic was closed; reopened it", "destination", dest, "topic", thread)
			p.m.topicEvent(topicReopened)
			return thread, true, nil
		}
		// Updates for a channel come only while it is open: the
		// topic's reopening must reach the listener.
		if _, oerr := p.cfg.Views.Open(ctx, dest); oerr != nil {
			p.log.Warn("open destination to follow its closed topic", "destination", dest, "err", oerr)
		}
		// Not wrapped: the refusal is a 400, which would make the
		// delivery permanent; a closed topic may be reopened.
		return thread, false, fmt.Errorf("topic %d of %d: %w (%v; reopen it: %v)", thread, dest, tg.ErrTopicClosed, err, rerr)
	}
	return thread, false, err
}

// topicRefusal returns err, unless it is a destination topic's refusal
// that a later attempt gets past: the topic was closed, or deleted, again
// after recoverTopic had made it usable (or while an album was partly
// sent). Such a refusal is a 400, which would give the delivery up and
// lose the package for that destination; it is returned as retryable
// instead, so the delivery stays queued and its next attempt recovers the
// topic once more. A deleted topic the route names by id stays permanent:
// nothing brings it back.
func (p *Pipeline) topicRefusal(in route.Package, dest tg.ChatID, thread int64, err error) error {
	switch {
	case thread == 0 || err == nil:
		return err
	case tg.TopicClosed(err):
		return fmt.Errorf("topic %d of %d: %w (%v)", thread, dest, tg.ErrTopicClosed, err)
	case tg.TopicDeleted(err) && p.cfg.Routes.Topic(in, dest).Same && in.Topic != 0:
		return fmt.Errorf("topic %d of %d: %w (%v)", thread, dest, tg.ErrTopicDeleted, err)
	}
	return err
}

// Destination topic events, as stashd_destination_topic_events_total
// labels them.
const (
	topicClosed   = "closed"   // a send met a closed topic
	topicReopened = "reopened" // stashd reopened it
	topicDeleted  = "deleted"  // a send met a deleted topic (created again)
)

func newTopicMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stashd_destination_topic_events_total",
		Help: "Sends that met a closed or deleted destination forum topic, and closed topics stashd reopened, by event (closed, reopened, deleted).",
	}, []string{"event"})
}

func (m *Metrics) topicEvent(event string) {
	if m != nil {
		m.topics.WithLabelValues(event).Inc()
	}
}
