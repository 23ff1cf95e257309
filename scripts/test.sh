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

# What did not run, or not fully: the closing line lists it instead of
# claiming that everything passed.
not_run=()
if [ "${CI:-}" != true ]; then
	not_run+=("CI is not true: a test whose program is missing was allowed to skip instead of failing")
fi

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

# The go-milter fork is a module of its own, which ./... does not reach:
# its tests hold the patches to upstream's behaviour (README.md there).
step "tests of the go-milter fork (third_party/go-milter)"
(cd third_party/go-milter && go vet ./... && go test -race -shuffle=on ./...)

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
else
	not_run+=("-short: the second test pass, with the long tests, did not run")
fi

step "govulncheck (says loudly when the vulnerability database is unreachable)"
rc=0
scripts/vulncheck.sh || rc=$?
case $rc in
0) ;;
3) not_run+=("govulncheck: the vulnerability database was unreachable; dependencies were NOT checked for known vulnerabilities") ;;
*) exit "$rc" ;;
esac

step "fuzz (short run of every target)"
fuzzlog=$(mktemp)
trap 'rm -f "$fuzzlog"' EXIT
scripts/fuzz.sh "${FUZZTIME:-10s}" | tee "$fuzzlog"
if n=$(grep -c '(ignored: the fuzz coordinator' "$fuzzlog"); then
	not_run+=("fuzz: $n target(s) ended in Go's coordinator deadline race (golang/go#75804), ignored: no failing input, but no clean end either")
fi

echo
if [ ${#not_run[@]} -eq 0 ]; then
	echo "all checks passed"
else
	echo "the checks that ran passed; NOT everything ran:"
	printf '  - %s\n' "${not_run[@]}"
fi
