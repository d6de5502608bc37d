// Package upstream pins upstream's ansible-operator (a `tool` of this module)
// so `make bench` can run it side by side with enka. Nothing here is
// upstream source: `go build` fetches it from the Go module proxy.
//
// The module exists because `go install …@version` asks the proxy for the
// module's version list to check deprecations, and the proxy answers 403 for
// that list; a pinned requirement needs only the version itself.
package upstream
