// Package app is what every long-running banlieue role shares: the common flags of the
// command line, logging, and a controller-runtime manager with leader election, health
// endpoints and metrics configured the same way in each role.
package app
