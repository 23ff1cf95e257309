#!/usr/bin/env bash
# Builds the Debian package: dist/bulkmilter_VERSION_ARCH.deb (or into $DIST).
# The daemon is built here (static, -trimpath); the package is assembled by
# nfpm, pinned and run with `go run`, so nfpm stays out of go.mod and out of
# the daemon's dependencies. What goes where: packaging/deb/nfpm.yaml.
#
#   scripts/build-deb.sh                     version from git: 0.0~gitYYYYMMDDhhmmss.SHA
#   VERSION=1.2.3 scripts/build-deb.sh       a release
#   GOARCH=arm64 scripts/build-deb.sh        another architecture
set -euo pipefail
cd "$(dirname "$0")/.."

nfpm=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
dist="${DIST:-dist}"

if [ -z "${VERSION:-}" ]; then
	if tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
		VERSION="${tag#v}"
	else
		VERSION="0.0~git$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S).$(git rev-parse --short=12 HEAD)"
	fi
fi
ARCH="${GOARCH:-$(go env GOARCH)}"
# Debian's names for Go's architectures where they differ.
case "$ARCH" in
	386) ARCH=i386 ;;
	arm) ARCH=armhf ;;
	ppc64le) ARCH=ppc64el ;;
esac

# bin/ is ignored by git; nfpm.yaml takes the binary from there.
trap 'rm -rf bin/deb' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/bulkmilter/bulkmilter/internal/cli.version=$VERSION" -o bin/deb/milterd ./cmd/milterd

mkdir -p "$dist"
export VERSION ARCH
go run "$nfpm" package --config packaging/deb/nfpm.yaml --packager deb --target "$dist/"
echo "built $dist/bulkmilter_${VERSION}_${ARCH}.deb"
