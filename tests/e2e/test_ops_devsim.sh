#!/usr/bin/env bash
# The op and decode tests again on the devsim backend (ZT_TEST_DEVICE=devsim): every case on
# simulated device memory, where a host access to a backend buffer crashes; case names carry the
# prefix "devsim:", and the thread-invariance checks also require the cpu backend's bits.
set -u
cd "$(dirname "$0")/../.."
rc=0
for t in test_ops test_ops_elementwise test_decode; do
  if [ ! -x build/tests/$t ]; then echo "FAIL devsim:$t: build/tests/$t missing (make build-all)"; rc=1; continue; fi
  ZT_TEST_DEVICE=devsim build/tests/$t || { r=$?; echo "# devsim:$t exited $r"; rc=1; }
done
exit $rc
