package tgsim

import "unicode/utf16"

// CaptionLimit is Telegram's caption length limit for an account without
// Premium (the option message_caption_length_max), in UTF-16 code units
// as TDLib counts a formattedText's length.
const CaptionLimit = 1024

// captionTooLong reports whether caption exceeds CaptionLimit: TDLib then
// refuses sendMessage with 400 "Message caption is too long" before
// anything is sent.
func captionTooLong(caption string) bool {
	n := 0
	for _, r := range caption {
		if w := utf16.RuneLen(r); w > 0 {
			n += w
		} else {
			n++
		}
	}
	return n > CaptionLimit
}
