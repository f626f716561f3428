#!/bin/bash
# The architecture axis of the test bed (docs/architectures.md). Sourced by
# testbed/vm.sh, testbed/apt.sh and the ctest drivers; sets, from
# RSVERBS_ARCH (Debian's name or the toolchain's: amd64|x86_64,
# arm64|aarch64, ppc64el|powerpc64le, s390x; default the host's):
#   ARCH_DEB      Debian's name (apt, debootstrap, the .deb files)
#   ARCH_RUST     the toolchain's name: Rust's, zig's and the Makefile's ARCH
#   ARCH_FOREIGN  1 when it is not the host's architecture
#   ARCH_KFLAVOUR the flavour of Debian's kernel (linux-image-FLAVOUR)
#   ARCH_BUILD    where make lib ARCH=... puts librsverbs.so.1 (relative):
#                 build, or build-ARCH_DEB for another architecture (the
#                 Makefile's default BUILD for that ARCH)
#   ARCH_QEMU     qemu-system binary and machine arguments (an array)
#   ARCH_CONSOLE  the kernel's console=
#   ARCH_NET_DEV  qemu's virtio-net device for the bus of this machine
#   ARCH_KERNEL   the file of Debian's kernel package that -kernel boots
#                 (boot/ARCH_KERNEL-KVER; x86's bzImage is unwrapped first)
#   ARCH_QEMU_USER qemu-user-static's binfmt_misc entry for it
#   ARCH_ELF      readelf -h's Machine and Data of its objects ("M|D")
case ${RSVERBS_ARCH:-$(dpkg --print-architecture)} in
amd64 | x86_64) ARCH_DEB=amd64 ARCH_RUST=x86_64 ARCH_KFLAVOUR=amd64 ARCH_CONSOLE=ttyS0
	ARCH_NET_DEV=virtio-net-pci ARCH_KERNEL=vmlinux ARCH_QEMU_USER=qemu-x86_64
	ARCH_ELF="Advanced Micro Devices X86-64|little endian"
	# q35: its virtio devices use MSI, which saves the ACPI interrupt link
	# setup of the default i440fx machine at every boot (testbed/README.md).
	ARCH_QEMU=(qemu-system-x86_64 -machine q35 -accel tcg,thread=multi -cpu max) ;;
arm64 | aarch64) ARCH_DEB=arm64 ARCH_RUST=aarch64 ARCH_KFLAVOUR=arm64 ARCH_CONSOLE=ttyAMA0
	ARCH_NET_DEV=virtio-net-pci ARCH_KERNEL=vmlinuz ARCH_QEMU_USER=qemu-aarch64
	ARCH_ELF="AArch64|little endian"
	# cortex-a72, not max: emulated pointer authentication makes max 2-3
	# times slower to boot and ~30 times slower on RDMA traffic (testbed/README.md).
	ARCH_QEMU=(qemu-system-aarch64 -machine virt -accel tcg,thread=multi -cpu cortex-a72) ;;
ppc64el | powerpc64le) ARCH_DEB=ppc64el ARCH_RUST=powerpc64le ARCH_KFLAVOUR=powerpc64le ARCH_CONSOLE=hvc0
	ARCH_NET_DEV=virtio-net-pci ARCH_KERNEL=vmlinux ARCH_QEMU_USER=qemu-ppc64le
	ARCH_ELF="PowerPC64|little endian"
	# The cap-* settings silence "TCG doesn't support requested feature";
	# x-vof=on boots without SLOF, about 5 s faster (testbed/README.md).
	ARCH_QEMU=(qemu-system-ppc64 -machine pseries,cap-cfpc=broken,cap-sbbc=broken,cap-ibs=broken,cap-ccf-assist=off,x-vof=on
		-accel tcg,thread=multi -cpu power9) ;;
s390x) ARCH_DEB=s390x ARCH_RUST=s390x ARCH_KFLAVOUR=s390x ARCH_CONSOLE=ttysclp0
	ARCH_NET_DEV=virtio-net-ccw ARCH_KERNEL=vmlinuz ARCH_QEMU_USER=qemu-s390x
	ARCH_ELF="IBM S/390|big endian"
	ARCH_QEMU=(qemu-system-s390x -machine s390-ccw-virtio -accel tcg,thread=multi -cpu max) ;;
*)
	printf 'testbed: RSVERBS_ARCH=%s: not one of amd64 arm64 ppc64el s390x\n' "$RSVERBS_ARCH" >&2
	exit 2
	;;
esac
ARCH_FOREIGN=0
[[ $ARCH_DEB == "$(dpkg --print-architecture)" ]] || ARCH_FOREIGN=1
ARCH_BUILD=build
((ARCH_FOREIGN == 0)) || ARCH_BUILD=build-$ARCH_DEB
# arch_test_bin USERLAND: where ctest/build.sh puts the test programs of
# USERLAND for this architecture (relative), and where the guest finds them.
arch_test_bin() {
	if ((ARCH_FOREIGN)); then
		echo "ctest/out/$1-$ARCH_DEB/bin"
	elif [[ $1 == bookworm ]]; then
		echo ctest/out/bin
	else
		echo "ctest/out/$1/bin"
	fi
}
# The Debian package holding ARCH_QEMU[0].
arch_qemu_package() {
	case $ARCH_DEB in
	amd64) echo qemu-system-x86 ;;
	arm64) echo qemu-system-arm ;;
	ppc64el) echo qemu-system-ppc ;;
	s390x) echo qemu-system-misc ;;
	esac
}
# arch_lib: another architecture's cross toolchain (tools/deps.sh --cross)
# and its library, build-ARCH/librsverbs.so.1 (make lib ARCH=...), for the
# drivers that give a foreign guest its library (ctest/vm_suite.sh,
# bench/run.sh).
arch_lib() {
	tools/deps.sh --cross "$ARCH_DEB" && make -s lib ARCH="$ARCH_DEB" BUILD="$PWD/$ARCH_BUILD"
}
