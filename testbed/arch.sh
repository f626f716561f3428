#!/bin/bash
# The architecture axis of the test bed (docs/architectures.md). Sourced by
# testbed/vm.sh, testbed/apt.sh and the ctest drivers; sets, from
# RSVERBS_ARCH (Debian's name or the toolchain's: amd64|x86_64,
# arm64|aarch64, ppc64el|powerpc64le, s390x; default the host's):
#   ARCH_DEB      Debian's name (apt, debootstrap, the .deb files)
#   ARCH_RUST     the toolchain's name: Rust's, zig's and the Makefile's ARCH
#   ARCH_FOREIGN  1 when it is not the host's architecture
#   ARCH_KFLAVOUR the flavour of Debian's kernel (linux-image-FLAVOUR)
#   ARCH_BUILD    where make lib ARCH=... puts librsverbs.so.1 (relative)
#   ARCH_QEMU     qemu-system binary and machine arguments (an array)
#   ARCH_CONSOLE  the kernel's console=
#   ARCH_NET_DEV  qemu's virtio-net device for the bus of this machine
case ${RSVERBS_ARCH:-$(dpkg --print-architecture)} in
amd64 | x86_64) ARCH_DEB=amd64 ARCH_RUST=x86_64 ARCH_KFLAVOUR=amd64 ARCH_CONSOLE=ttyS0
	ARCH_NET_DEV=virtio-net-pci
	# q35: its virtio devices use MSI, which saves the ACPI interrupt link
	# setup of the default i440fx machine at every boot (testbed/README.md).
	ARCH_QEMU=(qemu-system-x86_64 -machine q35 -accel tcg,thread=multi -cpu max) ;;
arm64 | aarch64) ARCH_DEB=arm64 ARCH_RUST=aarch64 ARCH_KFLAVOUR=arm64 ARCH_CONSOLE=ttyAMA0
	ARCH_NET_DEV=virtio-net-pci
	# cortex-a72, not max: emulated pointer authentication makes max 2-3
	# times slower to boot and ~30 times slower on RDMA traffic (testbed/README.md).
	ARCH_QEMU=(qemu-system-aarch64 -machine virt -accel tcg,thread=multi -cpu cortex-a72) ;;
ppc64el | powerpc64le) ARCH_DEB=ppc64el ARCH_RUST=powerpc64le ARCH_KFLAVOUR=powerpc64le ARCH_CONSOLE=hvc0
	ARCH_NET_DEV=virtio-net-pci
	# The cap-* settings silence "TCG doesn't support requested feature";
	# x-vof=on boots without SLOF, about 5 s faster (testbed/README.md).
	ARCH_QEMU=(qemu-system-ppc64 -machine pseries,cap-cfpc=broken,cap-sbbc=broken,cap-ibs=broken,cap-ccf-assist=off,x-vof=on
		-accel tcg,thread=multi -cpu power9) ;;
s390x) ARCH_DEB=s390x ARCH_RUST=s390x ARCH_KFLAVOUR=s390x ARCH_CONSOLE=ttysclp0
	ARCH_NET_DEV=virtio-net-ccw
	ARCH_QEMU=(qemu-system-s390x -machine s390-ccw-virtio -accel tcg,thread=multi -cpu max) ;;
*)
	printf 'testbed: RSVERBS_ARCH=%s: not one of amd64 arm64 ppc64el s390x\n' "$RSVERBS_ARCH" >&2
	exit 2
	;;
esac
ARCH_FOREIGN=0
[[ $ARCH_DEB == "$(dpkg --print-architecture)" ]] || ARCH_FOREIGN=1
ARCH_BUILD=build
((ARCH_FOREIGN == 0)) || ARCH_BUILD=build/$ARCH_RUST
# The Debian package holding ARCH_QEMU[0].
arch_qemu_package() {
	case $ARCH_DEB in
	amd64) echo qemu-system-x86 ;;
	arm64) echo qemu-system-arm ;;
	ppc64el) echo qemu-system-ppc ;;
	s390x) echo qemu-system-misc ;;
	esac
}
