# shellcheck shell=bash
# The Go release every go command of the project runs: the toolchain line of go.mod. A machine
# ignores that line on its own (its go env says GOTOOLCHAIN=local), so each script that starts a
# go command sources this file (or exports the same value) and the go command fetches this
# release from the module proxy the first time. test/release checks that every script that runs
# go gets it and that it agrees with go.mod.
export GOTOOLCHAIN=go1.27.3
