# Sourced by scripts/fuzz.sh (and its test): first_user_frame BINARY LOG prints the first stack
# frame of a sanitizer or libFuzzer report in LOG that is not the fuzz target's own runtime: not a
# frame of BINARY (libFuzzer, the sanitizers' interceptors), not the sanitizer runtime named by
# its own objects or namespaces (e.g. "AddressSanitizer: CHECK failed" reports start in
# __asan::CheckUnwind() asan_rtl.cpp.o), not libc, whether named by its module (libc.so.6+0x…)
# or, when glibc's debug information is installed, by its source file, a path relative to
# glibc's tree (string/../sysdeps/…/memmove-vec-unaligned-erms.S:333). Empty when the report
# has no such frame.
first_user_frame() {
  local binary=$1 log=$2
  grep -E '^ *#[0-9]+ 0x[0-9a-f]+ ' "$log" | grep -vF "($binary+" | grep -v '/libc\.so' \
    | grep -vE ' in [^ ]+ (\.\./)*(string|sysdeps|csu|nptl|stdlib|malloc|libio|posix|signal|elf|misc)/[^ ]+:[0-9]+' \
    | grep -vE ' in __(asan|sanitizer|ubsan|lsan|interception)::| (asan|ubsan|lsan|sanitizer)_[a-z_]+\.cpp\.o' \
    | head -n1
}

# is_libhdf5_frame FRAME: whether a frame printed by first_user_frame is libhdf5's, named by its
# module (libhdf5_openmpi.so…) or, when HDF5's debug information is installed, by its function
# (HDF5's names start with H5: H5Dread, H5VM_memcpyvv; kfmm's are in namespace kfmm) or its
# source file (src/H5VM.c).
is_libhdf5_frame() {
  grep -qE 'libhdf5|^ *#[0-9]+ 0x[0-9a-f]+ in H5[A-Za-z0-9_]* |/H5[A-Za-z0-9_]*\.c:[0-9]+' <<<"$1"
}
