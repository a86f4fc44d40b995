package tdlib

import (
	"stashd/tg"

	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Config configures one account's TDLib client.
type Config struct {
	// Account names the account in logs and errors. Required.
	Account string
	// StateDir is the account's own TDLib directory; the database lives in
	// StateDir/database and downloaded files in StateDir/files, both created
	// with mode 0700. Two clients must never share it. Required.
	StateDir string
	// APIID and APIHash identify the application to Telegram
	// (my.telegram.org). Required. The hash is a secret: it is never logged.
	APIID   int32
	APIHash string
	// DatabaseEncryptionKey encrypts TDLib's database; nil means none. A
	// database created with a key cannot be opened without it.
	DatabaseEncryptionKey []byte
	// UseTestDC connects to Telegram's test servers instead of production.
	UseTestDC bool
	// SystemLanguageCode is reported to Telegram; empty means "en".
	SystemLanguageCode string
	// DeviceModel is shown in the account's list of sessions; empty means
	// "stashd".
	DeviceModel string
	// SystemVersion is shown in the account's list of sessions; empty means
	// the operating system's name (runtime.GOOS).
	SystemVersion string
	// ApplicationVersion is shown in the account's list of sessions; empty
	// means "dev".
	ApplicationVersion string
	// TDLibLogVerbosity sets TDLib's own log level (1 errors, 2 warnings,
	// 3 info, 4 debug, 5 verbose); zero or less means 1. TDLib's log is
	// process-wide and set once, before the first client: the first client
	// started sets it for all, later clients' settings are ignored (with a
	// warning).
	TDLibLogVerbosity int
	// TDLibLogFile is where TDLib writes its own log; empty means stderr.
	// Process-wide, like TDLibLogVerbosity.
	TDLibLogFile string
	// RequestTimeout bounds every request; zero, or more than
	// MaxRequestTimeout, means MaxRequestTimeout. A request past it fails
	// with tg.ErrRequestTimeout (retryable).
	RequestTimeout time.Duration
	// Authorizer answers the authorization states that need a person (phone
	// number, login code, password). Nil means NotLoggedIn: a client whose
	// account is not logged in fails to start with a *NotLoggedInError.
	Authorizer Authorizer
	// Proxy, when set, is added and enabled (addProxy) right after TDLib's
	// parameters, before any connection is made. Nil: a direct
	// connection. Its password or secret is never logged.
	Proxy *tg.Proxy
	// QRLogin logs in by QR code instead of a phone number: in
	// StateWaitPhoneNumber the client sends requestQrCodeAuthentication,
	// and the Authorizer is shown each StateWaitOtherDeviceConfirmation
	// with the link to draw (its answer is ignored: a logged-in app on
	// another device confirms). A 2FA password is still asked after.
	QRLogin bool
	// Logger receives the adapter's log lines, with the key "account" added;
	// nil means slog.Default().
	Logger *slog.Logger
}

// MaxRequestTimeout is the longest any request waits for TDLib's answer:
// below go-tdlib's own 60-second response timeout, at which its receiver
// can lose the reply or panic on a closed channel, and TDLib may hold a
// request that long under FLOOD_WAIT.
const MaxRequestTimeout = 50 * time.Second

// withDefaults returns cfg with every zero field that has a default filled
// in.
func (cfg Config) withDefaults() Config {
	if cfg.RequestTimeout <= 0 || cfg.RequestTimeout > MaxRequestTimeout {
		cfg.RequestTimeout = MaxRequestTimeout
	}
	cfg.SystemLanguageCode = cmp.Or(cfg.SystemLanguageCode, "en")
	cfg.DeviceModel = cmp.Or(cfg.DeviceModel, "stashd")
	cfg.SystemVersion = cmp.Or(cfg.SystemVersion, runtime.GOOS)
	cfg.ApplicationVersion = cmp.Or(cfg.ApplicationVersion, "dev")
	cfg.TDLibLogVerbosity = max(cfg.TDLibLogVerbosity, 1)
	if cfg.Authorizer == nil {
		cfg.Authorizer = NotLoggedIn(cfg.Account)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("account", cfg.Account)
	return cfg
}

func (cfg Config) validate() error {
	var errs []error
	if cfg.Account == "" {
		errs = append(errs, errors.New("account name is empty"))
	}
	if cfg.StateDir == "" {
		errs = append(errs, errors.New("state directory is empty"))
	}
	if cfg.APIID == 0 {
		errs = append(errs, errors.New("api_id is zero"))
	}
	if cfg.APIHash == "" {
		errs = append(errs, errors.New("api_hash is empty"))
	}
	return errors.Join(errs...)
}

// DatabaseDir is where TDLib keeps the account's database.
func (cfg Config) DatabaseDir() string { return filepath.Join(cfg.StateDir, "database") }

// FilesDir is where TDLib keeps the account's downloaded files.
func (cfg Config) FilesDir() string { return filepath.Join(cfg.StateDir, "files") }

// makeDirs creates the state directories, readable by their owner only:
// they hold the account's session key.
func (cfg Config) makeDirs() error {
	for _, dir := range []string{cfg.StateDir, cfg.DatabaseDir(), cfg.FilesDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create state directory: %w", err)
		}
	}
	return nil
}

// TDLib's authorization states, as TDLib names them.
const (
	StateWaitTdlibParameters         = "authorizationStateWaitTdlibParameters"
	StateWaitPhoneNumber             = "authorizationStateWaitPhoneNumber"
	StateWaitEmailAddress            = "authorizationStateWaitEmailAddress"
	StateWaitEmailCode               = "authorizationStateWaitEmailCode"
	StateWaitCode                    = "authorizationStateWaitCode"
	StateWaitOtherDeviceConfirmation = "authorizationStateWaitOtherDeviceConfirmation"
	StateWaitRegistration            = "authorizationStateWaitRegistration"
	StateWaitPassword                = "authorizationStateWaitPassword"
	StateReady                       = "authorizationStateReady"
	StateLoggingOut                  = "authorizationStateLoggingOut"
	StateClosing                     = "authorizationStateClosing"
	StateClosed                      = "authorizationStateClosed"
)

// AuthState is an authorization state that needs an answer from a person.
type AuthState struct {
	// Account is the account logging in.
	Account string
	// Name is TDLib's name of the state: StateWaitPhoneNumber, StateWaitCode
	// or StateWaitPassword.
	Name string
	// CodeType says how Telegram delivered the login code (TDLib's
	// authenticationCodeType, e.g. "authenticationCodeTypeTelegramMessage");
	// empty outside StateWaitCode.
	CodeType string
	// Link is the tg://login link to show as a QR code in
	// StateWaitOtherDeviceConfirmation; empty in other states.
	Link string
	// PasswordHint is the hint of the account's 2FA password; empty outside
	// StateWaitPassword or when the account set none.
	PasswordHint string
	// Retry is the error TDLib gave to the previous answer in this state
	// (a wrong code, say); nil on the first ask.
	Retry error
}

// Authorizer supplies what a login needs in state: the phone number in
// StateWaitPhoneNumber, the code Telegram sent in StateWaitCode, the 2FA
// password in StateWaitPassword. The answer is a secret and is never
// logged. Returning an error abandons the login; the client is closed and New
// returns that error. It is called while New runs, one state at a time, and
// may block until ctx is done (New's context, cancelled also when TDLib
// closes or the client is closed).
type Authorizer func(ctx context.Context, state AuthState) (string, error)

// NotLoggedInError is New's error for an account that needs an interactive
// login: the daemon never asks a person, `stashd login` does.
type NotLoggedInError struct {
	Account string
	// State is the authorization state TDLib was in, e.g.
	// StateWaitPhoneNumber.
	State string
}

// AuthorizationState is the state TDLib was in.
func (e *NotLoggedInError) AuthorizationState() string { return e.State }

// Is makes the error match tg.ErrNotLoggedIn.
func (e *NotLoggedInError) Is(target error) bool { return target == tg.ErrNotLoggedIn }

func (e *NotLoggedInError) Error() string {
	return fmt.Sprintf("account %s is not logged in (%s): run stashd login --account %s", e.Account, e.State, e.Account)
}

// NotLoggedIn is the Authorizer of a non-interactive process: it answers
// every state with a *NotLoggedInError for account.
func NotLoggedIn(account string) Authorizer {
	return func(_ context.Context, state AuthState) (string, error) {
		return "", &NotLoggedInError{Account: account, State: state.Name}
	}
}
