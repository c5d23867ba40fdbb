// Package p stands for an upstream package.
package p

import (
	"fmt"
	str "strings"
)

type T struct{}

// F formats a.
func F(a int) string {
	// Upstream's comments do not count.
	s := fmt.Sprint(a)

	return s
}

func (t *T) M(s string) string {
	return str.ToUpper(s)
}

func G() int { return 1 }

func Pair(a int) []int {
	return []int{
		a,
		a + 1,
	}
}

func Call(a int) string {
	return fmt.Sprint(
		a,
		a+1,
	)
}
