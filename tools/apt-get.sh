#!/bin/sh
# The host's apt-get, one at a time among rsverbs' scripts: make check runs
# two lanes at once (ctest/check.sh), and both may install or update. apt's
# own locks refuse a second `apt-get update` outright ("Could not get lock
# /var/lib/apt/lists/lock"; DPkg::Lock::Timeout waits for the dpkg lock, not
# that one), so every host apt-get of ours waits here first, then for dpkg's
# lock as before. (The private configuration of testbed/apt.sh has its own
# lock: apt_private_update.)
#   tools/apt-get.sh ARGS...   apt-get ARGS..., its status
lock=/run/lock/rsverbs-apt.lock
[ -d /run/lock ] || lock=/tmp/rsverbs-apt.lock
exec flock -w 1800 "$lock" apt-get -o DPkg::Lock::Timeout=600 "$@"
