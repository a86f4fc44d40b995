package config

import (
	"strings"
	"testing"
)

func TestCaptionAndSilentDefaults(t *testing.T) {
	t.Parallel()
	c, err := Load(write(t, good), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Silent || c.Caption != "{name} ({parts})" {
		t.Errorf("silent = %v, caption = %q; want true and the default template", c.Silent, c.Caption)
	}
	c, err = Load(write(t, "silent = false\ncaption = \"{name} from {source}\"\n"+good), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Silent || c.Caption != "{name} from {source}" {
		t.Errorf("silent = %v, caption = %q; want the file's values", c.Silent, c.Caption)
	}
}

func TestCaptionUnknownPlaceholderRejected(t *testing.T) {
	t.Parallel()
	_, err := Load(write(t, "caption = \"{name} {sizes}\"\n"+good), noEnv, nil)
	if err == nil {
		t.Fatal("a caption with {sizes} was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "caption") || !strings.Contains(msg, "{sizes}") || strings.Contains(msg, "\n") {
		t.Errorf("error %q: want one line naming caption and {sizes}", msg)
	}
}
