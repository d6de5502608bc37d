// Package operatorsdk pins operator-sdk (a `tool` of this module) so the
// scaffold test can generate an Ansible project exactly as a user would.
// Nothing here is upstream source: `go build` fetches it from the Go module
// proxy.
package operatorsdk
