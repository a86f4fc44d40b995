package tdlib

import (
	"fmt"
	"log/slog"
	"sync"
)

// logConfig configures TDLib's own log once per process. The log is
// process-wide, and td_execute shares its result buffer with td_receive:
// setting it while clients receive could hand a receiver the wrong answer.
// So the first client's settings are applied before that client exists,
// and later clients only learn that theirs were ignored.
type logConfig struct {
	once sync.Once
	// exec runs a request with td_execute.
	exec func(request) error
	err  error
	// verbosity and file are what was applied.
	verbosity int
	file      string
}

// configure applies cfg's TDLib log settings the first time it is called
// and returns that first call's error every time.
func (l *logConfig) configure(cfg Config) error {
	first := false
	l.once.Do(func() {
		first = true
		l.verbosity, l.file = cfg.TDLibLogVerbosity, cfg.TDLibLogFile
		if err := l.exec(setLogVerbosityLevelRequest(cfg.TDLibLogVerbosity)); err != nil {
			l.err = fmt.Errorf("set TDLib log verbosity: %w", err)
			return
		}
		if err := l.exec(setLogStreamRequest(cfg.TDLibLogFile)); err != nil {
			l.err = fmt.Errorf("set TDLib log stream: %w", err)
		}
	})
	if !first && l.err == nil && (cfg.TDLibLogVerbosity != l.verbosity || cfg.TDLibLogFile != l.file) && cfg.Logger != nil {
		cfg.Logger.Warn("TDLib's log is configured once per process; this client's log settings are ignored",
			slog.Int("verbosity", l.verbosity), slog.String("file", l.file))
	}
	return l.err
}
