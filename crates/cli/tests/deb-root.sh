#!/bin/sh
# deb-root.sh DEB OUT: installs the package DEB in a throwaway root, shapes a link with it,
# removes and purges it, and writes what it saw at each step under OUT (crates/cli/tests/deb.rs
# reads it). Run as root in a kernel with veth and cake (`unbloat-lab kernel -- sh deb-root.sh ...`, or the library as deb.rs calls it:
# the host's, or User-Mode Linux).
#
# The throwaway root is an overlay over this machine's own root in a private mount and network
# namespace: every write of dpkg and the maintainer scripts lands in the overlay's upper
# directory (a tmpfs), so what install and purge leave behind is exactly that directory's
# content, and nothing reaches the real root. /run is a tmpfs of its own with
# /run/systemd/system in it, so the maintainer scripts take the path of a machine that runs
# systemd, and `systemctl` (first in PATH) only logs what it is asked to do to a running
# systemd; `systemctl --root=...` (enabling, offline) is the real one.
set -eu

if [ "${DEB_ROOT_NS:-}" != 1 ]; then
	DEB_ROOT_NS=1 exec unshare --mount --net --propagation private sh "$0" "$@"
fi

deb=$1
out=$2
# User-Mode Linux has overlayfs as a module, in its own tree (kernel/uml.rs loads only qdiscs').
if ! grep -qw overlay /proc/filesystems; then
	modprobe overlay 2>/dev/null || insmod "/usr/lib/uml/modules/$(uname -r)/kernel/fs/overlayfs/overlay.ko"
fi
t=$out/mnt
mkdir -p "$t"
mount -t tmpfs tmpfs "$t"
mkdir "$t/upper" "$t/work" "$t/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$t/upper,workdir=$t/work" "$t/root"
root=$t/root
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t sysfs sysfs "$root/sys"
mount -t tmpfs tmpfs "$root/run"
mount -t tmpfs tmpfs "$root/tmp"
mkdir -p "$root/run/systemd/system" "$root/run/fake"
cat >"$root/run/fake/systemctl" <<'EOF'
#!/bin/sh
echo "systemctl $*" >>/run/systemctl.log
case " $* " in
*" --root="* | *" --version "*) exec /usr/bin/systemctl "$@" ;;
*" is-enabled "*) echo enabled ;;
*" is-active "*) exit 3 ;;
esac
exit 0
EOF
chmod 755 "$root/run/fake/systemctl"
# A policy-rc.d that forbids every action (Docker's images have one) would hide what the
# scripts ask of systemd: one that allows everything is mounted over it (not written).
if [ -e "$root/usr/sbin/policy-rc.d" ]; then
	printf '#!/bin/sh\nexit 0\n' >"$root/run/fake/policy-rc.d"
	chmod 755 "$root/run/fake/policy-rc.d"
	mount --bind "$root/run/fake/policy-rc.d" "$root/usr/sbin/policy-rc.d"
fi
cp "$deb" "$root/tmp/unbloat.deb"

inside() {
	chroot "$root" env -i PATH=/run/fake:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 MANWIDTH=80 "$@"
}
upper() {
	(cd "$t/upper" && find . -mindepth 1 -printf '%y %p\n' | sort) >"$out/$1"
}
links() {
	inside sh -c 'find /etc/systemd /var/lib/systemd -name "*unbloat*" -printf "%y %p -> %l\n" 2>/dev/null | sort' >"$out/$1"
}

# A WAN link to shape: a veth pair in this private network namespace.
ip link set lo up
ip link add wan0 type veth peer name isp0
ip link set wan0 up
ip link set isp0 up

upper upper-before
inside dpkg -i /tmp/unbloat.deb >"$out/install.log" 2>&1
inside dpkg -L unbloat >"$out/files"
upper upper-installed
links links-installed
inside sh -c 'ls -A /etc/unbloat' >"$out/etc-unbloat" 2>&1 || true
inside unbloat --version >"$out/version"
inside man -w unbloat unbloat-daemon >"$out/man-paths"
inside man unbloat >"$out/man-unbloat" 2>"$out/man-unbloat.err"
inside bash -c '. /usr/share/bash-completion/bash_completion
	_completion_loader unbloat
	complete -p unbloat
	COMP_WORDS=(unbloat set-); COMP_CWORD=1; COMP_LINE="unbloat set-"; COMP_POINT=${#COMP_LINE}
	_unbloat unbloat set- unbloat
	printf "%s\n" "${COMPREPLY[@]}"' >"$out/bash-completion" 2>&1

# Installing started nothing: the daemon's unit was asked for no start, and no unbloat process
# of this root runs.
cp "$root/run/systemctl.log" "$out/systemctl-installed" 2>/dev/null || : >"$out/systemctl-installed"

# Shaping started by hand with the installed binary: removing and purging must leave it.
inside unbloat start wan0 --down 20mbit --up 5mbit >"$out/start.log" 2>&1
tc qdisc show dev wan0 >"$out/qdisc-started"
inside dpkg -r unbloat >"$out/remove.log" 2>&1
tc qdisc show dev wan0 >"$out/qdisc-removed"
inside dpkg -P unbloat >"$out/purge.log" 2>&1
tc qdisc show dev wan0 >"$out/qdisc-purged"
inside sh -c 'ls /run/unbloat/shaped' >"$out/records-purged" 2>&1 || true
cp "$root/run/systemctl.log" "$out/systemctl-all"
upper upper-purged
links links-purged
inside sh -c 'ls -d /etc/unbloat' >"$out/etc-unbloat-purged" 2>&1 || true
echo done >"$out/finished"
