#!/usr/bin/env bash
# Build.LibstdcxxIsTheFirstNeededLibrary: every mimic executable needs the shared libstdc++ before any other library
# and holds no static copy of std::filesystem (CMakeLists.txt, mimic_link_torch): pip torch's libtorch exports its
# own copies of those functions, and an executable that binds some of them there crashes (seen on a GPU machine,
# docs/gpu.md). Arguments: the executables.
set -uo pipefail
command -v readelf >/dev/null && command -v nm >/dev/null || { echo "readelf/nm missing (binutils)"; exit 1; }
fail=0
for exe in "$@"; do
  first=$(readelf -d "$exe" | grep -m1 '(NEEDED)' | sed 's/.*\[\(.*\)\]/\1/')
  own=$(nm -C --defined-only "$exe" 2>/dev/null | grep -cE ' [TW] std::filesystem::(__cxx11::)?(remove_all|path::_M_split_cmpts|create_directories)')
  echo "$(basename "$exe"): first needed $first; own std::filesystem definitions $own"
  [[ $first == libstdc++.so* ]] || { echo "  FAIL: libstdc++ is not the first needed library"; fail=1; }
  [ "$own" -eq 0 ] || { echo "  FAIL: a static copy of std::filesystem is linked in"; fail=1; }
done
exit $fail
