# Sourced by scripts/openwrt/package, package-luci, check and check-luci: what the packages and
# their checks share, from any directory.
# The container is what OpenWrt's scripts/ipkg-build writes and opkg-lede reads: a gzip'd tar (not
# an ar archive, as Debian's .deb and the ipkg of old) of ./debian-binary ("2.0"),
# ./data.tar.gz and ./control.tar.gz, each member owned by root, in that order. Everything is
# stamped with the commit's time (SOURCE_DATE_EPOCH), so the same input gives the same bytes.

# The package's version: the workspace's, release 1.
ipk_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ipk_version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ipk_root/Cargo.toml" | head -1)-1
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$ipk_root" log -1 --format=%ct 2>/dev/null || echo 0)}

ipk_tarball() { # DIR OUT.tar.gz: DIR's contents as ./..., root-owned, sorted, stamped
  tar --format=gnu --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$1" -cf - . | gzip -n -9 >"$2"
}

ipk_pack() { # DATA CONTROL OUT.ipk
  local pkg
  pkg=$(mktemp -d)
  echo 2.0 >"$pkg/debian-binary"
  ipk_tarball "$1" "$pkg/data.tar.gz"
  ipk_tarball "$2" "$pkg/control.tar.gz"
  mkdir -p "$(dirname "$3")"
  tar --format=gnu --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$pkg" -cf - ./debian-binary ./data.tar.gz ./control.tar.gz | gzip -n -9 >"$3"
  rm -rf "$pkg"
}

ipk_open() { # IPK DIR: checks the container as opkg reads it and unpacks it into DIR/data and
  # DIR/control; a fault goes to the caller's fail().
  local members
  members=$(tar -tzf "$1" | tr '\n' ' ') || fail "not a gzip'd tar"
  [ "$members" = "./debian-binary ./data.tar.gz ./control.tar.gz " ] ||
    fail "members are '$members', not ./debian-binary ./data.tar.gz ./control.tar.gz"
  tar -xzf "$1" -C "$2"
  [ "$(cat "$2/debian-binary")" = 2.0 ] || fail "debian-binary is not 2.0"
  mkdir "$2/data" "$2/control"
  tar -xzf "$2/data.tar.gz" -C "$2/data"
  tar -xzf "$2/control.tar.gz" -C "$2/control"
}

ipk_field() { # DIR NAME: the control field NAME of the package ipk_open unpacked into DIR
  sed -n "s/^$2: //p" "$1/control/control"
}
