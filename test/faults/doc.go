// Package faults holds capgate's fault-injection tests: upstream handlers
// that are down, slow, resetting or answering garbage, resource bounds under
// failure, and graceful shutdown with requests in flight.
package faults
