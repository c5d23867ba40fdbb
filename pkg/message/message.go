// Package message bounds the text the manager writes into conditions and events. Much of it
// embeds what a tenant wrote (annotation values, a problem quoting one), which the API server
// bounds only by the object's total annotation size: copied into every condition and event, it
// would multiply.
package message

import "unicode/utf8"

// MaxLen is the most bytes of a condition message or event note that embeds user text: far below
// the API's 32768 for a condition message, and upstream Kueue's 1024 for an event note.
const MaxLen = 1024

// ellipsis marks a cut message.
const ellipsis = "…"

// Bound returns s cut to at most MaxLen bytes, on a UTF-8 boundary, ending in an ellipsis when
// cut.
func Bound(s string) string {
	return BoundTo(s, MaxLen)
}

// BoundTo is Bound with a limit of n bytes. A limit too small for the ellipsis cuts without it.
func BoundTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < len(ellipsis) {
		return cut(s, max(n, 0))
	}
	return cut(s, n-len(ellipsis)) + ellipsis
}

// cut is the longest prefix of s of at most n bytes that does not split a rune.
func cut(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
