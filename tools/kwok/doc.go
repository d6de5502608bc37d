// Package kwok pins sigs.k8s.io/kwok's controller (a `tool` of this module)
// for enka's control plane with simulated nodes: kwok drives the nodes and
// their Pods through their lifecycle (Ready, Running, Job Pods Succeeded,
// deletion) by the Stage documents shipped in its module, with no container
// runtime. Nothing here is upstream source: `go build` fetches it from the Go
// module proxy.
package kwok
