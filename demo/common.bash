# Shared by make demo (demo/run.sh) and make demo-ib (demo/ib.sh), sourced
# from the repository's top directory.
# step N/M TEXT: the step's heading.
step() { printf '\n[%s %s] %s\n' "$DEMO" "$1" "$2"; }
# install_deps: what is missing, through tools/deps.sh (apt-get; sudo when
# not root), and a cargo that builds rsverbs; exits 1 without one.
install_deps() {
	if [ "$(id -u)" != 0 ] && command -v sudo > /dev/null; then sudo tools/deps.sh; else tools/deps.sh; fi
	if ! command -v cargo > /dev/null; then
		echo "$DEMO: building rsverbs needs cargo with Rust >= 1.95; tools/deps.sh installs Debian 12's cargo-web and rustc-web (bookworm-security) when run as root" >&2
		exit 1
	fi
	echo "ok"
}
