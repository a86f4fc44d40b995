// Package config reads stashd's configuration: a TOML file, then STASHD_*
// environment variables, then command-line flags, each overriding the one
// before, with the defaults documented on Config's fields and in README.md.
// Validation names the offending field in one line. It owns parsing only:
// it starts nothing and talks to nothing.
package config
