package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	qrcode "github.com/skip2/go-qrcode"
	"golang.org/x/term"

	"stashd/internal/config"
	"stashd/tg"
	"stashd/tg/tdlib"
)

const loginHelp = `Logs a Telegram account in, once, before the daemon runs it. It asks on
the terminal for the phone number, the login code Telegram sends, and the
account's two-step verification password if it has one (not echoed).

With --qr it logs in by QR code instead, with no phone number or code: it
draws a QR code in the terminal; scan it with a Telegram app where the
account is logged in (Settings > Devices > Link Desktop Device). The code
is redrawn when Telegram renews it; the two-step password is asked after.

The session is stored in the account's own TDLib directory under the data
directory (data_dir/accounts/NAME, mode 0700); the daemon reuses it.

api_id and api_hash come from the configuration (--config, STASHD_API_ID,
STASHD_API_HASH, or the flags): create them at https://my.telegram.org under
"API development tools". Nothing you type is logged.`

func runLogin(args []string) int {
	fs := newFlagSet("login", "login --account NAME [--config FILE] [flags]", loginHelp)
	account := fs.String("account", "", "name of the account to log in (as in the configuration)")
	configPath := fs.String("config", os.Getenv("STASHD_CONFIG"), "TOML configuration file (env STASHD_CONFIG)")
	qr := fs.Bool("qr", false, "log in by scanning a QR code with a logged-in Telegram app instead of a phone number and code")
	config.RegisterFlags(fs, "data_dir", "api_id", "api_hash", "proxy", "log_level", "log_format")
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	cfg, err := loginSettings(*configPath, os.Getenv, fs, *account)
	if err != nil {
		printErr(os.Stderr, "login", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := prepareDataDir(cfg.DataDir, false); err != nil {
		fmt.Fprintf(os.Stderr, "stashd login: %v\n", err)
		return 1
	}
	log := configuredLogger(cfg)
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	var proxy *tg.Proxy
	if a, err := cfg.Account(*account); err == nil {
		if px, ok := cfg.ProxyOf(a); ok {
			proxy = &px
		}
	}
	c, err := tdlib.New(ctx, tdlib.Config{Proxy: proxy,
		Account: *account, StateDir: filepath.Join(cfg.DataDir, "accounts", *account),
		APIID: cfg.APIID, APIHash: cfg.APIHash, Logger: log,
		Authorizer: terminalAuthorizer(os.Stdin, os.Stderr, readPassword), QRLogin: *qr,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd login: %v\n", err)
		return 1
	}
	defer c.Close()
	me, err := c.GetMe(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd login: logged in, but getMe failed: %v\n", err)
		return 1
	}
	premium := "no"
	if me.IsPremium {
		premium = "yes (larger uploads)"
	}
	fmt.Printf("account %s is logged in as %s (user id %d, Premium: %s)\n", *account, displayUser(me.Username), me.ID, premium)
	return 0
}

// loginSettings loads what login needs and checks it before anything is
// asked: the --account flag, the credentials, and that the configuration
// has that account.
func loginSettings(path string, getenv func(string) string, fs *flag.FlagSet, account string) (config.Config, error) {
	switch {
	case account == "":
		return config.Config{}, errors.New("--account: required (the account name, as in the configuration)")
	case !validAccountName(account):
		return config.Config{}, fmt.Errorf("--account: %q must be letters, digits, '-' or '_'", account)
	}
	cfg, err := config.LoadMode(path, getenv, fs, config.Login)
	if err != nil {
		return cfg, err
	}
	if _, err := cfg.Account(account); err != nil {
		return cfg, fmt.Errorf("--account: %w", err)
	}
	return cfg, nil
}

func validAccountName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func displayUser(username string) string {
	if username == "" {
		return "a user without a username"
	}
	return "@" + username
}

// readPassword reads a line from the terminal without echo.
func readPassword() (string, error) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", errors.New("the password prompt needs a terminal")
	}
	b, err := term.ReadPassword(fd)
	fmt.Fprintln(os.Stderr)
	return string(b), err
}

// terminalAuthorizer answers TDLib's login states with what a person types:
// the phone number and the code as lines of in, the password through
// password (no echo).
func terminalAuthorizer(in io.Reader, out io.Writer, password func() (string, error)) tdlib.Authorizer {
	lines := bufio.NewReader(in)
	readLine := func() (string, error) {
		s, err := lines.ReadString('\n')
		s = strings.TrimSpace(s)
		if err != nil && (s == "" || err != io.EOF) {
			return "", fmt.Errorf("read answer: %w", err)
		}
		return s, nil
	}
	return func(ctx context.Context, st tdlib.AuthState) (string, error) {
		if st.Retry != nil {
			fmt.Fprintf(out, "Telegram refused that: %v\n", st.Retry)
		}
		switch st.Name {
		case tdlib.StateWaitPhoneNumber:
			fmt.Fprintf(out, "Phone number of account %s (international format, e.g. +4915112345678): ", st.Account)
			return readLine()
		case tdlib.StateWaitCode:
			fmt.Fprintf(out, "Login code (sent %s): ", codeDelivery(st.CodeType))
			return readLine()
		case tdlib.StateWaitOtherDeviceConfirmation:
			code, err := qrcode.New(st.Link, qrcode.Medium)
			if err != nil {
				return "", fmt.Errorf("draw the QR code: %w", err)
			}
			fmt.Fprintf(out, "\nScan this QR code with a Telegram app where the account is logged in\n"+
				"(Settings > Devices > Link Desktop Device), to log account %s in:\n\n%s\n", st.Account, code.ToSmallString(false))
			return "", nil
		case tdlib.StateWaitPassword:
			hint := ""
			if st.PasswordHint != "" {
				hint = fmt.Sprintf(" (hint: %s)", st.PasswordHint)
			}
			fmt.Fprintf(out, "Two-step verification password%s: ", hint)
			return password()
		}
		return "", fmt.Errorf("stashd login cannot answer %s", st.Name)
	}
}

func codeDelivery(codeType string) string {
	switch codeType {
	case "authenticationCodeTypeTelegramMessage":
		return "as a message in your Telegram apps"
	case "authenticationCodeTypeSms":
		return "by SMS"
	case "authenticationCodeTypeCall", "authenticationCodeTypeFlashCall", "authenticationCodeTypeMissedCall":
		return "by a phone call"
	case "authenticationCodeTypeFragment":
		return "through fragment.com"
	}
	return "by Telegram"
}
