//go:build tools

package tools

import _ "golang.org/x/vuln/cmd/govulncheck"
