package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"stashd/archive"
	"stashd/internal/service"
	"stashd/store"
	"stashd/tg"
)

// IncompleteSetError is the dead-letter reason of a multipart set or album
// that did not complete within SetMaxWait.
type IncompleteSetError struct {
	Set     string
	Missing string
}

func (e *IncompleteSetError) Error() string {
	return fmt.Sprintf("incomplete set %q: %s", e.Set, e.Missing)
}

// addPart records a part of a set; the sweeper completes the set once all
// its parts are in and it has been quiet for SetSettle.
func (p *Pipeline) addPart(ctx context.Context, msg tg.Message, cls classification) (store.Outcome, error) {
	if err := p.store.RecordMessages(ctx, sourceMessage(msg, store.OutcomePartPending, 0)); err != nil {
		return "", err
	}
	p.mu.Lock()
	p.seen[msg.Key()] = msg
	p.mu.Unlock()
	return store.OutcomePartPending, nil
}

func (p *Pipeline) forget(parts []tg.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range parts {
		delete(p.seen, m.Key())
	}
}

// message returns a set part as this session knows it: from memory, or
// fetched by id (file ids are per session, so after a restart the message
// must be loaded again before its file can be downloaded or re-sent).
func (p *Pipeline) message(ctx context.Context, key tg.MessageKey) (tg.Message, error) {
	p.mu.Lock()
	m, ok := p.seen[key]
	p.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := p.tg.GetMessage(ctx, key.Chat, key.Message)
	if err != nil {
		return tg.Message{}, fmt.Errorf("load part %s: %w", key, err)
	}
	return m, nil
}

// SweepResult says what one sweep did.
type SweepResult struct {
	Completed  int
	DeadLetter int
	Waiting    int
}

// Sweep looks at every pending set of the account once: complete and
// settled sets are ingested as one package, sets waiting longer than
// SetMaxWait become dead letters.
func (p *Pipeline) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	sets, err := p.store.PendingSets(ctx, p.cfg.Account)
	if err != nil {
		return res, err
	}
	now := p.cfg.Now()
	var errs []error
	for _, set := range sets {
		parts, err := p.store.SetParts(ctx, set.Chat, set.TopicID, set.SetKey)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(parts) == 0 {
			continue
		}
		ordered, missing := orderSet(set.SetKey, parts)
		settled := now.Sub(set.Newest) >= p.cfg.SetSettle &&
			(p.cfg.SourceSynced == nil || p.cfg.SourceSynced(set.Chat, parts[len(parts)-1].Key.Message.ServerID()))
		expired := now.Sub(set.Oldest) >= p.cfg.SetMaxWait
		switch {
		// A set complete by name whose source never settles (a source
		// that keeps failing) is taken as it is once SetMaxWait has passed.
		case missing == "" && (settled || expired):
			if err := p.completeSet(ctx, set, ordered); err != nil {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				if tg.Classify(err) == tg.ClassPermanent {
					// The set can never be fetched (access lost, content
					// protected): its parts must not wait for ever.
					errs = append(errs, p.deadLetterParts(ctx, parts, err)...)
					res.DeadLetter++
					continue
				}
				errs = append(errs, fmt.Errorf("complete set %q: %w", set.SetKey, err))
				continue
			}
			res.Completed++
		case expired:
			reason := &IncompleteSetError{Set: displaySet(set.SetKey), Missing: missing}
			for _, pt := range parts {
				msg := tg.Message{ID: pt.Key.Message, ChatID: pt.Key.Chat, AlbumID: pt.AlbumID, Date: pt.Date,
					Document: &tg.Document{FileName: pt.FileName, File: tg.File{Size: pt.FileSize, UniqueID: pt.UniqueID}}}
				if pt.TopicID != 0 {
					msg.IsTopicMessage, msg.ThreadID = true, pt.TopicID
				}
				if err := p.deadLetter(ctx, msg, reason, false); err != nil {
					errs = append(errs, err)
				} else {
					p.count(store.OutcomeDeadLetter)
				}
			}
			p.log.Warn("incomplete set is a dead letter", "source", set.Chat, "set", reason.Set, "parts", len(parts), "reason", reason.Missing)
			res.DeadLetter++
		default:
			res.Waiting++
		}
	}
	return res, errors.Join(errs...)
}

// deadLetterParts records every part of a set that failed for good as a
// dead letter carrying err.
func (p *Pipeline) deadLetterParts(ctx context.Context, parts []store.SourceMessage, err error) []error {
	var errs []error
	for _, pt := range parts {
		msg := tg.Message{ID: pt.Key.Message, ChatID: pt.Key.Chat, AlbumID: pt.AlbumID, Date: pt.Date,
			Document: &tg.Document{FileName: pt.FileName, File: tg.File{Size: pt.FileSize, UniqueID: pt.UniqueID}}}
		if pt.TopicID != 0 {
			msg.IsTopicMessage, msg.ThreadID = true, pt.TopicID
		}
		if dlErr := p.deadLetter(ctx, msg, err, true); dlErr != nil {
			errs = append(errs, dlErr)
		} else {
			p.count(store.OutcomeDeadLetter)
		}
	}
	return errs
}

func (p *Pipeline) completeSet(ctx context.Context, set store.PendingSet, parts []store.SourceMessage) error {
	msgs := make([]tg.Message, len(parts))
	for i, pt := range parts {
		m, err := p.message(ctx, pt.Key)
		if err != nil {
			return err
		}
		if m.Document == nil {
			return tg.Permanent(fmt.Errorf("part %s has no document any more", pt.Key))
		}
		msgs[i] = m
	}
	format := archive.ParseName(msgs[0].Document.FileName).Format
	if strings.HasPrefix(set.SetKey, "album:") {
		format = albumFormat // listed part by part
	}
	_, err := p.ingestPackage(ctx, msgs, format, msgs[0].Document.FileName)
	return err
}

// albumFormat marks a package whose parts are independent archives.
const albumFormat archive.Format = "album"

func displaySet(key string) string {
	_, name, _ := strings.Cut(key, ":")
	return name
}

// orderSet puts the parts of a set in order and says what is missing ("" when
// complete). Albums are ordered by message id and complete by definition;
// multipart sets follow archive.OrderParts (parts 1..n without holes, the
// final part when the naming scheme has one); a lone plain archive is a
// complete set of one.
func orderSet(setKey string, parts []store.SourceMessage) ([]store.SourceMessage, string) {
	if strings.HasPrefix(setKey, "album:") {
		return parts, "" // already by message id
	}
	names := make([]archive.Name, len(parts))
	for i, pt := range parts {
		names[i] = archive.ParseName(pt.FileName)
	}
	o := archive.OrderParts(names)
	if !o.Complete {
		return parts, cmp.Or(o.Reason, "incomplete")
	}
	out := make([]store.SourceMessage, len(o.Order))
	for i, idx := range o.Order {
		out[i] = parts[idx]
	}
	return out, ""
}

// SetSweeper runs Sweep periodically for one account.
type SetSweeper struct {
	p        *Pipeline
	interval time.Duration
	run      service.Runner
}

// NewSetSweeper sweeps every interval (zero: half of SetSettle, at least
// 100 ms).
func NewSetSweeper(p *Pipeline, interval time.Duration) *SetSweeper {
	interval = cmp.Or(interval, max(p.cfg.SetSettle/2, 100*time.Millisecond))
	return &SetSweeper{p: p, interval: interval}
}

// Start starts the sweeper's goroutine.
func (s *SetSweeper) Start(ctx context.Context) error {
	return s.run.StartFunc(ctx, func(ctx context.Context) {
		service.Every(ctx, s.interval, nil, func(ctx context.Context) {
			res, err := s.p.Sweep(ctx)
			if err != nil && ctx.Err() == nil {
				s.p.log.Warn("set sweep", "err", err)
			}
			if res.Completed+res.DeadLetter > 0 {
				s.p.log.Debug("set sweep", "completed", res.Completed, "dead_letters", res.DeadLetter, "waiting", res.Waiting)
			}
		})
	})
}

// Stop stops the sweeper and waits for it.
func (s *SetSweeper) Stop() { s.run.Stop() }
