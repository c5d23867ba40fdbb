// Pins govulncheck; built into bin/ by hack/build-tool.sh.
module github.com/kueue-timeshare/kueue-timeshare/hack/tools/govulncheck

go 1.26.0

require golang.org/x/vuln v1.8.0

require (
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/telemetry v0.0.0-20260908163034-4bcc4b2ee518 // indirect
	golang.org/x/tools v0.50.0 // indirect
)
