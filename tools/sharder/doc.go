// Package sharder pins timebertt/kubernetes-controller-sharding's sharder (a
// `tool` of this module) for enka's sharding test and benchmark: the sharder
// assigns custom resources to enka replicas over a hash ring of shard
// Leases. Nothing here is upstream source: `go build` fetches it from the Go
// module proxy.
package sharder
