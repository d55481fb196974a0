#!/bin/sh
# Installs acp-bridge from its GitHub release archives, for Linux and macOS
# on amd64 and arm64 (on Windows, unzip the release's .zip instead):
#
#   curl -fsSL https://raw.githubusercontent.com/acp-bridge/acp-bridge/main/install.sh | sh
#   curl -fsSL https://raw.githubusercontent.com/acp-bridge/acp-bridge/main/install.sh | sh -s -- --version v1.2.3 --dir ~/bin
#
# It downloads the release's SHA256SUMS and the archive for this machine,
# checks the archive against its checksum (a mismatch installs nothing),
# and puts the binary in ~/.local/bin, or the directory --dir names. It
# needs no root: choose a directory you can write to.
#
# Options (or environment variables):
#   --dir DIR        ACP_BRIDGE_INSTALL_DIR   where the binary goes (default ~/.local/bin)
#   --version TAG    ACP_BRIDGE_VERSION       a release tag (default: the latest release)
#                    ACP_BRIDGE_RELEASE_URL   where the release's files are (default: the
#                                             GitHub release of TAG, or the latest one)
set -eu

repo="https://github.com/acp-bridge/acp-bridge"
dir="${ACP_BRIDGE_INSTALL_DIR:-}"
version="${ACP_BRIDGE_VERSION:-}"
base="${ACP_BRIDGE_RELEASE_URL:-}"

say() { printf 'install.sh: %s\n' "$*" >&2; }
fail() {
	say "$*"
	exit 1
}

while [ $# -gt 0 ]; do
	case "$1" in
	--dir) [ $# -ge 2 ] || fail "--dir needs a directory"; dir="$2"; shift 2 ;;
	--dir=*) dir="${1#--dir=}"; shift ;;
	--version) [ $# -ge 2 ] || fail "--version needs a release tag such as v1.2.3"; version="$2"; shift 2 ;;
	--version=*) version="${1#--version=}"; shift ;;
	-h | --help)
		sed -n '2,17p' "$0" 2>/dev/null | sed 's/^# \{0,1\}//' >&2 || true
		exit 0
		;;
	*) fail "unknown argument $1 (see --help)" ;;
	esac
done

if [ -z "$dir" ]; then
	[ -n "${HOME:-}" ] || fail "HOME is not set: say where to install with --dir DIR"
	dir="$HOME/.local/bin"
fi

case "$(uname -s)" in
Linux) os=linux ;;
Darwin) os=darwin ;;
*) fail "this script installs on Linux and macOS; for $(uname -s), download the archive from $repo/releases" ;;
esac
case "$(uname -m)" in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) fail "there is no release build for $(uname -m); build from source: go install github.com/acp-bridge/acp-bridge@latest" ;;
esac

if [ -z "$base" ]; then
	if [ -n "$version" ]; then
		base="$repo/releases/download/$version"
	else
		base="$repo/releases/latest/download"
	fi
fi

if command -v curl >/dev/null 2>&1; then
	fetch() { curl -fsSL -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
	fetch() { wget -q -O "$2" "$1"; }
else
	fail "neither curl nor wget is installed; install one, or download the archive from $repo/releases"
fi

if command -v sha256sum >/dev/null 2>&1; then
	sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
	sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
elif command -v openssl >/dev/null 2>&1; then
	sha256() { openssl dgst -sha256 -r "$1" | cut -d' ' -f1; }
else
	fail "no sha256sum, shasum or openssl to check the archive with; install one of them"
fi

tmp="$(mktemp -d 2>/dev/null || mktemp -d -t acp-bridge)"
trap 'rm -rf "$tmp"' EXIT INT TERM

fetch "$base/SHA256SUMS" "$tmp/SHA256SUMS" || fail "could not download $base/SHA256SUMS"
# A line of SHA256SUMS: the hash, two spaces, acp-bridge_VERSION_OS_ARCH.tar.gz.
line="$(grep "  acp-bridge_.*_${os}_${arch}\.tar\.gz\$" "$tmp/SHA256SUMS" | head -n 1 || true)"
[ -n "$line" ] || fail "the release at $base has no archive for $os/$arch"
want="${line%% *}"
name="${line##* }"
case "$name" in
*/* | *..*) fail "SHA256SUMS names an unexpected file: $name" ;;
esac
if [ -n "$version" ]; then
	case "$name" in
	"acp-bridge_${version#v}_${os}_${arch}.tar.gz") ;;
	*) fail "the release at $base is not $version: its archive is $name" ;;
	esac
fi

say "downloading $name"
fetch "$base/$name" "$tmp/$name" || fail "could not download $base/$name"
got="$(sha256 "$tmp/$name")"
if [ "$got" != "$want" ]; then
	fail "checksum mismatch for $name: SHA256SUMS says $want, the download is $got; nothing was installed"
fi

mkdir -p "$tmp/x"
tar -xzf "$tmp/$name" -C "$tmp/x" || fail "could not unpack $name"
bin="$tmp/x/${name%.tar.gz}/acp-bridge"
[ -f "$bin" ] || fail "$name holds no acp-bridge binary"

mkdir -p "$dir" || fail "could not create $dir; choose another directory with --dir"
# Copied beside the target, then renamed over it: a running acp-bridge
# keeps its file, and a symbolic link at the target is replaced, never
# written through.
[ ! -d "$dir/acp-bridge" ] || fail "$dir/acp-bridge is a directory; choose another directory with --dir"
rm -f "$dir/.acp-bridge.$$"
cp "$bin" "$dir/.acp-bridge.$$" || fail "could not write to $dir; choose another directory with --dir"
chmod 755 "$dir/.acp-bridge.$$"
mv -f "$dir/.acp-bridge.$$" "$dir/acp-bridge"

say "installed $("$dir/acp-bridge" --version 2>/dev/null || echo acp-bridge) as $dir/acp-bridge"
case ":${PATH:-}:" in
*":$dir:"*) ;;
*) say "$dir is not on your PATH: add it (export PATH=\"$dir:\$PATH\"), or give editors the full path" ;;
esac
