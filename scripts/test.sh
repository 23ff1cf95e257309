#!/usr/bin/env bash
# The whole test suite: the README's second quick-start command, and what CI
# runs through .ci/run. It installs the programs the integration tests start
# (redis-server, Postfix, Dovecot, miltertest, promtool, ...) when they are
# missing, then runs the checks. Under CI=true a test whose program is
# missing fails instead of skipping.
#
#   scripts/test.sh            everything (about 15-20 minutes on 2 cores)
#   scripts/test.sh -short     only the race-detector pass, without the long tests
set -euo pipefail
cd "$(dirname "$0")/.."

short=""
[ "${1:-}" = "-short" ] && short="-short"

step() { printf '\n== %s\n' "$*"; }

step "dependencies"
scripts/install-test-deps.sh

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^testdata/'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Two passes: every test under the race detector except the long
# single-threaded ones (corpus sweeps, statistical property tests, the
# lexicon rebuild), which skip under -short; then everything without the
# race detector, which runs those long tests at full speed. The daemon's
# end-to-end tests are in cmd/milterd (with the check that the daemon
# links no lab code); the lab's, with the accuracy gate TestEvalCI
# ("bulklab eval -ci -check"), the bench smoke test and the soak, are in
# cmd/bulklab.
step "tests (race detector, shuffled, -short)"
go test -race -shuffle=on -short -timeout 20m ./...

if [ -z "$short" ]; then
	step "tests (all, shuffled, including the long ones)"
	go test -shuffle=on -timeout 20m ./...
fi

step "govulncheck (says loudly when the vulnerability database is unreachable)"
scripts/vulncheck.sh

step "fuzz (short run of every target)"
scripts/fuzz.sh "${FUZZTIME:-10s}"

echo
echo "all checks passed"
