#!/bin/bash
# scripts/fuzz_first_frame.sh: which frame of a fuzzer's report decides "crash inside libhdf5"
# (the documented boundary of fuzz_particle_file_bytes) or a kfmm bug. The first report is
# the one a CI fuzz run of 2026-12-04 produced: heap metadata found corrupt when libhdf5 freed
# its cache, reported from the sanitizer runtime's own objects, which the classifier took for
# the first frame and so failed the stage on libhdf5's crash. The fourth is from the CI run of
# 2026-12-06: a SEGV in glibc's memcpy named by its source file (glibc's debug information was
# installed), not by libc.so, so the classifier stopped at it and failed the stage. The last
# cases are libhdf5's frames as they print when HDF5's debug information is installed too: by
# function and source file, without the module's name (is_libhdf5_frame).
set -u
source "$1/scripts/fuzz_first_frame.sh"
binary=/build-fuzz/fuzz_tests/fuzz_particle_file_bytes
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
expect() {  # expect NAME PATTERN LOG
  local frame
  frame=$(first_user_frame "$binary" "$3")
  if grep -q -- "$2" <<<"$frame"; then echo "ok: $1"; else echo "FAILED: $1: got '$frame', expected '$2'"; failures=$((failures + 1)); fi
}

cat >"$work/check_failed.log" <<LOG
AddressSanitizer: CHECK failed: asan_allocator.cpp:188 "((old)) == ((kAllocBegMagic))" (0x4c6e96b9cc6e96b9, 0xcc6e96b9cc6e96b9) (tid=11340)
    #0 0x56333d3a7751 in __asan::CheckUnwind() asan_rtl.cpp.o
    #1 0x56333d3c00e4 in __sanitizer::CheckFailed(char const*, int, char const*, unsigned long long, unsigned long long) ($binary+0x1090e4) (BuildId: 54612dea)
    #2 0x56333d320217 in __asan::QuarantineCallback::Recycle(__asan::AsanChunk*) ($binary+0x69217) (BuildId: 54612dea)
    #6 0x56333d39dc15 in free ($binary+0xe6c15) (BuildId: 54612dea)
    #7 0x7fe29bd2871a  (/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103+0x12871a) (BuildId: 817a0eaf)
    #8 0x7fe29bd28b34 in H5FL_reg_free (/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103+0x128b34) (BuildId: 817a0eaf)
    #18 0x7fe29cf6b7b3 in reset /tmp/kfmm-ci/io/hdf5_handle.hpp:42:29
LOG
expect "CHECK failed in the allocator under libhdf5's free" 'libhdf5' "$work/check_failed.log"

cat >"$work/kfmm_bug.log" <<LOG
==1234==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000010
    #0 0x7f0000001000 in kfmm::read_particles(kfmm::Context const&) /src/io/particle_file.cpp:910:16
    #1 0x7f0000002000 in H5Dread (/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103+0x1000)
LOG
expect "an overflow in kfmm's own code" 'particle_file.cpp' "$work/kfmm_bug.log"

cat >"$work/interceptor.log" <<LOG
==1234==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000
    #0 0x5600000001 in __interceptor_memcpy ($binary+0x1000)
    #1 0x7f0000003000 in H5T__conv_b_b (/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103+0x2000)
    #2 0x7f0000001000 in kfmm::read_particles(kfmm::Context const&) /src/io/particle_file.cpp:910:16
LOG
expect "an interceptor called from libhdf5" 'libhdf5' "$work/interceptor.log"

cat >"$work/libc_source_frame.log" <<LOG
==14729== ERROR: libFuzzer: deadly signal
    #0 0x55c88393af41 in __sanitizer_print_stack_trace ($binary+0xf0f41) (BuildId: 94ec4d7b)
    #1 0x55c8838ad898 in fuzzer::PrintStackTrace() ($binary+0x63898) (BuildId: 94ec4d7b)
    #2 0x55c883893163 in fuzzer::Fuzzer::CrashCallback() ($binary+0x49163) (BuildId: 94ec4d7b)
    #3 0x7f481e5f804f  (/lib/x86_64-linux-gnu/libc.so.6+0x3c04f) (BuildId: 93ac61ec)
    #4 0x7f481e72986f in __memcpy_avx512_unaligned_erms string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:333
    #5 0x55c8838c83d7 in __interceptor_memcpy ($binary+0x7e3d7) (BuildId: 94ec4d7b)
    #6 0x7f481f2c3f5a in H5VM_memcpyvv (/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103+0x2c3f5a) (BuildId: 817a0eaf)
    #7 0x7f481f0b8dd6  (/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103+0xb8dd6) (BuildId: 817a0eaf)
    #13 0x7f4820805a7b in kfmm::(anonymous namespace)::read_rows(long) /check/work/main/io/particle_file.cpp:573:9
    #25 0x7f481e5e3249 in __libc_start_call_main csu/../sysdeps/nptl/libc_start_call_main.h:58:16
LOG
expect "glibc's memcpy named by its source file, called from libhdf5" 'libhdf5' "$work/libc_source_frame.log"

cat >"$work/kfmm_under_libc.log" <<LOG
==1234==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000
    #0 0x7f481e72986f in __memcpy_avx512_unaligned_erms string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:333
    #1 0x7f0000001000 in kfmm::read_particles(kfmm::Context const&) /src/io/particle_file.cpp:910:16
    #2 0x7f0000002000 in H5Dread (/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103+0x1000)
LOG
expect "kfmm's own code under glibc's memcpy" 'particle_file.cpp' "$work/kfmm_under_libc.log"

expect_hdf5() {  # expect_hdf5 NAME yes|no LOG: is_libhdf5_frame of the first user frame
  local frame answer=no
  frame=$(first_user_frame "$binary" "$3")
  is_libhdf5_frame "$frame" && answer=yes
  if [ "$answer" = "$2" ]; then echo "ok: $1"; else echo "FAILED: $1: '$frame' is libhdf5's: $answer, expected $2"; failures=$((failures + 1)); fi
}
expect_hdf5 "libhdf5 named by its module" yes "$work/libc_source_frame.log"
expect_hdf5 "kfmm's own code" no "$work/kfmm_bug.log"
expect_hdf5 "kfmm's own code under glibc's memcpy" no "$work/kfmm_under_libc.log"

cat >"$work/hdf5_debug_info.log" <<LOG
==14729== ERROR: libFuzzer: deadly signal
    #0 0x55c88393af41 in __sanitizer_print_stack_trace ($binary+0xf0f41) (BuildId: 94ec4d7b)
    #3 0x7f481e5f804f  (/lib/x86_64-linux-gnu/libc.so.6+0x3c04f) (BuildId: 93ac61ec)
    #4 0x7f481e72986f in __memcpy_avx512_unaligned_erms string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:333
    #5 0x55c8838c83d7 in __interceptor_memcpy ($binary+0x7e3d7) (BuildId: 94ec4d7b)
    #6 0x7f481f2c3f5a in H5VM_memcpyvv ./src/H5VM.c:1481:13
    #7 0x7f481f0b8dd6 in H5D__contig_readvv_sieve_cb ./src/H5Dcontig.c:1063:13
    #13 0x7f4820805a7b in kfmm::(anonymous namespace)::read_rows(long) /check/work/main/io/particle_file.cpp:573:9
LOG
expect "libhdf5 named by function and source file" 'H5VM_memcpyvv' "$work/hdf5_debug_info.log"
expect_hdf5 "libhdf5 named by function and source file" yes "$work/hdf5_debug_info.log"

cat >"$work/hdf5_source_only.log" <<LOG
==1234==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000
    #0 0x7f481f0b8dd6  ./src/H5Dcontig.c:1063:13
    #1 0x7f0000001000 in kfmm::read_particles(kfmm::Context const&) /src/io/particle_file.cpp:910:16
LOG
expect_hdf5 "libhdf5 named by its source file alone" yes "$work/hdf5_source_only.log"

[ "$failures" -eq 0 ]
