#!/bin/sh
# Regenerates Sources/PlinthCUDA/pkc_kernels_src.c (the kernels as a C string) from
# Sources/PlinthCUDA/pkc_kernels.cu, the source of truth. `embed.sh --check` only says whether
# the committed string is up to date (exit 1 when not). Both first check that every kernel
# begins with PKC_DEPENDENT().
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir="$here/../../Sources/PlinthCUDA"
gen() {
    printf '%s\n' '// Generated from pkc_kernels.cu by Benchmarks/cuda/embed.sh: do not edit.'
    printf '%s\n' '#include "pkc_internal.h"'
    printf '%s\n' ''
    printf '%s\n' 'const char pkc_kernels_source[] ='
    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/' "$dir/pkc_kernels.cu"
    printf '%s\n' '    ;'
}
# Every kernel's first statement is PKC_DEPENDENT(): a kernel launched to overlap the one before
# it must wait for it before touching memory (pkc_kernels.cu); and no load may be hoisted above
# that wait.
awk '
    # Loads through the non-coherent cache may be moved before the wait: none (llama.cpp#24030).
    /__restrict__|__ldg/ && !/^[[:space:]]*\/\// {
        print FILENAME ":" NR ": __restrict__ or __ldg, which dependent launch cannot have" > "/dev/stderr"
        bad = 1
    }
    /__global__/ && !/^[[:space:]]*\/\// { sig = 1 }
    sig && /[{][[:space:]]*[\\]?[[:space:]]*$/ { sig = 0; first = 1; next }
    first {
        first = 0
        if ($0 !~ /^[[:space:]]*PKC_DEPENDENT[(][)];/) {
            print FILENAME ":" NR ": a kernel whose first statement is not PKC_DEPENDENT();" > "/dev/stderr"
            bad = 1
        }
    }
    END { exit bad }
' "$dir/pkc_kernels.cu"
if [ "${1:-}" = "--check" ]; then
    gen | cmp -s - "$dir/pkc_kernels_src.c" || { echo "pkc_kernels_src.c is stale: run Benchmarks/cuda/embed.sh" >&2; exit 1; }
else
    gen > "$dir/pkc_kernels_src.c"
fi
